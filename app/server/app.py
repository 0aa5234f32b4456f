"""The FastAPI application: the wiring of settings, volume source, decider, loop, publications
and routes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from prometheus_client import CollectorRegistry

from app.clock import Clock, system_clock
from app.decision.decider import ThrottleDecider
from app.decision.report_levels import ReportLevels, ReportOn
from app.decision.snapshot import SnapshotError
from app.history.compact import Compaction
from app.history.files import HistoryFiles, Retention
from app.history.kafka_topic import HistoryTopic
from app.history.schema import Codec
from app.history.writer import HistoryCounters, HistoryWriter
from app.kafka.admin_config import to_kafka_python, to_librdkafka
from app.observation.source import VolumeSource
from app.quotas.kafka_store import KafkaQuotaStore
from app.quotas.service import QuotaService
from app.quotas.storage import QuotaStorage
from app.quotas.store import QuotaStore, store_file
from app.server.api.audit import AuditLog
from app.server.api.http_metrics import instrument_http
from app.server.api.routes import (
    enforcement,
    health,
    metrics,
    nodes,
    quotas,
    throttle,
    volumes,
    what_if,
)
from app.server.api.schemas.bounds import bound_by_settings
from app.server.api.schemas.decision import ThrottleDecision, decision_etag_basis, decision_response
from app.server.api.schemas.nodes import plain_report
from app.server.api.schemas.quotas import QuotaTableModel, QuotaTableRenderer
from app.server.api.view_cache import ViewCache
from app.server.edge.admission import AdminToken, BodyLimit, HeadAsGet
from app.server.edge.direct_route import DirectRoute, served_route
from app.server.edge.methods import MethodGate
from app.server.edge.problems import UnexpectedErrors, install_problem_handlers
from app.server.edge.query import strict_query
from app.server.edge.report_lane import ReportLane
from app.server.runtime import report_rate
from app.server.runtime.enforcement import EnforcementInForce
from app.server.runtime.loop import ObservationLoop
from app.server.runtime.metrics import ServiceMetrics
from app.server.runtime.node_intake import NodeIntake
from app.server.runtime.publisher import Publisher
from app.server.runtime.publishing import Publication, Rendering
from app.server.runtime.saved_state import SavedState, StateFile
from app.server.runtime.service import Service
from app.server.runtime.shared_state import Replica, SharedState, state_topic_name
from app.settings import Settings
from app.settings.limits import metadata_policy, storage_policy
from app.timefmt import iso_instant

API_VERSION = "0.1.0"

state_log = logging.getLogger("app.state")
# How long start-up waits for the state topic (Kafka store) before serving.
STATE_LOAD_WAIT_SECONDS = 10.0
# The nodes' reports, served without FastAPI's request machinery (app/server/edge/direct_route.py)
# and, when plain, by the HTTP connection itself (app/server/edge/report_lane.py).
NODE_REPORT_ROUTE: dict[str, Any] = {
    "method": "PUT",
    "path": "/nodes/{node_id}/volumes",
    "passive_dependencies": (nodes.node_bearer, strict_query),
}


def kafka_source_from(settings: Settings, clock: Clock) -> VolumeSource:
    from app.kafka.volume_source import KafkaVolumeSource

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


def quota_store_from(settings: Settings) -> QuotaStorage:
    """The SQLite file of this replica, or the Kafka topic every replica shares (following it
    starts at once, in the background: the table is served once the topic has been read)."""
    if settings.quota_store == "kafka":
        assert (
            settings.kafka_admin_bootstrap_servers is not None
        )  # checked when the settings loaded
        store = KafkaQuotaStore(
            settings.quota_store_topic,
            to_librdkafka(settings.kafka_admin, settings.kafka_admin_bootstrap_servers),
        )
        store.start()
        return store
    return QuotaStore(
        store_file(settings.data_dir)
    )  # checked once more: the command line checked it before serving


def decider_from(settings: Settings, clock: Clock) -> ThrottleDecider:
    return ThrottleDecider(
        storage_policy(settings),
        settings.throttle_factor_validity_duration.total_seconds(),
        settings.throttle_factor_fallback,
        started_at=clock(),
        enabled=settings.observation_enabled,
        keep_fenced=settings.fenced_broker_observations == "keep",
        horizon_seconds=settings.ramp_horizon.total_seconds()
        if settings.ramp_horizon is not None
        else None,
        metadata_policy=metadata_policy(settings),
        report_tolerance=settings.storage_node_report_tolerance_ratio,
    )


async def saved_state_from(
    settings: Settings, loop: ObservationLoop, intake: NodeIntake, clock: Clock
) -> SavedState | None:
    """Where this service keeps its decider's state: with the SQLite store a file in the data
    dir, which the decider resumes from here; with the Kafka store the state topic every replica
    shares (app/server/runtime/shared_state.py), which it mirrors as it reads it. None with observation
    off (nothing to keep)."""
    if not settings.observation_enabled:
        return None
    decider = loop.decider
    if settings.quota_store == "kafka":
        assert (
            settings.kafka_admin_bootstrap_servers is not None
        )  # checked when the settings loaded
        shared = SharedState(
            state_topic_name(settings.quota_store_topic),
            to_librdkafka(settings.kafka_admin, settings.kafka_admin_bootstrap_servers),
        )
        replica = Replica(shared, loop, intake, clock)
        shared.start(asyncio.get_running_loop())
        # Nothing is served before the latest decision is mirrored (a balancer that does not
        # wait for /readyz would hand a shim the start-up OPEN): the topic holds one snapshot
        # and the node reports since, read in well under a second; with Kafka unreachable the
        # service starts after this wait, as from nothing.
        if await asyncio.get_running_loop().run_in_executor(
            None, shared.wait_loaded, STATE_LOAD_WAIT_SECONDS
        ):
            replica.mirror_loaded()
        else:
            state_log.warning(
                "the state topic %r was not read within %g s: serving from nothing until it is",
                shared.topic,
                STATE_LOAD_WAIT_SECONDS,
            )
        return shared
    state_file = StateFile(settings.data_dir)
    data = state_file.load()
    if data is not None:
        try:
            restored = decider.resume(data, clock())
        except SnapshotError as exc:
            aside = state_file.set_aside()
            state_log.warning(
                "the saved decider state %s cannot be read (%s); moved to %s, starting from nothing",
                state_file.path,
                exc,
                aside,
            )
        else:
            state_log.info(
                "resumed the decider state saved at %s: %d observations, %d node reports, %d fill trends%s",
                iso_instant(restored.saved_at),
                restored.volumes,
                restored.node_reports,
                restored.trends,
                ""
                if restored.exact
                else " (saved under other settings: judged again at the first round)",
            )
    return state_file


def history_writer_from(settings: Settings, metrics: ServiceMetrics) -> HistoryWriter:
    counters = HistoryCounters(
        written=metrics.history_rows_written.inc,
        dropped=lambda reason, rows: metrics.history_rows_dropped.labels(reason).inc(rows),
        topic_errors=metrics.history_topic_errors.inc,
        written_at=metrics.history_written,
    )
    retention = Retention(settings.history_retention_days, settings.history_retention_bytes)
    topic = None
    if settings.history_kafka_enabled:
        topic = HistoryTopic(
            settings.history_kafka_topic,
            settings.history_producer_config,
            counters.topic_errors,
            settings.history_retention_days * 86_400_000,
        )
    return HistoryWriter(
        HistoryFiles(
            settings.effective_history_dir, retention, codec=Codec(settings.history_compression)
        ),
        settings.storage_check_interval.total_seconds(),
        counters,
        topic,
        compaction=Compaction(
            settings.history_keyframe_interval.total_seconds(),
            settings.history_keyframe_usable_share,
        ),
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
    service_metrics = ServiceMetrics(registry)
    decider = decider_from(settings, clock)
    enforcing = EnforcementInForce(
        settings.initial_enforcement
    )  # the quota store's once it is open
    publisher = Publisher(decider, enforcing, service_metrics, clock)
    loop = ObservationLoop(
        decider,
        service_metrics,
        clock,
        publisher,
        enforcing,
        source,
        settings.storage_check_interval.total_seconds(),
    )
    intake = NodeIntake(decider, loop, publisher, observing=settings.observation_enabled)
    service_metrics.bind_decision(lambda: publisher.decision(clock()))
    # Late-bound: a mirrored snapshot puts another cache in place, and replicas replace may_observe.
    service_metrics.bind_volumes(lambda: decider.cache.volumes())  # noqa: PLW0108
    decisions: Publication[ThrottleDecision] = Publication(
        lambda now: _decision_body(publisher, now), clock
    )
    publisher.add(decisions)
    state = Service(settings, clock, decider, loop, publisher, intake, decisions, registry)
    service_metrics.bind_quotas(lambda: state.quotas)
    service_metrics.bind_saved_state(lambda: loop.saved_state, lambda: loop.may_observe())  # noqa: PLW0108

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service_metrics.reads_on(
            asyncio.get_running_loop()
        )  # scrapes read the decider on its thread
        store = quota_store_from(settings)
        state.quotas = QuotaService(settings, store, decider.reading, clock)
        quota_service = state.quotas
        renderer = QuotaTableRenderer()
        report_levels = ReportLevels(
            decider.policy,
            decider.metadata.policy,
            round(report_rate.MIN_INTERVAL_SECONDS * 1000),
            burst=report_rate.BURST,
        )
        state.quota_table = Publication(
            lambda now: _quota_table(
                quota_service,
                renderer,
                now,
                report_levels.current(decider.horizon, decider.cache.volumes),
            ),
            clock,
        )
        publisher.add(state.quota_table)
        quota_service.on_change(state.quota_table.publish)
        enforcing.follow(lambda: quota_service.enforcement)
        quota_service.on_enforcement_change(
            publisher.publish
        )  # every publication and the history carry it
        saved = await saved_state_from(settings, loop, intake, clock)
        loop.saved_state = saved
        publisher.publish()
        if settings.history_enabled and settings.observation_enabled:
            loop.history = history_writer_from(settings, service_metrics)
            loop.history.start()
        task = None
        if observe and settings.observation_enabled and source is not None:
            task = asyncio.create_task(loop.run(), name="observation-loop")
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if saved is not None:
                loop.save_state()  # the latest node reports too
                loop.saved_state = None
                await asyncio.get_running_loop().run_in_executor(None, saved.close)
            if loop.history is not None:
                # Off the event loop: the writer finishes the queued rounds first.
                await asyncio.get_running_loop().run_in_executor(None, loop.history.close)
                loop.history = None
            publisher.remove(state.quota_table)
            enforcing.reset()
            store.close()

    # /docs and /redoc from the Swagger UI and ReDoc assets the fastapi-offline package ships:
    # no CDN, so the pages work on a host without internet access.
    app = FastAPIOffline(
        title="Kafka throttle decision service",
        version=API_VERSION,
        description=(
            "Observes every log dir volume of a Kafka cluster (DescribeCluster + DescribeLogDirs) "
            "and serves the throttle factor that keeps the cluster from running out of disk."
        ),
        lifespan=lifespan,
        # operation ids are the handler names: generated clients get quota_table(), put_override(), ...
        generate_unique_id_function=lambda route: route.name,
        # relative: a client generated from the document calls the host it was fetched from
        servers=[{"url": "/"}],
    )
    generate_openapi = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            bound_by_settings(
                generate_openapi(), settings
            )  # the generated document, kept by the app
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    app.state.service = state
    app.state.views = ViewCache()  # /volumes and /what-if, rendered once per change
    install_problem_handlers(app)
    for routes in (
        throttle.routes,
        quotas.routes,
        enforcement.routes,
        volumes.routes,
        nodes.routes,
        what_if.routes,
        health.routes,
    ):
        routes.install(app)
    # Outermost first: unexpected errors, HTTP metrics, the methods each path serves, the audit
    # line, the token, the body limit, HEAD as GET (Starlette wraps the last one added around
    # the others).
    # The nodes' reports straight to their endpoint (innermost: every check above still runs).
    app.add_middleware(DirectRoute, **NODE_REPORT_ROUTE)
    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, max_bytes=settings.http_max_body_bytes)
    app.add_middleware(AdminToken, token=settings.admin_token, node_token=settings.node_token)
    app.add_middleware(AuditLog)
    app.add_middleware(MethodGate)
    direct_count = instrument_http(app, registry)
    app.add_middleware(UnexpectedErrors)
    metrics.routes.install(app)
    # The nodes' plain reports answered by the HTTP connection itself (its server takes it).
    if settings.node_token is not None:
        served = served_route(app, **NODE_REPORT_ROUTE)
        app.state.report_lane = ReportLane.for_app(
            app,
            served,
            settings.node_token.get_secret_value().encode(),
            settings.http_max_body_bytes,
            direct_count.for_route(served.route.path, "PUT", 204),
            plain_report,
        )
    return app


def _decision_body(publisher: Publisher, now: float) -> Rendering[ThrottleDecision]:
    decision = publisher.decision(now)
    model = decision_response(decision)
    reading = decision.reading
    return Rendering(model, decision_etag_basis(model), reading.valid_until, reading.next_change_at)


def _quota_table(
    quota_service: QuotaService,
    renderer: QuotaTableRenderer,
    now: float,
    report_on: ReportOn | None = None,
) -> Rendering[QuotaTableModel]:
    reading = quota_service.factor_reading(now)
    model, etag_basis = renderer.render(
        quota_service.table, reading, quota_service.enforcement, report_on
    )
    return Rendering(model, etag_basis, reading.valid_until, reading.next_change_at)
