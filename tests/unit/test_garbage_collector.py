"""The service process's garbage collector settings, against a round at a thousand brokers."""

from __future__ import annotations

import gc
import tempfile

import pytest

from app.clock import ManualClock
from app.history.rows import round_rows
from app.observation.model import ObservationRound, VolumeObservation
from app.server.app import create_app
from app.server.runtime.garbage_collector import tune_garbage_collector
from app.settings import load_settings

from .asgi import run_scenario

GiB = 1024**3


@pytest.fixture
def tuned_collector():
    threshold = gc.get_threshold()
    tune_garbage_collector()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_a_round_at_a_thousand_brokers_runs_few_collections(tuned_collector):
    """The interpreter's default collected the young generation some 80 times a round at this
    size, a quarter of the round's CPU."""
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        data_dir=tempfile.mkdtemp(prefix="throttle-test-"),
        storage_per_volume_limit_min_available_bytes=str(GiB),
    )
    clock = ManualClock()
    collections: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    async def scenario(client, observer, clock):
        for number in range(3):
            clock.advance(10)
            now = clock()
            volumes = tuple(VolumeObservation(b, f"/var/lib/kafka/data-{d}", 1024 * GiB, (100 + number + b + d) * GiB, now) for b in range(1, 1001) for d in range(12))
            round_ = ObservationRound(now, now, tuple(range(1, 1001)), volumes)
            gc.callbacks.append(count)
            try:
                decision = observer.apply_round(round_)
                round_rows(round_, decision, 10.0)
            finally:
                gc.callbacks.remove(count)

    run_scenario(create_app(settings, clock=clock, observe=False), clock, scenario)
    assert len(collections) <= 6, f"{len(collections)} collections in three rounds"
