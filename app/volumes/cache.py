"""The last observation of every (broker id, log dir), and how long each stays in the view.

A broker that restarts drops out of DescribeCluster for a while; forgetting its volumes at
once would make a full disk vanish from the decision. An observation therefore stays in the
view until it is older than the validity duration.

A broker that DescribeCluster still lists, but as fenced, is registered and not serving:
stopped, or halted because its log dirs failed (a full disk). With ``keep_fenced`` its last
observation is confirmed by every round that lists it so: it stays in the view for as long as
the broker stays registered, so a dead broker with a full disk keeps the cluster paused until
it is back with room or an operator unregisters it. Once a broker is neither active nor
fenced (unregistered), its observation expires a validity duration after it was last seen or
confirmed, as any other."""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.volumes.model import ObservationRound, VolumeKey, VolumeObservation


@dataclass(frozen=True, slots=True)
class CachedVolume:
    observation: VolumeObservation
    # The latest instant the service knew this observation to stand: when it was made, or the
    # latest round that listed its broker as fenced (with keep_fenced).
    confirmed_at: float
    broker_fenced: bool = False

    @property
    def key(self) -> VolumeKey:
        return self.observation.key


class VolumeCache:
    def __init__(self, validity_seconds: float, keep_fenced: bool = True) -> None:
        self._validity = validity_seconds
        self._keep_fenced = keep_fenced
        self._entries: dict[VolumeKey, CachedVolume] = {}

    @property
    def validity_seconds(self) -> float:
        return self._validity

    @property
    def keeps_fenced(self) -> bool:
        return self._keep_fenced

    def expires_at(self, entry: CachedVolume) -> float:
        """The last instant ``entry`` is in the view: exactly validity old is still valid."""
        return entry.confirmed_at + self._validity

    def record_round(self, round_: ObservationRound) -> None:
        """Apply what one round learned.

        Each broker that answered replaces everything known about it with its fresh answer (a
        broker's answer lists all of its log dirs, so a log dir it no longer reports is
        dropped rather than kept as a ghost); brokers that did not answer keep theirs. When
        DescribeCluster answered, the fenced flag of every cached broker follows it."""
        entries = self._entries
        if not round_.failed:
            answered = set(round_.answered_brokers)
            entries = {key: entry for key, entry in entries.items() if key[0] not in answered}
            for observation in round_.observations:
                entries[observation.key] = CachedVolume(observation, observation.observed_at)
        if round_.cluster_answered and (round_.fenced_brokers or any(e.broker_fenced for e in entries.values())):
            fenced = set(round_.fenced_brokers)
            confirmed_at = round_.finished_at
            for key, entry in entries.items():
                is_fenced = key[0] in fenced
                if is_fenced and self._keep_fenced:
                    entries[key] = replace(entry, confirmed_at=max(entry.confirmed_at, confirmed_at), broker_fenced=True)
                elif is_fenced != entry.broker_fenced:
                    entries[key] = replace(entry, broker_fenced=is_fenced)
        self._entries = dict(entries)

    def evict_expired(self, now: float) -> list[VolumeObservation]:
        """Drop what is past its validity at ``now``. Returns what was evicted."""
        expired = [entry for entry in self._entries.values() if now > self.expires_at(entry)]
        for entry in expired:
            del self._entries[entry.key]
        return [entry.observation for entry in expired]

    def entries(self) -> list[CachedVolume]:
        return list(self._entries.values())

    def volumes(self) -> list[VolumeObservation]:
        return [entry.observation for entry in self._entries.values()]

    def brokers(self) -> set[int]:
        return {key[0] for key in self._entries}

    def __len__(self) -> int:
        return len(self._entries)
