"""Turns observation rounds into throttle decisions: cache -> policy -> factor lifecycle.

No I/O and no clock of its own: rounds carry their time and reads pass ``now``."""

from __future__ import annotations

import copy
from dataclasses import replace

from app.decision.decision import Decision, VolumeState
from app.decision.factor import FactorReading, FactorSource, ThrottleFactorHolder
from app.decision.fill_rate import NOT_ESTIMATED, TimeToFull
from app.decision.horizon import AppliedFactor, HorizonRule
from app.decision.merge import DEFAULT_TOLERANCE, MergedTimeline, ReportOverlay
from app.decision.metadata import MetadataStep, MetadataWatch
from app.decision.policy import Evaluation, StoragePolicy, VolumeStatus, VolumeVerdict
from app.decision.snapshot import Restored, restore_decider, snapshot_decider
from app.decision.timeline import Step, Timeline, ViewTimeline
from app.observation.cache import VolumeCache
from app.observation.model import NODE_REPORT, ObservationRound, VolumeKey, VolumeObservation
from app.observation.node_reports import NodeReport, NodeReportBook


def _earliest(*instants: float | None) -> float | None:
    known = [t for t in instants if t is not None]
    return min(known) if known else None


class ThrottleDecider:
    def __init__(
        self,
        policy: StoragePolicy,
        validity_seconds: float,
        fallback: float,
        started_at: float,
        enabled: bool = True,
        keep_fenced: bool = True,
        horizon_seconds: float | None = None,
        metadata_policy: StoragePolicy | None = None,
        report_tolerance: float = DEFAULT_TOLERANCE,
    ) -> None:
        self.policy = policy
        self._started_at = started_at
        self.fallback = fallback
        self.validity_seconds = validity_seconds
        self.cache = VolumeCache(validity_seconds, keep_fenced)
        self.holder = ThrottleFactorHolder(validity_seconds, fallback, started_at, enabled)
        self.evaluation: Evaluation | None = None
        self.latest_round: ObservationRound | None = None
        self.active_brokers: tuple[int, ...] = ()
        self.fenced_brokers: tuple[int, ...] = ()
        self.evicted: list[VolumeObservation] = []
        self.last_success_at = started_at
        self._breaching: frozenset[VolumeKey] = frozenset()
        self._view: Timeline | None = None  # the latest round's view of the cache over time
        # Time to full: only with a horizon; without one the decisions are the level rules' alone.
        self.horizon = HorizonRule(policy, horizon_seconds) if horizon_seconds is not None else None
        # The nodes' own reports of their volumes, and the metadata limits that judge them.
        self.metadata = MetadataWatch(
            metadata_policy, NodeReportBook(validity_seconds, keep_fenced), fallback, started_at
        )
        # The same reports' data dirs, over the admin observations (app/decision/merge.py).
        self.reported = ReportOverlay(policy, self.cache, self.metadata.book, report_tolerance)
        # When the state this decider resumed was saved by an earlier process (None once a round
        # of its own has been applied, or when it started afresh).
        self.resumed_from: float | None = None

    def resume(self, data: bytes, now: float) -> Restored:
        """Take up the state an earlier process saved (``snapshot_decider``): until its own
        first round, this decider serves what that one would serve now, as last-valid (it was
        observed by the earlier process, not by this one). Raises ``SnapshotError``."""
        restored = restore_decider(self, data, now)
        self.resumed_from = restored.saved_at
        self.holder.resumed()
        return restored

    def mirror(self, data: bytes, now: float) -> Restored:
        """Become exactly the decider whose snapshot ``data`` is (a replica serving the
        decision another replica made): every read answers as that one's. Raises
        ``SnapshotError`` for a snapshot taken under other settings."""
        fresh, restored = self.mirrored(data, now)
        self.adopt(fresh)
        return restored

    def mirrored(self, data: bytes, now: float) -> tuple[ThrottleDecider, Restored]:
        """A new decider with this one's settings and the state in ``data``: built apart (on
        any thread: it reads only this one's settings), then ``adopt``-ed at once."""
        fresh = ThrottleDecider(
            self.policy,
            self.validity_seconds,
            self.fallback,
            started_at=self._started_at,
            enabled=self.holder.enabled,
            keep_fenced=self.cache.keeps_fenced,
            horizon_seconds=self.horizon.horizon_seconds if self.horizon is not None else None,
            metadata_policy=self.metadata.policy,
            report_tolerance=self.reported.tolerance,
        )
        return fresh, restore_decider(fresh, data, now, exact_only=True)

    def adopt(self, other: ThrottleDecider) -> None:
        """Take ``other``'s state whole (built by ``mirrored``), in one step."""
        self.__dict__.update(other.__dict__)

    def snapshot(self, saved_at: float) -> bytes:
        """Everything this decider keeps between rounds (``resume`` and ``mirror`` take it)."""
        return snapshot_decider(self, saved_at)

    def apply_round(
        self, round_: ObservationRound, applied: AppliedFactor | None = None
    ) -> Evaluation:
        """Judge a round. ``applied``: the factor the brokers' shims applied while it was
        observed (the loop's, from the enforcement in force); None: this decider's factor in
        force as the round began, on every broker."""
        now = round_.finished_at
        self.latest_round = round_
        self.resumed_from = None
        if round_.cluster_answered:
            self.active_brokers = round_.active_brokers
            self.fenced_brokers = round_.fenced_brokers
            self.metadata.confirm_fenced(frozenset(round_.fenced_brokers), now)
        self.reported.evict(self.metadata.evict_expired(now))
        times_to_full: dict[VolumeKey, TimeToFull] | None = None
        if self.horizon is not None:
            # The factor the observations were made under: the one applied as the round began.
            if applied is None:
                applied = AppliedFactor(self.reading(round_.started_at).factor)
            times_to_full = self.horizon.record(round_.observations, applied)
        self.cache.record_round(round_)
        self.evicted = self.cache.evict_expired(now)
        if self.horizon is not None:
            self.horizon.forget(volume.key for volume in self.evicted)
        base = ViewTimeline(
            self.policy,
            self.cache.by_expiry(),
            self._breaching,
            now,
            self.validity_seconds,
            times_to_full,
        )
        # The nodes' reports over the round's view: a report taken later changes it at once.
        self.reported.rebase(base, round_, now)
        view = MergedTimeline(base, self.reported)
        step = view.at(now)
        assert step is not None  # nothing in the cache has expired at now
        evaluation = step.evaluation
        self.evaluation = evaluation
        self._breaching = evaluation.breaching_keys
        self._view = view
        covered = self.cache.brokers()
        if not round_.failed and all(broker in covered for broker in round_.active_brokers):
            self.holder.record_success(view)
            self.last_success_at = now
        else:
            self.holder.record_failure(view)
        return evaluation

    def judged_by(
        self, policy: StoragePolicy, horizon_seconds: float | None = None
    ) -> ThrottleDecider:
        """What this decider would say under ``policy`` and ``horizon_seconds`` (what-if; None:
        no time rule): a read-only twin holding the same cache, rounds and factor lifecycle,
        with every view judged again by ``policy`` and no volume remembered in breach
        (hysteresis holds only a volume that breached before, and which did under other limits
        is not known; a service restarted with ``policy`` starts so too). A horizon is judged on
        this decider's fill trends, replayed through the candidate's rule
        (``HorizonRule.judged_by``): it needs this decider to have a horizon. The candidate's
        time factors are those after the latest round, for every view the twin holds (after a
        round that missed a broker, the decider's last valid view keeps those of its own
        round). Only for ``decision`` and ``volumes``: it must not take rounds (it shares the
        cache)."""
        twin = copy.copy(self)
        twin.policy = policy
        if horizon_seconds is None:
            twin.horizon = None
        else:
            if self.horizon is None:
                raise ValueError(
                    "a horizon is judged on the fill trends, which only a decider with a horizon keeps"
                )
            twin.horizon = self.horizon.judged_by(
                policy, horizon_seconds, {v.key: v for v in self.cache.volumes()}
            )
        times_to_full = twin.horizon.at_risk if twin.horizon is not None else None
        twin.holder = self.holder.judged_by(policy, times_to_full)
        # a copy of this decider: its own private state, re-judged
        twin._view = self._view.judged_by(policy, times_to_full) if self._view is not None else None  # noqa: SLF001
        twin._breaching = frozenset()  # noqa: SLF001
        twin.evaluation = None
        return twin

    def record_node_report(self, report: NodeReport) -> None:
        """A node's report of its own volumes (PUT /nodes/{node_id}/volumes). Its metadata
        volumes are judged by the metadata limits; its data dirs are observations of the data
        decision from now on (the view's timeline reads them at once). It is not a round: the
        factor's lifecycle (observed, last-valid, fallback) stays the rounds'."""
        step = self.view_at(report.received_at)
        self.metadata.record(report)
        self.reported.record(
            report, step.evaluation.breaching_keys if step is not None else self._breaching
        )

    @property
    def report_discrepancies(self) -> int:
        """Discrepancy episodes between a node's report and DescribeLogDirs so far."""
        return self.reported.discrepancies

    def expires_at(self, volume: VolumeObservation) -> float:
        """The last instant ``volume`` (an admin observation or a report's) is in the view."""
        if volume.observed_by == NODE_REPORT:
            entry = self.reported.entries.get(volume.key)
            if entry is not None and entry.observed_at == volume.observed_at:
                return self.reported.expires_at(entry)
            return volume.observed_at + self.validity_seconds
        return self.cache.expires_at(volume)

    def reading(self, now: float) -> FactorReading:
        return self.with_metadata(self.holder.read(now), self.metadata.at(now))

    @staticmethod
    def with_metadata(reading: FactorReading, metadata: MetadataStep) -> FactorReading:
        """The cluster factor lowered by the metadata volumes that hold data too, and the
        mutation factor beside it."""
        return replace(
            reading,
            factor=ThrottleDecider.cluster_factor(reading.factor, metadata.data_factor),
            mutation_factor=metadata.mutation_factor,
            next_change_at=_earliest(reading.next_change_at, metadata.next_change_at),
        )

    @staticmethod
    def cluster_factor(data_factor: float, metadata_data_factor: float) -> float:
        """The data volumes' factor lowered by the metadata volumes that hold data too (their
        ``MetadataStep.data_factor``)."""
        return min(data_factor, metadata_data_factor)

    def metadata_at(self, now: float) -> MetadataStep:
        """The nodes' reports valid at ``now`` and the metadata decision they make."""
        return self.metadata.at(now)

    @property
    def fenced_now(self) -> frozenset[int]:
        """The brokers fenced at the latest round whose observations are kept."""
        return self.cache.fenced

    @property
    def keeps_trends(self) -> bool:
        """Fill trends are kept (a horizon is set): a time-to-full rule can be judged."""
        return self.horizon is not None

    def registered_brokers(self) -> set[int]:
        """The brokers of the current cluster view: active, fenced, or with an observation kept."""
        return set(self.active_brokers) | set(self.fenced_brokers) | self.cache.brokers()

    def view_at(self, now: float) -> Step | None:
        """The cached observations valid at ``now`` and their evaluation (None before the
        first round and once everything has expired)."""
        return self._view.at(now) if self._view is not None else None

    def decision(self, now: float) -> Decision:
        """The decision in force at ``now``: pure, so any read may ask."""
        metadata = self.metadata.at(now)
        reading = self.with_metadata(self.holder.read(now), metadata)
        step = self.view_at(now)
        view_change = self._view.next_change_after(now) if self._view is not None else None
        if view_change is not None and (
            reading.next_change_at is None or view_change < reading.next_change_at
        ):
            reading = replace(reading, next_change_at=view_change)
        shown = step if reading.source is not FactorSource.DISABLED else None
        return Decision(
            reading=reading,
            policy=self.policy,
            fallback=self.fallback,
            validity_seconds=self.validity_seconds,
            last_success_at=self.last_success_at,
            evaluation=shown.evaluation if shown is not None else None,
            latest_round=self.latest_round,
            active_brokers=len(self.active_brokers),
            log_dirs=len(step.volumes) if step is not None else 0,
            fenced=tuple(self.cache.fenced_volumes(shown.volumes)) if shown is not None else (),
            volumes=shown.volumes if shown is not None else (),
            fill_rates=self.horizon.rates if self.horizon is not None else None,
            metadata=metadata,
            metadata_policy=self.metadata.policy,
            resumed_from=self.resumed_from,
            report_discrepancies=self.reported.discrepancies,
        )

    def time_to_full(self, volume: VolumeObservation) -> TimeToFull | None:
        """The fill rate and time to the hard limit of ``volume``; None without a horizon."""
        if self.horizon is None:
            return None
        return (
            self.horizon.estimate(volume)
            if volume.capacity_known and volume.error is None
            else NOT_ESTIMATED
        )

    def volumes(self, now: float) -> list[VolumeState]:
        """Every observation in the view at ``now`` with the verdict it was given."""
        step = self.view_at(now)
        if step is None:
            return []
        evaluation = step.evaluation
        listed = {
            v.volume.key: v
            for v in (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged)
        }
        active, fenced = set(self.active_brokers), self.cache.fenced
        return [
            VolumeState(
                observation=volume,
                verdict=listed.get(volume.key) or VolumeVerdict(volume, VolumeStatus.OK, 1.0, ""),
                expires_at=self.expires_at(volume),
                broker_active=volume.broker_id in active,
                broker_fenced=volume.broker_id in fenced,
                time_to_full=self.time_to_full(volume),
            )
            for volume in sorted(step.volumes, key=lambda v: v.key)
        ]
