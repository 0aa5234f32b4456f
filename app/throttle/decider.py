"""Turns observation rounds into throttle decisions: cache -> policy -> factor lifecycle.

No I/O and no clock of its own: rounds carry their time and reads pass ``now``."""

from __future__ import annotations

from app.policy.limits import Evaluation, StoragePolicy, evaluate
from app.throttle.decision import ThrottleDecision, assemble
from app.throttle.factor import FactorReading, ThrottleFactorHolder
from app.volumes.cache import VolumeCache
from app.volumes.model import ObservationRound, VolumeKey, VolumeObservation


class ThrottleDecider:
    def __init__(
        self,
        policy: StoragePolicy,
        validity_seconds: float,
        fallback: float,
        started_at: float,
        enabled: bool = True,
    ) -> None:
        self.policy = policy
        self.fallback = fallback
        self.validity_seconds = validity_seconds
        self.cache = VolumeCache(validity_seconds)
        self.holder = ThrottleFactorHolder(validity_seconds, fallback, started_at, enabled)
        self.evaluation: Evaluation | None = None
        self.latest_round: ObservationRound | None = None
        self.active_brokers: tuple[int, ...] = ()
        self.evicted: list[VolumeObservation] = []
        self._breaching: frozenset[VolumeKey] = frozenset()

    def apply_round(self, round_: ObservationRound) -> Evaluation:
        now = round_.finished_at
        self.latest_round = round_
        if not round_.failed:
            self.active_brokers = round_.active_brokers
            self.cache.record_round(round_.answered_brokers, round_.observations)
        self.evicted = self.cache.evict_expired(now)
        volumes = self.cache.volumes()
        evaluation = evaluate(self.policy, volumes, self._breaching)
        self.evaluation = evaluation
        self._breaching = evaluation.breaching_keys

        # The decision is only as fresh as the oldest observation it rests on.
        data_valid_until = min((v.observed_at for v in volumes), default=now) + self.validity_seconds
        covered = self.cache.brokers()
        if round_.failed:
            self.holder.record_failure()
        elif all(broker in covered for broker in round_.active_brokers):
            self.holder.record_success(evaluation.factor, now, data_valid_until)
        else:
            self.holder.record_failure(evaluation.factor, data_valid_until)
        return evaluation

    def reading(self, now: float) -> FactorReading:
        return self.holder.read(now)

    def decision(self, now: float) -> tuple[ThrottleDecision, FactorReading]:
        reading = self.holder.read(now)
        decision = assemble(
            reading,
            self.policy,
            self.fallback,
            self.evaluation,
            self.latest_round,
            active_brokers=len(self.active_brokers),
            active_log_dirs=len(self.cache),
        )
        return decision, reading
