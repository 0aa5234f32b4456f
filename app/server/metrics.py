"""Prometheus metrics of the decision (proposal 047 and "Re-thinking" names in comments).

Each app gets its own registry, so several apps (tests, benchmarks) never collide. Gauges
that describe the factor read the published decision at scrape time: expiry is judged when
read, for metrics as for HTTP."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.decision.factor import FactorReading, FactorSource
from app.decision.policy import Evaluation, State
from app.observation.model import ObservationRound, VolumeObservation

_STATE_VALUE = {State.OPEN: 0, State.THROTTLE: 1, State.PAUSE: 2}


class ServiceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.throttle_factor = Gauge(  # [ThrottleFactor]
            "kafka_throttle_factor", "Throttle factor in force (1 = no throttling, 0 = producers paused)", registry=registry
        )
        self.state = Gauge(
            "kafka_throttle_state", "Throttle state in force: 0 OPEN, 1 THROTTLE, 2 PAUSE", registry=registry
        )
        self.lack_of_data = Gauge(  # "Throttling applied due lack of data"
            "kafka_throttle_fallback_in_force",
            "1 while the fallback factor applies for lack of valid data, else 0",
            registry=registry,
        )
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
            "kafka_throttle_active_brokers", "Active brokers in the latest successful round", registry=registry
        )
        self.fenced_brokers = Gauge(
            "kafka_throttle_fenced_brokers",
            "Brokers DescribeCluster lists as registered but fenced (stopped, or halted by a failed disk)",
            registry=registry,
        )
        self.active_log_dirs = Gauge(  # [ActiveLogDirs]
            "kafka_throttle_active_log_dirs", "Log dirs in the cached cluster view", registry=registry
        )
        self.unjudged_log_dirs = Gauge(
            "kafka_throttle_unjudged_log_dirs", "Log dirs reporting no TotalBytes/UsableBytes (-1)", registry=registry
        )
        self.observation_errors = Counter(
            "kafka_throttle_observation_errors",
            "Failed observations: kind=round (nothing observed) or kind=broker (one broker missing)",
            ["kind"],
            registry=registry,
        )
        self.admin_connected = Gauge(  # "Connection status"
            "kafka_throttle_admin_connected", "1 if the latest round reached the cluster, else 0", registry=registry
        )
        self.round_duration = Histogram(
            "kafka_throttle_round_duration_seconds",
            "Duration of an observation round",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.history_rows_written = Counter(
            "kafka_throttle_history_rows_written", "History rows written to the history files", registry=registry
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
        for kind in ("round", "broker"):
            self.observation_errors.labels(kind)
        for limit in ("hard", "soft"):
            self.limit_violations.labels(limit)

    def bind_reading(self, read: Callable[[], FactorReading]) -> None:
        """Gauges of the factor in force, judged at scrape time (scrapes run on a worker
        thread: ``read`` must be safe there, as the decider's pure reading is)."""
        self.throttle_factor.set_function(lambda: read().factor)
        self.state.set_function(lambda: _STATE_VALUE[State.of(read().factor)])
        self.lack_of_data.set_function(lambda: 1.0 if read().source is FactorSource.FALLBACK else 0.0)

    def bind_volumes(self, volumes: Callable[[], Iterable[VolumeObservation]]) -> None:
        self.registry.register(VolumeCollector(volumes))

    def record_round(self, round_: ObservationRound, evaluation: Evaluation, active_brokers: int, fenced_brokers: int) -> None:
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
        if evaluation.breaching:
            self.limit_violations.labels("hard").inc(len(evaluation.breaching))
        if evaluation.ramping:
            self.limit_violations.labels("soft").inc(len(evaluation.ramping))


class VolumeCollector(Collector):
    """Per-volume gauges read from the cache at scrape time.

    Setting 2 x 12,000 labelled gauges every round would cost more than the whole decision;
    reading the cache when Prometheus asks costs nothing between scrapes, and a volume that
    leaves the cache leaves the metrics with it."""

    def __init__(self, volumes: Callable[[], Iterable[VolumeObservation]]) -> None:
        self._volumes = volumes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        available = GaugeMetricFamily("kafka_throttle_volume_available_bytes", "Usable bytes of a log dir's volume", labels=["broker_id", "log_dir"])
        total = GaugeMetricFamily("kafka_throttle_volume_total_bytes", "Total bytes of a log dir's volume", labels=["broker_id", "log_dir"])
        for volume in self._volumes():
            labels = [str(volume.broker_id), volume.log_dir]
            available.add_metric(labels, volume.usable_bytes)
            total.add_metric(labels, volume.total_bytes)
        yield available
        yield total
