"""How the service serves HTTP: uvicorn with the httptools parser, through the edge's
protocol (deadlines, a connection cap, a bounded head, one framing of every request, Upgrade
ignored without losing the body)."""

from __future__ import annotations

import functools

import uvicorn
from fastapi import FastAPI

from app.server.http_protocol import ConnectionGuard, EdgeHttpToolsProtocol, connection_cap
from app.settings import Settings

# httptools (llhttp, in C), through the edge's protocol: h11, pure Python, costs 1.5-2x the CPU
# of a request (BENCHMARKS.md). uvicorn's own httptools protocol loses the body of a request
# carrying "Upgrade: h2c" (every http:// request of Java's java.net.http.HttpClient;
# Kludex/uvicorn#2722); the edge's keeps it.
HTTP_PARSER = "httptools"
HTTP_PROTOCOL = EdgeHttpToolsProtocol


def serve(app: FastAPI, settings: Settings) -> None:
    guard = ConnectionGuard(connection_cap(settings.http_max_connections), settings.http_head_timeout.total_seconds())
    app.state.service.registry.register(guard)
    uvicorn.run(
        app,
        http=functools.partial(HTTP_PROTOCOL, guard=guard),  # type: ignore[arg-type]  # called as the protocol class
        ws="none",  # no WebSocket endpoint: every Upgrade is ignored
        timeout_keep_alive=settings.http_idle_timeout.total_seconds(),  # type: ignore[arg-type]  # seconds, as a float
        host=settings.http_host,
        port=settings.http_port,
        ssl_certfile=settings.http_ssl_certfile,
        ssl_keyfile=settings.http_ssl_keyfile,
        log_level=settings.log_level.lower(),
        access_log=False,
        # JSON lines: uvicorn's records go to the service's handler instead of its own text one.
        **({"log_config": None} if settings.log_format == "json" else {}),
    )
