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
import httptools
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.server.refusal_log import RefusalLog

logger = logging.getLogger(__name__)

# The request line and every header together; a longer head is refused with 431.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
# Descriptors kept for what is not an HTTP connection: the quota store, history files, the
# Kafka admin client's connection to every broker, the listening socket.
RESERVED_DESCRIPTORS = 256
REFUSAL_REASONS = ("connection_cap", "head_timeout", "head_too_large", "ambiguous_framing", "malformed")


CL_WITH_TE = "Content-Length and Transfer-Encoding together (RFC 9112 6.1)"


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
            return Refusal(400, "ambiguous_framing", CL_WITH_TE)
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


class _EdgeConnection:
    """What both parsers' protocols share: the cap, the head deadline and the refusals. A
    parser's protocol says whether part of a head is waiting (``_head_started``)."""

    guard: ConnectionGuard
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    client: tuple[str, int] | None

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)  # type: ignore[call-arg]
        self.guard = guard
        self.admitted = False
        self.head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        if not self.guard.admit():
            transport.write(AT_CAPACITY)
            transport.close()
            return
        self.admitted = True
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self.guard.release()
        self._disarm_head_deadline()
        super().connection_lost(exc)  # type: ignore[misc]

    def _head_started(self) -> bool:
        raise NotImplementedError

    def _awaiting_head(self, waiting: bool) -> None:
        """After bytes arrived: a head is incomplete (``waiting``), so its deadline runs (from
        the connection's start, or from now for a kept-alive connection's next request), or
        none is, so none runs. A head that arrives whole never arms a timer."""
        if not waiting:
            self._disarm_head_deadline()
        elif self.head_deadline is None and not self.transport.is_closing():
            self._arm_head_deadline()

    def _refuse(self, refusal: Refusal) -> None:
        self.guard.refuse(refusal, self.client[0] if self.client else "-")
        self._disarm_head_deadline()
        self.transport.write(_canned(refusal.status, PHRASES.get(refusal.status, "Bad Request"), refusal.detail))
        self.transport.close()

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
        if self._head_started():  # a client that sent part of a head learns why
            self._refuse(refusal)
        else:
            self.guard.refuse(refusal, self.client[0] if self.client else "-")
            self.transport.close()


class EdgeH11Protocol(_EdgeConnection, H11Protocol):
    """uvicorn's h11 protocol with the edge's limits (see the module's description)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop, guard=guard)
        self.conn = CheckedConnection(config.h11_max_incomplete_event_size or MAX_REQUEST_HEAD_BYTES)

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        super().data_received(data)
        self._awaiting_head(self.conn.their_state is h11.IDLE)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            self._awaiting_head(True)  # part of a pipelined head is waiting

    def send_400_response(self, msg: str) -> None:
        self._refuse(self.conn.refusal or Refusal(400, "malformed", "not a valid HTTP/1.1 request"))

    def _head_started(self) -> bool:
        return bool(self.conn.trailing_data[0])


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request the edge refuses."""


# A request whose Upgrade is ignored gets its body parsed by a fresh parser behind a head of
# this shape, which states only the body's framing; the callbacks skip it.
_REPLAYED_HEAD = b"PUT / HTTP/1.1\r\n%s\r\n\r\n"


class EdgeHttpToolsProtocol(_EdgeConnection, HttpToolsProtocol):
    """uvicorn's httptools (llhttp) protocol with the edge's limits, and with Upgrade ignored
    as an HTTP/1.1 server may (RFC 9110 7.8) without losing the body: llhttp ends a request
    that asks for an upgrade at its head and hands the rest to the new protocol, which would
    drop the body of every write from Java's HttpClient (it asks for h2c on every http://
    request; Kludex/uvicorn#2722). Here the body goes on to a fresh parser and the request is
    served as HTTP/1.1.

    llhttp refuses on its own Content-Length with Transfer-Encoding, repeated Content-Lengths
    and any coding but chunked last; it has no head limit: the head's bytes are counted here."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop, guard=guard)
        self.max_head_bytes = config.h11_max_incomplete_event_size or MAX_REQUEST_HEAD_BYTES
        self.in_head = False
        self.head_bytes = 0  # of the head being read
        self.refusal: Refusal | None = None
        self.upgrade_body: bytes | None = None  # the framing of an upgrade request's body, still to read
        self.replaying = False

    def data_received(self, data: bytes) -> None:
        if not self.admitted:
            return
        self._unset_keepalive_if_required()
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        started_in_head = self.in_head
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._ignore_upgrade(data[upgrade.args[0] :])
            return
        except httptools.HttpParserError as exc:
            self._refuse(self.refusal or _llhttp_refusal(exc))
            return
        if self.in_head:
            # A head still incomplete: every byte of a piece that began inside it is the head's;
            # of the piece it began in, the callbacks counted what they saw.
            if started_in_head:
                self.head_bytes += len(data)
            if self.head_bytes > self.max_head_bytes:
                return self._refuse(_head_too_large(self.max_head_bytes))
        self._awaiting_head(self.in_head)

    def _ignore_upgrade(self, rest: bytes) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)  # as uvicorn's own parser
        if self.upgrade_body is not None:
            self.replaying = True
            self.parser.feed_data(_REPLAYED_HEAD % self.upgrade_body)
            self.upgrade_body = None
        if rest:
            self._feed(rest)

    def on_message_begin(self) -> None:
        if self.replaying:
            return
        super().on_message_begin()
        self.in_head = True
        self.head_bytes = 0

    def on_url(self, url: bytes) -> None:
        if self.replaying:
            return
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.replaying:
            return
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.replaying:
            self.replaying = False  # what follows is the upgrade request's body
            return
        self.in_head = False
        self.head_bytes = 0
        names = {name for name, _ in self.headers}
        if b"transfer-encoding" in names and self.parser.get_http_version() == "1.0":
            self.refusal = Refusal(400, "ambiguous_framing", "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)")
            raise _Refused
        if self.parser.should_upgrade():
            self.upgrade_body = _body_framing(self.headers)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        if self.upgrade_body is not None:
            return  # llhttp ends an upgrade request at its head: its body is still to come
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        self._refuse(self.refusal or Refusal(400, "malformed", "not a valid HTTP/1.1 request"))

    def _head_started(self) -> bool:
        return self.in_head

    def _count_head(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > self.max_head_bytes:
            self.refusal = _head_too_large(self.max_head_bytes)
            raise _Refused


def _head_too_large(limit: int) -> Refusal:
    return Refusal(431, "head_too_large", f"the request head is larger than {limit} bytes")


def _body_framing(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The framing header of a request's body (llhttp has checked there is one framing), or
    None when it has no body."""
    for name, value in headers:
        if name == b"transfer-encoding":
            return b"transfer-encoding: chunked"
        if name == b"content-length" and value.strip() not in (b"0", b""):
            return b"content-length: " + value.strip()
    return None


def _llhttp_refusal(exc: httptools.HttpParserError) -> Refusal:
    detail = str(exc)
    if isinstance(exc, httptools.HttpParserInvalidMethodError):
        return Refusal(501, "malformed", f"the API serves the methods GET, HEAD, PUT, DELETE, OPTIONS ({detail})")
    if detail == "Transfer-Encoding can't be present with Content-Length":
        return Refusal(400, "ambiguous_framing", CL_WITH_TE)
    if "Content-Length" in detail or "Transfer-Encoding" in detail:
        return Refusal(400, "ambiguous_framing", detail)
    return Refusal(400, "malformed", f"not a valid HTTP/1.1 request ({detail})")
