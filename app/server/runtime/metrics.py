"""Prometheus metrics of the decision (proposal 047 and "Re-thinking" names in comments).

Each app gets its own registry, so several apps (tests, benchmarks) never collide; it also
carries the process, platform and garbage collector metrics the default registry would have.
What describes the decision in force (factor, state, validity, limits) is read from the
domain's Decision at scrape time: expiry is judged when read, for metrics as for HTTP. A scrape
runs on a worker thread, and the decider's state belongs to the event loop: the scrape asks the
event loop for a frozen decision (``Decision.frozen``) and encodes it on its own thread. No
``*_created`` series: they double the counters and histograms and no rule reads them."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TypeVar

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, StateSetMetricFamily
from prometheus_client.registry import Collector

from app.decision.decision import Decision
from app.decision.factor import FactorSource
from app.decision.policy import FACTOR_RULES, Evaluation, LimitKind, State, VolumeStatus, rule_of
from app.observation.model import ObservationRound, VolumeObservation
from app.quotas.service import QuotaService
from app.server.runtime.saved_state import SavedState
from app.server.runtime.volume_metrics import VolumeCollector


def _package_version() -> str:
    try:
        return version("kafka-throttle-service")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


T = TypeVar("T")

# How long a scrape waits for the event loop to hand it the decision.
EVENT_LOOP_READ_SECONDS = 10.0


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


# The revision the image was built from (the Dockerfile's REVISION build argument); from a Git
# checkout, its commit.
REVISION_VARIABLE = "KAFKA_THROTTLE_REVISION"


def _revision() -> str:
    if os.environ.get(REVISION_VARIABLE):
        return os.environ[REVISION_VARIABLE]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit.stdout.strip() if commit.returncode == 0 and commit.stdout.strip() else "unknown"


class ServiceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        disable_created_metrics()  # process-wide; the service's registries are the only ones
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            registry.register(collector)
        Info(
            "kafka_throttle_build",
            "The running service's version and the revision it was built from",
            registry=registry,
        ).info({"version": _package_version(), "revision": _revision()})
        self.fallback_applied = Counter(  # [FallbackThrottleFactorApplied]
            "kafka_throttle_fallback_applied",
            "Times the fallback factor took over after the last valid factor expired",
            registry=registry,
        )
        self.limit_violations = Counter(  # [LimitViolated]
            "kafka_throttle_limit_violations",
            "Volumes found violating a limit, counted once per volume per observation round",
            ["limit"],
            registry=registry,
        )
        self.active_brokers = Gauge(  # [ActiveBrokers]
            "kafka_throttle_active_brokers",
            "Active brokers in the latest successful round",
            registry=registry,
        )
        self.fenced_brokers = Gauge(
            "kafka_throttle_fenced_brokers",
            "Brokers DescribeCluster lists as registered but fenced (stopped, or halted by a failed disk)",
            registry=registry,
        )
        self.active_log_dirs = Gauge(  # [ActiveLogDirs]
            "kafka_throttle_active_log_dirs",
            "Log dirs in the cached cluster view",
            registry=registry,
        )
        self.unjudged_log_dirs = Gauge(
            "kafka_throttle_unjudged_log_dirs",
            "Log dirs reporting no TotalBytes/UsableBytes (-1)",
            registry=registry,
        )
        self.offline_log_dirs = Gauge(
            "kafka_throttle_offline_log_dirs",
            "Log dirs reported with an error (offline, e.g. KAFKA_STORAGE_ERROR), each counted as breaching",
            registry=registry,
        )
        self.observation_errors = Counter(
            "kafka_throttle_observation_errors",
            "Failed observations: kind=round (nothing observed) or kind=broker (one broker missing)",
            ["kind"],
            registry=registry,
        )
        self.admin_connected = Gauge(  # "Connection status"
            "kafka_throttle_admin_connected",
            "1 if the latest round reached the cluster, else 0",
            registry=registry,
        )
        self.round_duration = Histogram(
            "kafka_throttle_round_duration_seconds",
            "Duration of an observation round",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.history_rows_written = Counter(
            "kafka_throttle_history_rows_written",
            "History rows written to the history files",
            registry=registry,
        )
        self.history_rows_dropped = Counter(
            "kafka_throttle_history_rows_dropped",
            "History rows not written: reason=queue_full (the writer fell behind) or write_error",
            ["reason"],
            registry=registry,
        )
        self.history_topic_errors = Counter(
            "kafka_throttle_history_topic_errors",
            "History rows the optional history topic failed to take or deliver",
            registry=registry,
        )
        for reason in ("queue_full", "write_error"):
            self.history_rows_dropped.labels(reason)
        # Set by the history writer (absent while the history is off): KafkaThrottleHistoryWriterStalled.
        self.history_written_at: float | None = None
        registry.register(HistoryWriterCollector(lambda: self.history_written_at))
        self._event_loop: asyncio.AbstractEventLoop | None = None
        for kind in ("round", "broker"):
            self.observation_errors.labels(kind)
        for limit in ("hard", "soft"):
            self.limit_violations.labels(limit)

    def reads_on(self, event_loop: asyncio.AbstractEventLoop) -> None:
        """The event loop that owns the decider: scrapes read the decision and the volumes on it."""
        self._event_loop = event_loop

    def _on_event_loop(self, read: Callable[[], T]) -> T:
        """``read()`` run on the event loop and its result handed to the calling thread (a
        scrape's); run here when this is the event loop's thread or none runs."""
        event_loop = self._event_loop
        if event_loop is None or not event_loop.is_running() or _running_loop() is event_loop:
            return read()
        result: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            if result.set_running_or_notify_cancel():
                try:
                    result.set_result(read())
                except BaseException as exc:  # noqa: BLE001 - handed to the scrape's thread, which raises it
                    result.set_exception(exc)

        event_loop.call_soon_threadsafe(run)
        try:
            return result.result(EVENT_LOOP_READ_SECONDS)
        finally:
            result.cancel()

    def bind_decision(self, decision: Callable[[], Decision]) -> None:
        """The decision in force, judged at scrape time on the event loop and frozen there."""
        self.registry.register(
            DecisionCollector(lambda: self._on_event_loop(lambda: decision().frozen()))
        )

    def bind_volumes(self, volumes: Callable[[], Iterable[VolumeObservation]]) -> None:
        """The cached volumes, copied on the event loop at scrape time."""
        self.registry.register(
            VolumeCollector(lambda: self._on_event_loop(lambda: tuple(volumes())))
        )

    def history_written(self, at: float) -> None:
        """The history writer wrote rows at ``at`` (epoch seconds), or started."""
        self.history_written_at = at

    def bind_saved_state(
        self, saved: Callable[[], SavedState | None], deciding: Callable[[], bool]
    ) -> None:
        """Whether this process observes (the decider among replicas), and the snapshots of its
        state that could not be kept."""
        self.registry.register(SavedStateCollector(saved, deciding))

    def bind_quotas(self, quotas: Callable[[], QuotaService | None]) -> None:
        """The quota table and its store, once the app has opened it."""
        self.registry.register(QuotaStoreCollector(quotas))

    def record_round(
        self,
        round_: ObservationRound,
        evaluation: Evaluation,
        active_brokers: int,
        fenced_brokers: int,
    ) -> None:
        self.round_duration.observe(max(0.0, round_.finished_at - round_.started_at))
        self.admin_connected.set(1 if round_.cluster_answered else 0)
        if round_.failed:
            self.observation_errors.labels("round").inc()
        if round_.missing_brokers:
            self.observation_errors.labels("broker").inc(len(round_.missing_brokers))
        self.active_brokers.set(active_brokers)
        self.fenced_brokers.set(fenced_brokers)
        self.active_log_dirs.set(evaluation.volume_count)
        self.unjudged_log_dirs.set(len(evaluation.unjudged))
        self.offline_log_dirs.set(
            sum(1 for verdict in evaluation.breaching if verdict.volume.error is not None)
        )
        if evaluation.breaching:
            self.limit_violations.labels("hard").inc(len(evaluation.breaching))
        if evaluation.ramping:
            self.limit_violations.labels("soft").inc(len(evaluation.ramping))


class DecisionCollector(Collector):
    """The decision in force: factor, state, where it comes from, until when it holds, the
    latest successful round, the validity and the limit levels."""

    def __init__(self, decision: Callable[[], Decision]) -> None:
        self._decision = decision

    def collect(
        self,
    ) -> Iterator[GaugeMetricFamily | StateSetMetricFamily | CounterMetricFamily]:
        decision = self._decision()
        reading = decision.reading
        yield GaugeMetricFamily(  # [ThrottleFactor]
            "kafka_throttle_factor",
            "Throttle factor in force (1 = no throttling, 0 = producers paused)",
            value=reading.factor,
        )
        yield StateSetMetricFamily(
            "kafka_throttle_state",
            "Throttle state in force: 1 for the state in force (OPEN, THROTTLE or PAUSE), 0 for the others",
            value={state.value: state is decision.state for state in State},
        )
        yield GaugeMetricFamily(  # "Throttling applied due lack of data"
            "kafka_throttle_fallback_in_force",
            "1 while the fallback factor applies for lack of valid data, else 0",
            value=1.0 if reading.source is FactorSource.FALLBACK else 0.0,
        )
        yield GaugeMetricFamily(
            "kafka_throttle_factor_validity_seconds",
            "How long a computed factor stays valid without a successful round (the validity duration)",
            value=decision.validity_seconds,
        )
        if reading.valid_until is not None:
            yield GaugeMetricFamily(
                "kafka_throttle_factor_valid_until_timestamp_seconds",
                "When the factor in force expires unless a round renews it (absent while the fallback applies)",
                value=reading.valid_until,
            )
        yield from _enforcement(decision)
        if reading.source is not FactorSource.DISABLED:
            yield GaugeMetricFamily(
                "kafka_throttle_last_successful_round_timestamp_seconds",
                "When the latest successful observation round finished (the start-up time until one has)",
                value=decision.last_success_at,
            )
        yield from _limit_levels(decision)
        yield from _rule_and_time_to_full(decision)
        yield from _metadata(decision)
        yield CounterMetricFamily(
            "kafka_throttle_node_report_discrepancies",
            "Episodes in which a node's own report of a data volume and DescribeLogDirs disagreed beyond the tolerance "
            "(the more conservative was used until they agreed)",
            value=decision.report_discrepancies,
        )


def _metadata(decision: Decision) -> Iterator[GaugeMetricFamily]:
    """The metadata log volumes the nodes report and the mutation factor they set (1 while no
    metadata limit is set): series named metadata, so an alert on them never reads as data."""
    metadata = decision.metadata
    yield GaugeMetricFamily(
        "kafka_throttle_mutation_factor",
        "Factor of CONTROLLER_MUTATION quotas set by the metadata volumes (1 = none in breach, 0 = partition mutations refused)",
        value=metadata.mutation_factor,
    )
    yield GaugeMetricFamily(
        "kafka_throttle_metadata_fallback_in_force",
        "1 while no metadata volume report is in the view and the fallback factor applies to mutations, else 0",
        value=1.0 if metadata.source is FactorSource.FALLBACK else 0.0,
    )
    yield GaugeMetricFamily(
        "kafka_throttle_reporting_nodes",
        "Nodes whose report of their own volumes is in the view",
        value=len(metadata.reporting_nodes),
    )
    labels = ["node_id", "log_dir", "holds"]
    available = GaugeMetricFamily(
        "kafka_throttle_metadata_volume_available_bytes",
        "Usable bytes of a node's metadata log volume",
        labels=labels,
    )
    total = GaugeMetricFamily(
        "kafka_throttle_metadata_volume_total_bytes",
        "Total bytes of a node's metadata log volume",
        labels=labels,
    )
    breaching = GaugeMetricFamily(
        "kafka_throttle_metadata_volume_breaching",
        "1 while a metadata log volume is at or below its hard metadata limit, else 0",
        labels=labels,
    )
    for volume in metadata.volumes:
        observed = volume.verdict.volume
        names = [str(observed.broker_id), observed.log_dir, ",".join(sorted(volume.entry.holds))]
        available.add_metric(names, observed.usable_bytes)
        total.add_metric(names, observed.total_bytes)
        breaching.add_metric(names, 1.0 if volume.verdict.status is VolumeStatus.BREACHING else 0.0)
    yield available
    yield total
    yield breaching
    policy = decision.metadata_policy
    if policy is not None:
        kind = "bytes" if policy.kind is LimitKind.MIN_AVAILABLE_BYTES else "ratio"
        levels = GaugeMetricFamily(
            f"kafka_throttle_metadata_limit_min_available_{kind}",
            "Metadata limit level: a metadata log volume at or below it refuses (hard) or slows (soft) partition mutations",
            labels=["limit"],
        )
        levels.add_metric(["hard"], policy.hard_level)
        if policy.soft_level is not None:
            levels.add_metric(["soft"], policy.soft_level)
        yield levels


def _rule_and_time_to_full(
    decision: Decision,
) -> Iterator[GaugeMetricFamily | StateSetMetricFamily]:
    """Which rule set the factor, and the fill rate and time to the hard limit of the volumes the
    horizon rule lists (a handful at most: reading every volume's trend at each scrape would cost
    what a round costs)."""
    rule = rule_of(decision.rule)
    yield StateSetMetricFamily(
        "kafka_throttle_rule",
        "The rule that set the factor: 1 for hard limit, soft limit, time to full or log dir error, 0 for the others (all 0 when open)",
        value={name: name == rule for name in FACTOR_RULES},
    )
    timed = [v for v in decision.listed if v.time_to_full is not None]
    if not timed:
        return
    rate = GaugeMetricFamily(
        "kafka_throttle_volume_fill_rate_bytes_per_second",
        "Net fill rate of a volume the horizon rule slows (the median of the slopes across half its recent trend)",
        labels=["broker_id", "log_dir"],
    )
    left = GaugeMetricFamily(
        "kafka_throttle_volume_seconds_to_hard_limit",
        "Seconds until that volume reaches its hard limit at its fill rate",
        labels=["broker_id", "log_dir"],
    )
    for verdict in timed:
        assert verdict.time_to_full is not None
        labels = [str(verdict.volume.broker_id), verdict.volume.log_dir]
        if verdict.time_to_full.fill_rate is not None:
            rate.add_metric(labels, verdict.time_to_full.fill_rate)
        if verdict.time_to_full.seconds_to_hard_limit is not None:
            left.add_metric(labels, verdict.time_to_full.seconds_to_hard_limit)
    yield rate
    yield left


class SavedStateCollector(Collector):
    def __init__(
        self, saved: Callable[[], SavedState | None], deciding: Callable[[], bool]
    ) -> None:
        self._saved = saved
        self._deciding = deciding

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        saved = self._saved()
        if saved is None:  # observation off: nothing is decided, nothing kept
            return
        yield GaugeMetricFamily(
            "kafka_throttle_deciding",
            "1 while this process observes the cluster and decides (one process; among replicas on the Kafka store, the elected "
            "decider), 0 while it serves the decision another replica made",
            value=1.0 if self._deciding() else 0.0,
        )
        yield CounterMetricFamily(
            "kafka_throttle_state_save_failures",
            "Snapshots of the decider's state (and node reports shared with other replicas) that could not be kept: the state "
            "file not writable, or the state topic not taking records",
            value=saved.failures,
        )


class QuotaStoreCollector(Collector):
    """What the quota store holds, the writes it did not take, and how far this replica trails
    the Kafka store's topic."""

    def __init__(self, quotas: Callable[[], QuotaService | None]) -> None:
        self._quotas = quotas

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        quotas = self._quotas()
        if quotas is None:
            return
        table = quotas.table
        yield GaugeMetricFamily(
            "kafka_throttle_quota_overrides",
            "Quota overrides the quota store holds",
            value=len(table.overrides),
        )
        yield GaugeMetricFamily(
            "kafka_throttle_quota_groups",
            "Quota groups the quota store holds",
            value=len(table.groups),
        )
        yield CounterMetricFamily(
            "kafka_throttle_quota_store_write_failures",
            "Changes through the API (quotas, groups, enforcement) the store did not take (unreachable, not authorised, timed out, a disk error)",
            value=quotas.write_failures,
        )
        yield GaugeMetricFamily(
            "kafka_throttle_quota_store_lag_records",
            "Records of the Kafka quota store's topic this replica has not applied yet (always 0 for SQLite)",
            value=quotas.store_lag,
        )


def _enforcement(decision: Decision) -> Iterator[GaugeMetricFamily]:
    """Whether the decision bites: kafka_throttle_factor is what the service decides, these say
    what the enforcing brokers apply (1 in shadow mode) and which brokers enforce."""
    enforcement = decision.enforcement
    yield GaugeMetricFamily(
        "kafka_throttle_enforced",
        "1 while enforcement is on (the shims apply the factor: every broker, or the canary brokers), 0 in shadow mode",
        value=1.0 if enforcement.enforced else 0.0,
    )
    yield GaugeMetricFamily(
        "kafka_throttle_applied_factor",
        "The factor enforcing brokers apply: kafka_throttle_factor while enforced, 1 in shadow mode",
        value=decision.factor if enforcement.enforced else 1.0,
    )
    yield GaugeMetricFamily(
        "kafka_throttle_canary_brokers",
        "Brokers named as canaries, the only ones that enforce while enforced (0: every broker enforces)",
        value=len(enforcement.canary_brokers),
    )


def _limit_levels(decision: Decision) -> Iterator[GaugeMetricFamily]:
    """The configured limits, in the unit of their kind (one kind per service)."""
    policy = decision.policy
    if policy.kind is LimitKind.MIN_AVAILABLE_BYTES:
        family = GaugeMetricFamily(
            "kafka_throttle_limit_min_available_bytes",
            "Limit level: a volume with this many usable bytes or fewer breaches (hard) or ramps (soft)",
            labels=["limit"],
        )
    else:
        family = GaugeMetricFamily(
            "kafka_throttle_limit_min_available_ratio",
            "Limit level: a volume whose usable/total ratio is this or lower breaches (hard) or ramps (soft)",
            labels=["limit"],
        )
    family.add_metric(["hard"], policy.hard_level)
    if policy.soft_level is not None:
        family.add_metric(["soft"], policy.soft_level)
    yield family


class HistoryWriterCollector(Collector):
    """When the history writer last wrote rows; nothing while the history is off."""

    def __init__(self, written_at: Callable[[], float | None]) -> None:
        self._written_at = written_at

    def collect(self) -> Iterator[GaugeMetricFamily]:
        at = self._written_at()
        if at is not None:
            yield GaugeMetricFamily(
                "kafka_throttle_history_last_written_timestamp_seconds",
                "When the history writer last wrote rows to the history files (its start until it has)",
                value=at,
            )
