"""Servers for the HTTP benchmarks, one per process:
``python bench/serve.py service|bare PORT [httptools-edge|h11|httptools]`` (default: the
service's edge protocol, as the service runs; a parser's name alone is uvicorn's own protocol
for it).

``service`` is the real app (metrics on) holding a decision over a 3-broker cluster view, as
after a real observation round; ``bare`` is a FastAPI endpoint returning a constant JSON body
of the same size, the baseline every ratio is measured against."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
import tempfile
import time

import uvicorn
from fastapi import FastAPI, Response

from app.server.app import create_app
from app.server.edge.http_protocol import MAX_REQUEST_HEAD_BYTES, ConnectionGuard
from app.server.edge.http_server import HTTP_PARSER, HTTP_PROTOCOL
from app.quotas.model import DEFAULT, QuotaEntity, QuotaType
from app.quotas.store import QuotaStore, store_file
from app.settings import load_settings
from app.observation.model import ObservationRound, VolumeObservation

MiB = 1024 * 1024


QUOTA_OVERRIDES = 1000  # a realistic table behind /quotas and /quotas/resolve


def seed_quota_store(data_dir: Path) -> None:
    store = QuotaStore(store_file(data_dir))
    for n in range(QUOTA_OVERRIDES):
        store.put_override(QuotaEntity(f"user-{n}", DEFAULT if n % 2 else None), {QuotaType.PRODUCE: 1e6 + n}, time.time())
    store.close()


def service_app() -> FastAPI:
    data_dir = Path(tempfile.mkdtemp(prefix="throttle-bench-"))
    seed_quota_store(data_dir)
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:9092",
        data_dir=str(data_dir),
        produce="10485760",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
        storage_per_volume_soft_limit_min_available_bytes=str(24 * MiB),
        throttle_factor_validity_duration="P1D",
    )
    app = create_app(settings, observe=False)
    now = time.time()
    volumes = tuple(VolumeObservation(b, f"/var/lib/kafka/data-{b}", 64 * MiB, (12 + 20 * b) * MiB, now) for b in (1, 2, 3))
    app.state.service.loop.apply_round(ObservationRound(now, now, (1, 2, 3), volumes))
    return app


def bare_app(body: bytes) -> FastAPI:
    app = FastAPI()

    @app.get("/bare")
    async def bare() -> Response:
        return Response(body, media_type="application/json")

    return app


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    parser = sys.argv[3] if len(sys.argv) > 3 else f"{HTTP_PARSER}-edge"
    service = service_app()
    app = service if kind == "service" else bare_app(service.state.service.decisions.current().body)
    protocol: object = parser
    if parser == f"{HTTP_PARSER}-edge":  # the service's deadlines and cap at their defaults
        protocol = functools.partial(HTTP_PROTOCOL, guard=ConnectionGuard(4096, 5.0))
    uvicorn.run(
        app, host="127.0.0.1", port=port, log_level="warning", access_log=False, http=protocol,  # type: ignore[arg-type]
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES, ws="none",  # h11's head limit, as the service had
    )


if __name__ == "__main__":
    main()
