"""The FastAPI application: wiring of settings, volume source, decision and routers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator import metrics as http_metrics

from app.api import health, throttle, volumes
from app.api import metrics as metrics_api
from app.api import quotas as quotas_api
from app.api.problems import install_problem_handlers
from app.clock import Clock, system_clock
from app.history.files import HistoryFiles, Retention
from app.history.kafka_topic import HistoryTopic
from app.history.writer import HistoryCounters, HistoryWriter
from app.metrics import ServiceMetrics
from app.observer import Observer
from app.policy.limits import policy_from_levels
from app.quotas.service import QuotaService
from app.quotas.store import QuotaStore
from app.quotas.wire import QuotaTableModel, table_model
from app.settings import Settings
from app.throttle.board import Board
from app.throttle.decider import ThrottleDecider
from app.volumes.admin_config import to_kafka_python
from app.volumes.source import VolumeSource

API_VERSION = "0.1.0"
HTTP_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
QUOTA_STORE_FILE = "quotas.sqlite3"


def _render_quotas(quotas: QuotaService, now: float) -> tuple[QuotaTableModel, float | None]:
    reading = quotas.factor_reading(now)
    return table_model(quotas.table, reading), reading.next_change_at


def kafka_source_from(settings: Settings, clock: Clock) -> VolumeSource:
    from app.volumes.kafka_source import KafkaVolumeSource

    admin_config, _ = to_kafka_python(settings.kafka_admin)  # validated at load time
    assert settings.kafka_admin_bootstrap_servers is not None
    return KafkaVolumeSource(
        settings.kafka_admin_bootstrap_servers,
        settings.effective_kafka_request_timeout.total_seconds(),
        admin_config.settings,
        clock=clock,
        tls=admin_config.tls,
        interval_seconds=settings.storage_check_interval.total_seconds(),
    )


def build_observer(settings: Settings, clock: Clock, source: VolumeSource | None, registry: CollectorRegistry) -> Observer:
    policy = policy_from_levels(
        settings.storage_per_volume_limit_min_available_bytes,
        settings.storage_per_volume_limit_min_available_ratio,
        settings.storage_per_volume_soft_limit_min_available_bytes,
        settings.storage_per_volume_soft_limit_min_available_ratio,
        settings.storage_per_volume_limit_hysteresis_bytes,
        settings.storage_per_volume_limit_hysteresis_ratio,
    )
    decider = ThrottleDecider(
        policy,
        settings.throttle_factor_validity_duration.total_seconds(),
        settings.throttle_factor_fallback,
        started_at=clock(),
        enabled=settings.observation_enabled,
        keep_fenced=settings.fenced_broker_observations == "keep",
    )
    return Observer(decider, ServiceMetrics(registry), clock, source, settings.storage_check_interval.total_seconds())


def history_writer_from(settings: Settings, observer: Observer) -> HistoryWriter:
    metrics = observer.metrics
    counters = HistoryCounters(
        written=metrics.history_rows_written.inc,
        dropped=lambda reason, rows: metrics.history_rows_dropped.labels(reason).inc(rows),
        topic_errors=metrics.history_topic_errors.inc,
    )
    retention = Retention(settings.history_retention_days, settings.history_retention_bytes)
    topic = None
    if settings.history_kafka_enabled:
        topic = HistoryTopic(settings.history_kafka_topic, settings.history_producer_config, counters.topic_errors)
    return HistoryWriter(
        HistoryFiles(settings.effective_history_dir, retention),
        observer.decider.policy,
        settings.storage_check_interval.total_seconds(),
        counters,
        topic,
    )


def create_app(
    settings: Settings,
    source: VolumeSource | None = None,
    clock: Clock = system_clock,
    observe: bool = True,
) -> FastAPI:
    """Build the app. ``source`` defaults to the Kafka admin source of the settings;
    ``observe=False`` leaves the loop off so tests can apply rounds themselves."""
    if source is None and settings.observation_enabled and observe:
        source = kafka_source_from(settings, clock)
    registry = CollectorRegistry()
    observer = build_observer(settings, clock, source, registry)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        observer.board.refresh()
        store = QuotaStore(Path(settings.data_dir) / QUOTA_STORE_FILE)
        quotas = QuotaService(settings, store, observer.decider.reading, clock)
        quota_board: Board[QuotaTableModel] = Board(lambda now: _render_quotas(quotas, now), clock)
        observer.board.on_change(lambda new, old: quota_board.refresh())
        quotas.on_change(quota_board.refresh)
        quota_board.refresh()
        app.state.quotas = quotas
        app.state.quota_board = quota_board
        if settings.history_enabled and settings.observation_enabled:
            observer.history = history_writer_from(settings, observer)
            observer.history.start()
        task = None
        if observe and settings.observation_enabled and source is not None:
            task = asyncio.create_task(observer.run(), name="observer")
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if observer.history is not None:
                # Off the event loop: the writer finishes the queued rounds first.
                await asyncio.get_running_loop().run_in_executor(None, observer.history.close)
                observer.history = None
            store.close()

    app = FastAPI(
        title="Kafka throttle decision service",
        version=API_VERSION,
        description=(
            "Observes every log dir volume of a Kafka cluster (DescribeCluster + DescribeLogDirs) "
            "and serves the throttle factor that keeps the cluster from running out of disk."
        ),
        lifespan=lifespan,
        # operation ids are the handler names: generated clients get quota_table(), put_override(), ...
        generate_unique_id_function=lambda route: route.name,
    )
    app.state.observer = observer
    app.state.settings = settings
    install_problem_handlers(app)
    throttle.routes.install(app)
    quotas_api.routes.install(app)
    app.include_router(quotas_api.router)
    app.include_router(volumes.router)
    app.include_router(health.router)
    # Request counts and latencies per handler; the request/response size summaries of the
    # default set are left out: they double the cost of instrumenting the hot endpoints.
    instrumentator = Instrumentator(registry=registry, excluded_handlers=["/metrics"])
    instrumentator.add(
        http_metrics.requests(registry=registry),
        http_metrics.latency(registry=registry, buckets=HTTP_LATENCY_BUCKETS),
    )
    instrumentator.instrument(app)
    app.state.registry = registry
    app.include_router(metrics_api.router)
    return app
