"""The decision in force at one moment, and why: plain data the server turns into its response,
the history turns into rows and the metrics read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from app.decision.enforcement import ENFORCE_EVERYWHERE, Enforcement
from app.decision.factor import FactorReading, FactorSource
from app.decision.fill_rate import TimeToFull
from app.decision.metadata import UNLIMITED, MetadataStep
from app.decision.policy import Evaluation, State, StoragePolicy, VolumeVerdict
from app.observation.model import ObservationRound, VolumeKey, VolumeObservation


@dataclass(frozen=True)
class Decision:
    reading: FactorReading
    policy: StoragePolicy
    fallback: float
    validity_seconds: float
    # When the latest successful round (one that renewed the factor) finished; until one has,
    # the start-up time, from which the initial factor is valid as if computed then.
    last_success_at: float
    # The evaluation of the observations in the view now; None before the first round, once
    # everything has expired, or with observation switched off.
    evaluation: Evaluation | None
    latest_round: ObservationRound | None
    active_brokers: int  # listed as active by the latest DescribeCluster answer
    log_dirs: int  # observations in the view now
    fenced: tuple[VolumeObservation, ...]  # observations in the view whose broker is fenced
    # Every observation in the view now, fresh or kept: what ``evaluation`` judged (empty
    # when it is None). The history writes a row for each.
    volumes: Sequence[VolumeObservation] = ()
    # Whether the factor bites, and on which brokers; the decider leaves it to whoever holds the
    # enforcement in force (the quota service) to set.
    enforcement: Enforcement = ENFORCE_EVERYWHERE
    # With a horizon: the fill rate (bytes/s) the horizon rule estimated for each volume in the
    # latest round (None while a trend is too short); None without a horizon.
    fill_rates: Mapping[VolumeKey, float | None] | None = None
    # The metadata volumes the nodes reported, judged by the metadata limits (None: none set).
    metadata: MetadataStep = UNLIMITED
    metadata_policy: StoragePolicy | None = None
    # When the state in force was saved by an earlier process of the service: it serves what
    # that one decided until a round of its own (None once it has one, or after a fresh start).
    resumed_from: float | None = None
    # Discrepancy episodes between a node's report and DescribeLogDirs so far (app/decision/merge.py).
    report_discrepancies: int = 0

    def frozen(self) -> Decision:
        """This decision with nothing left that reads the decider later: its volumes, fill rates
        and metadata volumes copied now. What goes to another thread (the history writer, a
        metrics scrape) is this, taken in the round: a view of the decider's dicts would show
        them as they are when read, and fail when the event loop changes them meanwhile."""
        rates = self.fill_rates
        return replace(
            self,
            volumes=tuple(self.volumes),
            fill_rates=None if rates is None else MappingProxyType(dict(rates)),
            metadata=self.metadata.frozen(),
        )

    @property
    def factor(self) -> float:
        return self.reading.factor

    @property
    def mutation_factor(self) -> float:
        return self.reading.mutation_factor

    @property
    def state(self) -> State:
        return State.of(self.reading.factor)

    @property
    def source(self) -> FactorSource:
        return self.reading.source

    @property
    def enforced(self) -> bool:
        return self.enforcement.enforced

    @property
    def fenced_brokers(self) -> frozenset[int]:
        return frozenset(volume.broker_id for volume in self.fenced)

    @property
    def listed(self) -> tuple[VolumeVerdict, ...]:
        """The volumes that set the factor: breaching, else ramping."""
        if self.evaluation is None:
            return ()
        return self.evaluation.breaching or self.evaluation.ramping

    @property
    def rule(self) -> str | None:
        """The rule that set the factor: the reason of the volume asking for the least factor
        ("hard limit", "soft limit", "time to full", a log dir error); None when none did."""
        listed = self.listed
        if not listed or self.factor >= 1.0:
            return None
        return min(listed, key=lambda v: v.factor).reason


@dataclass(frozen=True, slots=True)
class VolumeState:
    """One volume in the view, as /volumes shows it."""

    observation: VolumeObservation
    verdict: VolumeVerdict
    expires_at: float  # when it leaves the view unless a round renews it
    broker_active: bool
    broker_fenced: bool
    time_to_full: TimeToFull | None = None  # fill rate and time to the hard limit, with a horizon
