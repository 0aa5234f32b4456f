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

from collections import defaultdict
from collections.abc import Iterable
from itertools import groupby
from operator import itemgetter

from app.observation.model import (
    BROKER_ID,
    LOG_DIR,
    OBSERVED_AT,
    ObservationRound,
    VolumeKey,
    VolumeObservation,
)

_FIRST = itemgetter(0)


class VolumeCache:
    def __init__(self, validity_seconds: float, keep_fenced: bool = True) -> None:
        self._validity = validity_seconds
        self._keep_fenced = keep_fenced
        self._entries: dict[VolumeKey, VolumeObservation] = {}
        # Observations confirmed after they were made: a fenced broker's, by the rounds that
        # listed it (with keep_fenced). Few or none; everything else is valid from observed_at.
        self._confirmed: dict[VolumeKey, float] = {}
        self._fenced: frozenset[int] = (
            frozenset()
        )  # as the latest DescribeCluster answer listed them
        self._brokers_of: tuple[dict[VolumeKey, VolumeObservation], int, frozenset[int]] = (
            self._entries,
            0,
            frozenset(),
        )

    @property
    def validity_seconds(self) -> float:
        return self._validity

    @property
    def keeps_fenced(self) -> bool:
        return self._keep_fenced

    @property
    def fenced(self) -> frozenset[int]:
        """The brokers the latest DescribeCluster answer listed as fenced."""
        return self._fenced

    def expires_at(self, volume: VolumeObservation) -> float:
        """The last instant ``volume`` is in the view: exactly validity old is still valid."""
        if self._confirmed:
            return (
                self._confirmed.get((volume.broker_id, volume.log_dir), volume.observed_at)
                + self._validity
            )
        return volume.observed_at + self._validity

    def record_round(self, round_: ObservationRound) -> None:
        """Apply what one round learned.

        Each broker that answered replaces everything known about it with its fresh answer (a
        broker's answer lists all of its log dirs, so a log dir it no longer reports is
        dropped rather than kept as a ghost); brokers that did not answer keep theirs. When
        DescribeCluster answered, it says which brokers are fenced, and with keep_fenced that
        confirms their observations."""
        if not round_.failed:
            answered = set(round_.answered_brokers)
            # Most often every broker known answered: nothing of the old entries is kept.
            entries = (
                {}
                if answered.issuperset(self._brokers())
                else {key: o for key, o in self._entries.items() if key[0] not in answered}
            )
            observations = round_.observations
            entries.update(
                zip(zip(map(BROKER_ID, observations), map(LOG_DIR, observations)), observations)
            )
            self._entries = entries
            if self._confirmed:
                self._confirmed = {
                    key: at for key, at in self._confirmed.items() if key[0] not in answered
                }
        if round_.cluster_answered:
            self._fenced = frozenset(round_.fenced_brokers)
            if self._fenced and self._keep_fenced:
                for key in self._entries:
                    if key[0] in self._fenced:
                        self._confirmed[key] = round_.finished_at

    def evict_expired(self, now: float) -> list[VolumeObservation]:
        """Drop what is past its validity at ``now``. Returns what was evicted."""
        if self._confirmed:
            expired = [o for o in self._entries.values() if now > self.expires_at(o)]
        else:
            validity = self._validity
            expired = [o for o in self._entries.values() if now > o.observed_at + validity]
        for observation in expired:
            key = (observation.broker_id, observation.log_dir)
            del self._entries[key]
            self._confirmed.pop(key, None)
        return expired

    def by_expiry(self) -> dict[float, list[VolumeObservation]]:
        """The observations grouped by the instant each leaves the view."""
        groups: defaultdict[float, list[VolumeObservation]] = defaultdict(list)
        if self._confirmed:
            for observation in self._entries.values():
                groups[self.expires_at(observation)].append(observation)
        else:
            by_time: defaultdict[float, list[VolumeObservation]] = defaultdict(list)
            # A round's observations share their time and come one after another: taken in runs.
            for observed_at, run in groupby(self._entries.values(), OBSERVED_AT):
                by_time[observed_at] += run
            for observed_at, volumes in by_time.items():
                groups[observed_at + self._validity] += volumes
        return dict(groups)

    def volumes(self) -> list[VolumeObservation]:
        return list(self._entries.values())

    def get(self, key: VolumeKey) -> VolumeObservation | None:
        """The observation of ``key`` in the cache, if any (expired or not: see ``expires_at``)."""
        return self._entries.get(key)

    def brokers(self) -> set[int]:
        return set(self._brokers())

    def _brokers(self) -> frozenset[int]:
        """The brokers with an entry, kept while the entries are the same: a round replaces
        the dict, an eviction only removes from it (a restore sets another)."""
        entries, count, brokers = self._brokers_of
        if entries is not self._entries or count != len(self._entries):
            brokers = frozenset(map(_FIRST, self._entries))
            self._brokers_of = (self._entries, len(self._entries), brokers)
        return brokers

    def fenced_volumes(self, volumes: Iterable[VolumeObservation]) -> list[VolumeObservation]:
        """Those of ``volumes`` whose broker is fenced."""
        fenced = self._fenced
        return [v for v in volumes if v.broker_id in fenced] if fenced else []

    def __len__(self) -> int:
        return len(self._entries)
