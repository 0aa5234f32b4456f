"""The observation loop: rounds every interval, off the event loop, surviving a faulty source."""

import asyncio
import threading
import time

import httpx

from app.server.app import create_app
from app.settings import load_settings
from app.observation.model import ObservationRound, VolumeObservation


class ScriptedSource:
    """A stand-in volume source: healthy rounds, except that some calls raise."""

    def __init__(self, raise_on: set[int]) -> None:
        self.calls = 0
        self.raise_on = raise_on
        self.threads: set[str] = set()
        self.closed = False
        self.connected = True

    def observe(self) -> ObservationRound:
        self.calls += 1
        self.threads.add(threading.current_thread().name)
        if self.calls in self.raise_on:
            raise RuntimeError("boom")
        now = time.time()
        return ObservationRound(now, now, (1,), (VolumeObservation(1, "/d", 1000, 900, now),))

    def close(self) -> None:
        self.closed = True


def test_the_loop_observes_every_interval_off_the_event_loop_and_survives_a_raising_source(tmp_path):
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        storage_per_volume_limit_min_available_bytes="100",
        storage_check_interval="PT0.05S",
        throttle_factor_validity_duration="PT10S",
        data_dir=str(tmp_path),
    )
    source = ScriptedSource(raise_on={2})
    app = create_app(settings, source=source)

    async def main():
        async with app.router.lifespan_context(app):
            await asyncio.sleep(0.5)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return (await client.get("/throttle-factor")).json(), app.state.service.loop.rounds

    decision, rounds = asyncio.run(main())
    assert 5 <= rounds <= 12
    assert source.calls == rounds
    assert source.threads == {"volume-source_0"}  # never the event loop's thread
    assert source.closed
    assert decision["source"] == "observed" and decision["factor"] == 1.0
