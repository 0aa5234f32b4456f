"""The service's /metrics, produced in-process by the real app after rounds the test applies, and
parsed into samples."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable

from prometheus_client.parser import text_string_to_metric_families

from app.clock import ManualClock
from app.observation.model import ObservationRound, VolumeObservation
from app.server.app import create_app
from app.server.edge.http_server import edge_guard
from app.settings import load_settings

from .asgi import run_scenario

Sample = tuple[str, frozenset[tuple[str, str]]]

BYTES_LIMITS = {"storage_per_volume_limit_min_available_bytes": "100", "storage_per_volume_soft_limit_min_available_bytes": "300"}
RATIO_LIMITS = {"storage_per_volume_limit_min_available_ratio": "0.1", "storage_per_volume_soft_limit_min_available_ratio": "0.3"}


def make_app(clock: ManualClock, limits: dict[str, str] = BYTES_LIMITS, **overrides: str):
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        throttle_factor_validity_duration="PT2M",
        data_dir=tempfile.mkdtemp(prefix="throttle-test-"),
        **limits,
        **overrides,
    )
    app = create_app(settings, clock=clock, observe=False)
    edge_guard(settings, app.state.service.registry)  # as serving it registers the edge's metrics
    return app


def every_kind_of_volume(now: float) -> ObservationRound:
    """Broker 1 ramping (200 of 1000 usable), broker 2 before Kafka 3.3 (no capacity figures),
    broker 3 with its log dir offline (KAFKA_STORAGE_ERROR, no figures either), broker 4 healthy."""
    return ObservationRound(
        now,
        now,
        (1, 2, 3, 4),
        (
            VolumeObservation(1, "/data/a", 1000, 200, now),
            VolumeObservation(2, "/data/b", -1, -1, now),
            VolumeObservation(3, "/data/c", -1, -1, now, error="KAFKA_STORAGE_ERROR"),
            VolumeObservation(4, "/data/d", 1000, 900, now),
        ),
    )


def parse(text: str) -> dict[Sample, float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: dict[Sample, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def scrape_after(
    scenario: Callable[..., Awaitable[None]], limits: dict[str, str] = BYTES_LIMITS, **overrides: str
) -> str:
    """/metrics once ``scenario(client, loop, clock)`` has run."""
    clock = ManualClock()

    async def then_scrape(client, loop, clock):
        await scenario(client, loop, clock)
        response = await client.get("/metrics")
        assert response.status_code == 200
        return response.text

    return run_scenario(make_app(clock, limits, **overrides), clock, then_scrape)


async def busy_service(client, loop, clock) -> None:
    """Every kind of volume, a plain GET of each published resource and a long-poll."""
    loop.apply_round(every_kind_of_volume(clock()))
    etag = (await client.get("/throttle-factor")).headers["etag"]
    await client.get("/quotas")
    await client.get("/throttle-factor", params={"wait": "0.05"}, headers={"If-None-Match": etag})
