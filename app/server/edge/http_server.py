"""How the service serves HTTP: uvicorn with the httptools parser, through the edge's
protocol (deadlines for heads and bodies, a connection cap with capacity kept for token
holders and probes, a bounded head, one framing of every request, Upgrade ignored without
losing the body), on a socket bound before anything else starts, and stopped within two
seconds."""

from __future__ import annotations

import functools
import logging
import signal
import socket
from collections.abc import Callable

import uvicorn
from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from uvicorn.config import LOGGING_CONFIG

from app.server.edge.http_protocol import ConnectionGuard, EdgeHttpToolsProtocol, connection_cap
from app.settings import Settings

# httptools (llhttp, in C), through the edge's protocol: h11, pure Python, costs 1.5-2x the CPU
# of a request (BENCHMARKS.md). uvicorn's own httptools protocol loses the body of a request
# carrying "Upgrade: h2c" (every http:// request of Java's java.net.http.HttpClient;
# Kludex/uvicorn#2722); the edge's keeps it.
HTTP_PARSER = "httptools"
HTTP_PROTOCOL = EdgeHttpToolsProtocol


def edge_guard(settings: Settings, registry: CollectorRegistry) -> ConnectionGuard:
    """The edge's limits for ``settings``, counted in ``registry``. The node and admin tokens
    reserve the connection of a request that carries them."""
    tokens = [
        token.get_secret_value().encode()
        for token in (settings.node_token, settings.admin_token)
        if token is not None
    ]
    guard = ConnectionGuard(
        connection_cap(settings.http_max_connections),
        settings.http_head_timeout.total_seconds(),
        body_timeout_seconds=settings.http_body_timeout.total_seconds(),
        tokens=tokens,
    )
    registry.register(guard)
    return guard


def listen_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """The HTTP socket, bound now, before any state is opened: a port in use stops start-up
    before the quota store or the data dir is touched. Raises OSError. (As uvicorn binds: IPv6
    for an address with a colon, a host name resolved as IPv4.)"""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


# What a stop waits for requests in progress once the held long-polls are answered: a stop
# must end well within a supervisor's grace period (10 s; Kubernetes' default is 30 s).
STOP_GRACE_SECONDS = 1  # whole seconds, as uvicorn takes them


class _Server(uvicorn.Server):
    """uvicorn's server, which answers the app's held long-polls as its stop begins: uvicorn
    waits for open requests before it stops the app, and a long-poll is open for up to 30 s."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop = on_stop

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._on_stop()
        await super().shutdown(sockets)


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(0)


def serve(
    app: FastAPI, settings: Settings, listener: socket.socket, on_stop: Callable[[], None]
) -> None:
    """Serve ``app`` on ``listener`` until SIGTERM or SIGINT; ``on_stop`` is called as the stop
    begins. A requested stop exits 0: uvicorn, once stopped, raises the signal again for the
    handler it found, which ends the process with status 0 here (and stops it at once if the
    signal comes before uvicorn listens)."""
    guard = edge_guard(settings, app.state.service.registry)
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, _stopped)
    # The nodes' plain reports answered by each connection (app/server/edge/report_lane.py).
    protocol = functools.partial(
        HTTP_PROTOCOL, guard=guard, lane=getattr(app.state, "report_lane", None)
    )
    config = uvicorn.Config(
        app,
        http=protocol,  # type: ignore[arg-type]  # called as the protocol class
        ws="none",  # no WebSocket endpoint: every Upgrade is ignored
        timeout_keep_alive=settings.http_idle_timeout.total_seconds(),  # type: ignore[arg-type]  # seconds, as a float
        host=settings.http_host,
        port=settings.http_port,
        ssl_certfile=settings.http_ssl_certfile,
        ssl_keyfile=settings.http_ssl_keyfile,
        log_level=settings.log_level.lower(),
        access_log=False,
        timeout_graceful_shutdown=STOP_GRACE_SECONDS,
        # JSON lines: uvicorn's records go to the service's handler instead of its own text one
        # (LOGGING_CONFIG is what uvicorn uses when none is given).
        log_config=None if settings.log_format == "json" else LOGGING_CONFIG,
    )
    scheme = "https" if settings.http_ssl_certfile else "http"
    logging.getLogger("app.server").info(
        "serving on %s://%s", scheme, listen_address(settings.http_host, settings.http_port)
    )
    _Server(config, on_stop).run(sockets=[listener])
