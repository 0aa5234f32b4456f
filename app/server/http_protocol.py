"""The HTTP/1.1 connection as the service serves it: uvicorn's h11 protocol with the edge's
deadlines, limits and one framing of every request.

- A request head must be complete within the head timeout, counted from the connection's
  start or from the first byte of a kept-alive connection's next request; an idle kept-alive
  connection is closed after the idle timeout (uvicorn's keep-alive timeout). Neither runs
  while a request is being answered, so a long-poll is held for as long as it asks.
- At most ``max_connections`` connections at once, kept below the process's file descriptor
  limit: a connection past the cap is answered 503 and closed at once, instead of waiting
  in the backlog or taking the descriptors the service needs.
- A head over 16 KiB is refused with 431 however its bytes arrive (h11 bounds only a head
  that arrives in pieces).
- A request whose body framing could be read two ways (RFC 9112 6.1, 6.3: Content-Length
  and Transfer-Encoding together, Transfer-Encoding in HTTP/1.0, differing Content-Lengths,
  a transfer coding other than chunked) is refused and its connection closed, so nothing
  after it can be read as another request.

Every refusal counts in ``http_edge_refusals_total``; its log line is rate-limited per client
and reason. Reaching the connection cap is one warning per episode."""

from __future__ import annotations

import asyncio
import json
import logging
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import h11
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from app.server.refusal_log import RefusalLog

logger = logging.getLogger(__name__)

# The request line and every header together; a longer head is refused with 431.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
# Descriptors kept for what is not an HTTP connection: the quota store, history files, the
# Kafka admin client's connection to every broker, the listening socket.
RESERVED_DESCRIPTORS = 256
REFUSAL_REASONS = ("connection_cap", "head_timeout", "head_too_large", "ambiguous_framing", "malformed")


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str  # one of REFUSAL_REASONS
    detail: str


def framing_problem(request: h11.Request) -> Refusal | None:
    """Why the framing of ``request``'s body is ambiguous, if it is. h11 already refuses
    differing Content-Lengths and any transfer coding but chunked; it reads a request with
    both headers as chunked, which a proxy in front may not."""
    names = {name for name, _ in request.headers}
    if b"transfer-encoding" in names:
        if b"content-length" in names:
            return Refusal(400, "ambiguous_framing", "Content-Length and Transfer-Encoding together (RFC 9112 6.1)")
        if request.http_version == b"1.0":
            return Refusal(400, "ambiguous_framing", "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)")
    return None


def head_size(request: h11.Request) -> int:
    """The bytes of ``request``'s head as sent, less any optional whitespace h11 dropped."""
    line = len(request.method) + len(request.target) + len(b"  HTTP/1.1\r\n")
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items()) + 2


class CheckedConnection(h11.Connection):
    """h11's connection, refusing the heads h11 lets through that the service must not serve,
    and keeping why it refused the last one for the answer."""

    def __init__(self, max_head_bytes: int) -> None:
        super().__init__(h11.SERVER, max_incomplete_event_size=max_head_bytes)
        self.max_head_bytes = max_head_bytes
        self.refusal: Refusal | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
        except h11.RemoteProtocolError as exc:
            self.refusal = _refusal_of(exc)
            raise
        if isinstance(event, h11.Request):
            if head_size(event) > self.max_head_bytes:
                self.refusal = Refusal(431, "head_too_large", f"the request head is larger than {self.max_head_bytes} bytes")
            else:
                self.refusal = framing_problem(event)
            if self.refusal is not None:
                raise h11.RemoteProtocolError(self.refusal.detail, error_status_hint=self.refusal.status)
        return event


def _refusal_of(exc: h11.RemoteProtocolError) -> Refusal:
    detail = str(exc)
    if exc.error_status_hint == 431:
        return Refusal(431, "head_too_large", "the request head is larger than the limit")
    if "Content-Length" in detail or "Transfer-Encoding" in detail:
        return Refusal(exc.error_status_hint, "ambiguous_framing", detail)
    return Refusal(400, "malformed", "not a valid HTTP/1.1 request")


def _canned(status: int, phrase: str, detail: str) -> bytes:
    """A complete problem+json answer that closes the connection."""
    body = json.dumps({"type": "about:blank", "title": phrase, "status": status, "detail": detail}).encode()
    head = f"HTTP/1.1 {status} {phrase}\r\ncontent-type: application/problem+json\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


PHRASES = {400: "Bad Request", 408: "Request Timeout", 431: "Request Header Fields Too Large", 501: "Not Implemented", 503: "Service Unavailable"}
AT_CAPACITY = _canned(503, PHRASES[503], "too many connections; try again shortly")


class ConnectionGuard(Collector):
    """The edge's limits and what they refused, shared by every connection of the server; a
    Prometheus collector of the open connections, the cap and the refusals."""

    def __init__(self, max_connections: int, head_timeout_seconds: float, refusals: RefusalLog | None = None) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout_seconds
        self.refusals = refusals or RefusalLog()
        self.open = 0
        self.at_cap = False
        self.refused = dict.fromkeys(REFUSAL_REASONS, 0)

    def admit(self) -> bool:
        if self.open < self.max_connections:
            self.open += 1
            return True
        self.refused["connection_cap"] += 1
        if not self.at_cap:
            self.at_cap = True
            logger.warning("%d connections open, the cap: new connections are answered 503 and closed until some close", self.open)
        return False

    def release(self) -> None:
        self.open -= 1
        if self.at_cap and self.open < self.max_connections * 0.9:
            self.at_cap = False  # the next time the cap is reached is a new episode

    def refuse(self, refusal: Refusal, client: str) -> None:
        self.refused[refusal.reason] += 1
        self.refusals.log(logger, logging.WARNING, client, refusal.reason, "refused a request from %s: %s (%d)", client, refusal.detail, refusal.status)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily("http_connections_open", "HTTP connections open", value=self.open)
        yield GaugeMetricFamily("http_connections_max", "HTTP connections served at once; more are answered 503 and closed", value=self.max_connections)
        refused = CounterMetricFamily(
            "http_edge_refusals",
            "Connections and requests refused before the application: connection_cap, head_timeout, head_too_large, ambiguous_framing, malformed",
            labels=["reason"],
        )
        for reason, count in self.refused.items():
            refused.add_metric([reason], count)
        yield refused


def connection_cap(configured: int) -> int:
    """The connection cap the process can hold: the descriptor limit is raised to its hard
    limit, and the cap kept ``RESERVED_DESCRIPTORS`` below it (with a warning when that is
    less than configured), so that accept() never fails for want of a descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > soft):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or configured + RESERVED_DESCRIPTORS <= soft:
        return configured
    cap = max(1, soft - RESERVED_DESCRIPTORS)
    logger.warning(
        "the process may open %d files: at most %d HTTP connections (of the %d configured) leave %d descriptors for the rest",
        soft, cap, configured, RESERVED_DESCRIPTORS,
    )
    return cap


class EdgeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the guard's limits (see the module's description)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = guard
        self.conn = CheckedConnection(config.h11_max_incomplete_event_size or MAX_REQUEST_HEAD_BYTES)
        self.admitted = False
        self.head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.guard.admit():
            transport.write(AT_CAPACITY)
            transport.close()
            return
        self.admitted = True
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self.guard.release()
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        if self.head_deadline is None and self.conn.their_state is h11.IDLE:
            self._arm_head_deadline()  # the first bytes of a kept-alive connection's next request
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._arm_head_deadline()  # part of a pipelined head is waiting

    def send_400_response(self, msg: str) -> None:
        refusal = self.conn.refusal or Refusal(400, "malformed", "not a valid HTTP/1.1 request")
        self.guard.refuse(refusal, self._client_host())
        self.transport.write(_canned(refusal.status, PHRASES.get(refusal.status, "Bad Request"), refusal.detail))
        self.transport.close()

    def _client_host(self) -> str:
        return self.client[0] if self.client else "-"

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self.head_deadline = self.loop.call_later(self.guard.head_timeout, self._head_timed_out)

    def _disarm_head_deadline(self) -> None:
        if self.head_deadline is not None:
            self.head_deadline.cancel()
            self.head_deadline = None

    def _head_timed_out(self) -> None:
        self.head_deadline = None
        if self.transport.is_closing():
            return
        refusal = Refusal(408, "head_timeout", f"the request head was not complete within {self.guard.head_timeout:g}s")
        self.guard.refuse(refusal, self._client_host())
        if self.conn.trailing_data[0]:  # a client that sent part of a head learns why
            self.transport.write(_canned(408, PHRASES[408], refusal.detail))
        self.transport.close()
