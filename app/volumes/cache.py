"""The last observation of every (broker id, log dir), kept for the validity duration.

A broker that restarts drops out of DescribeCluster for a while; forgetting its volumes at
once would make a full disk vanish from the decision. Observations are therefore kept until
they are older than the validity duration, then evicted."""

from __future__ import annotations

from collections.abc import Iterable

from app.volumes.model import VolumeKey, VolumeObservation


class VolumeCache:
    def __init__(self, validity_seconds: float) -> None:
        self._validity = validity_seconds
        self._entries: dict[VolumeKey, VolumeObservation] = {}

    def record_round(self, answered: Iterable[int], observations: Iterable[VolumeObservation]) -> None:
        """Replace everything known about each broker that answered with its fresh answer.

        A broker's answer lists all of its log dirs, so a log dir it no longer reports is
        dropped rather than kept as a ghost; brokers that did not answer keep theirs."""
        answered_brokers = set(answered)
        entries = {key: o for key, o in self._entries.items() if key[0] not in answered_brokers}
        for observation in observations:
            entries[(observation.broker_id, observation.log_dir)] = observation
        self._entries = entries

    def evict_expired(self, now: float) -> list[VolumeObservation]:
        """Drop observations older than the validity duration; an observation exactly
        ``validity`` old is still valid. Returns what was evicted."""
        expired = [o for o in self._entries.values() if now - o.observed_at > self._validity]
        for observation in expired:
            del self._entries[observation.key]
        return expired

    def volumes(self) -> list[VolumeObservation]:
        return list(self._entries.values())

    def brokers(self) -> set[int]:
        return {key[0] for key in self._entries}

    def __len__(self) -> int:
        return len(self._entries)
