"""The HTTP/1.1 connection as the service serves it: uvicorn's httptools (llhttp) protocol
with the edge's deadlines, limits and one framing of every request, and Upgrade ignored
without losing the body.

- A request head must be complete within the head timeout, counted from the connection's
  start or from the first byte of a kept-alive connection's next request; an idle kept-alive
  connection is closed after the idle timeout (uvicorn's keep-alive timeout). Neither runs
  while a request is being answered, so a long-poll is held for as long as it asks.
- A request body must be complete within the body timeout, counted from the end of its head
  (408 if nothing was answered yet, and the connection closed). A request without a body, a
  long-poll among them, has nothing to send.
- At most ``max_connections`` connections at once, kept below the process's file descriptor
  limit. Capacity is kept for the brokers and the probes: while a connection serves a request
  that carries the node or admin token, or asks for /healthz, /readyz or /metrics, it is
  *reserved* (at most ``RESERVED_PER_CLIENT`` at once per client address). At the cap a new
  connection takes the place of the oldest connection not reserved, which is closed; only
  when every connection is reserved is the new one answered 503 and closed at once, instead
  of waiting in the backlog or taking the descriptors the service needs. So no flood of
  unauthenticated connections, slow bodies or long-polls, from one client or many, keeps a
  shim's poll, a node's report or a probe out.
- A head over 16 KiB is refused with 431 however its bytes arrive (llhttp has no limit).
- A request whose body framing could be read two ways (RFC 9112 6.1, 6.3: Content-Length
  and Transfer-Encoding together, Transfer-Encoding in HTTP/1.0, repeated Content-Lengths,
  a transfer coding other than chunked last) is refused and its connection closed, so
  nothing after it can be read as another request. llhttp refuses all but HTTP/1.0's.
- A request asking for an upgrade (every http:// request of Java's HttpClient asks for h2c)
  is served as HTTP/1.1, as a server may (RFC 9110 7.8), body and all: llhttp ends such a
  request at its head and leaves the rest to the new protocol, so uvicorn's own httptools
  protocol hands the app an empty body (Kludex/uvicorn#2722).

Every refusal counts in ``http_edge_refusals_total``; its log line is rate-limited per client
and reason. Reaching the connection cap is one warning per episode."""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import resource
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from email.utils import formatdate
from timeit import default_timer
from typing import Any, Protocol

import httptools
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.server.edge.admission import bearer_credentials
from app.server.edge.methods import SERVED_METHODS
from app.server.edge.refusal_log import RefusalLog
from app.server.edge.report_lane import ReportLane

logger = logging.getLogger(__name__)

# The request line and every header together; a longer head is refused with 431.
MAX_REQUEST_HEAD_BYTES = 16 * 1024
# Descriptors kept for what is not an HTTP connection: the quota store, history files, the
# Kafka admin client's connection to every broker, the listening socket.
RESERVED_DESCRIPTORS = 256
REFUSAL_REASONS = (
    "connection_cap",
    "evicted",
    "head_timeout",
    "body_timeout",
    "head_too_large",
    "ambiguous_framing",
    "malformed",
)
# Requests that reserve their connection whoever sends them: the probes and the scrape answer
# at once and hold nothing (a slow reader of them is bounded per client like a token holder).
RESERVED_PATHS = frozenset({b"/healthz", b"/readyz", b"/metrics"})
# A shim polls on one connection and reports on another; a host runs a broker or two. A token
# holder past this many is served like anyone else (its connections may be closed at the cap).
RESERVED_PER_CLIENT = 16


CL_WITH_TE = "Content-Length and Transfer-Encoding together (RFC 9112 6.1)"


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str  # one of REFUSAL_REASONS
    detail: str


def _canned(status: int, phrase: str, detail: str) -> bytes:
    """A complete problem+json answer that closes the connection, dated now (RFC 9110 6.6.1,
    as uvicorn dates the app's answers)."""
    body = json.dumps(
        {"type": "about:blank", "title": phrase, "status": status, "detail": detail}
    ).encode()
    head = (
        f"HTTP/1.1 {status} {phrase}\r\ndate: {formatdate(usegmt=True)}\r\ncontent-type: application/problem+json\r\n"
        f"connection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


PHRASES = {
    400: "Bad Request",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
}


def at_capacity() -> bytes:
    return _canned(503, PHRASES[503], "too many connections; try again shortly")


class Evictable(Protocol):
    def evict(self) -> None:
        """Close the connection now, whatever it is doing."""


class ConnectionGuard(Collector):
    """The edge's limits and what they refused, shared by every connection of the server; a
    Prometheus collector of the open connections, the cap and the refusals.

    The connections not reserved are kept oldest first: at the cap the oldest one makes room."""

    def __init__(
        self,
        max_connections: int,
        head_timeout_seconds: float,
        max_head_bytes: int = MAX_REQUEST_HEAD_BYTES,
        refusals: RefusalLog | None = None,
        *,
        body_timeout_seconds: float = 10.0,
        tokens: Iterable[bytes] = (),
        reserved_per_client: int = RESERVED_PER_CLIENT,
    ) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout_seconds
        self.body_timeout = body_timeout_seconds
        self.max_head_bytes = max_head_bytes
        self.refusals = refusals or RefusalLog()
        self.tokens = tuple(tokens)
        self.reserved_per_client = reserved_per_client
        self.open = 0
        self.at_cap = False
        self.refused = dict.fromkeys(REFUSAL_REASONS, 0)
        self._unreserved: dict[Evictable, None] = {}  # insertion order: oldest first
        self._reserved: dict[Evictable, str] = {}  # connection -> its client's address
        self._reserved_by_client: dict[str, int] = {}

    def admit(self, connection: Evictable | None = None) -> bool:
        """Count a new connection in; at the cap, close the oldest connection not reserved to
        make room, or refuse the new one (False) when every connection is reserved."""
        if self.open >= self.max_connections:
            if not self.at_cap:
                self.at_cap = True
                logger.warning(
                    "%d connections open, the cap: each new connection closes the oldest one not serving a token holder or "
                    "a probe, or is answered 503 and closed when there is none, until some close",
                    self.open,
                )
            oldest = next(iter(self._unreserved), None)
            if oldest is None:
                self.refused["connection_cap"] += 1
                return False
            del self._unreserved[oldest]
            self.refused["evicted"] += 1
            oldest.evict()  # its descriptor is freed as the transport closes; the reserve covers the overlap
        self.open += 1
        if connection is not None:
            self._unreserved[connection] = None
        return True

    def release(self, connection: Evictable | None = None) -> None:
        self.open -= 1
        if connection is not None:
            self._unreserved.pop(connection, None)
            self.unreserve(connection, renew=False)
        if self.at_cap and self.open < self.max_connections * 0.9:
            self.at_cap = False  # the next time the cap is reached is a new episode

    def reserves(self, target: bytes, headers: list[tuple[bytes, bytes]]) -> bool:
        """Whether a request reserves its connection: a probe's or the scrape's path, or the
        node or admin token (compared in constant time)."""
        if target.partition(b"?")[0] in RESERVED_PATHS:
            return True
        if not self.tokens:
            return False
        credentials = bearer_credentials(headers)
        return credentials is not None and any(
            hmac.compare_digest(credentials, token) for token in self.tokens
        )

    def reserve(self, connection: Evictable, client: str) -> bool:
        """Keep ``connection`` from being closed at the cap while it serves its request, unless
        its client holds ``reserved_per_client`` already."""
        if connection in self._reserved:
            return True
        held = self._reserved_by_client.get(client, 0)
        if held >= self.reserved_per_client:
            return False
        self._reserved_by_client[client] = held + 1
        self._reserved[connection] = client
        self._unreserved.pop(connection, None)
        return True

    def renew(self, connection: Evictable, client: str) -> None:
        """What ``reserve`` then ``unreserve`` do to ``connection`` when nothing happens in
        between (a request answered within the call that read its head): it becomes the newest
        of the connections not reserved, unless its client holds its share of reservations
        already; one reserved stays so (its own ``unreserve`` comes after its answer)."""
        if connection in self._reserved:
            return
        if self._reserved_by_client.get(client, 0) >= self.reserved_per_client:
            return
        unreserved = self._unreserved
        unreserved.pop(connection, None)
        unreserved[connection] = None

    def unreserve(self, connection: Evictable, renew: bool = True) -> None:
        """The request is answered: the connection may be closed at the cap again (counted as
        the newest when ``renew``)."""
        client = self._reserved.pop(connection, None)
        if client is None:
            return
        held = self._reserved_by_client[client] - 1
        if held:
            self._reserved_by_client[client] = held
        else:
            del self._reserved_by_client[client]
        if renew:
            self._unreserved[connection] = None

    def refuse(self, refusal: Refusal, client: str) -> None:
        self.refused[refusal.reason] += 1
        self.refusals.log(
            logger,
            logging.WARNING,
            client,
            refusal.reason,
            "refused a request from %s: %s (%d)",
            client,
            refusal.detail,
            refusal.status,
        )

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        yield GaugeMetricFamily("http_connections_open", "HTTP connections open", value=self.open)
        yield GaugeMetricFamily(
            "http_connections_max",
            "HTTP connections served at once; past it the oldest one not reserved is closed",
            value=self.max_connections,
        )
        yield GaugeMetricFamily(
            "http_connections_reserved",
            "HTTP connections serving a token holder's or a probe's request (never closed at the cap)",
            value=len(self._reserved),
        )
        refused = CounterMetricFamily(
            "http_edge_refusals",
            "Connections and requests refused before the application: connection_cap (every connection reserved), evicted "
            "(closed at the cap to make room), head_timeout, body_timeout, head_too_large, ambiguous_framing, malformed",
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
        soft,
        cap,
        configured,
        RESERVED_DESCRIPTORS,
    )
    return cap


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request the edge refuses."""


# A request whose Upgrade is ignored gets its body parsed by a fresh parser behind a head of
# this shape, which states only the body's framing; the callbacks skip it.
_REPLAYED_HEAD = b"PUT / HTTP/1.1\r\n%s\r\n\r\n"


class EdgeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the edge's limits (see the module's description)."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        guard: ConnectionGuard,
        lane: ReportLane | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = guard
        self.lane = lane
        # A report the lane answers carries the node token: whether that token reserves (it
        # does when both come from the same settings), so that it is not checked twice.
        self.lane_reserves = lane is not None and lane.node_token in guard.tokens
        # A node report the lane answers: its node, its body's pieces, when its head was complete.
        self.lane_request: tuple[int, list[bytes], float] | None = None
        self.lane_closing = False  # the server stops: the report in the lane is the last
        # A report in the lane whose head reserves the connection: reserved only if its body is
        # still to come when the piece that brought its head has been read (a report answered
        # within that call cannot be evicted meanwhile: the guard only renews its place).
        self.lane_reserve_due = False
        self.max_head_bytes = guard.max_head_bytes
        self.admitted = False
        self.head_deadline: asyncio.TimerHandle | None = None
        self.body_deadline: asyncio.TimerHandle | None = None
        self.body_since: float | None = None  # when the body awaited began to be, if one is
        # A body is still to come: its deadline is armed when the bytes at hand end before it
        # (most bodies arrive with their head, and need no timer).
        self.body_open = False
        self.in_head = False
        self.head_received = (
            0  # bytes of the pieces that arrived while the head being read was incomplete
        )
        self.piece_size = 0  # of the piece being parsed
        self.refusal: Refusal | None = None
        self.upgrade_body: bytes | None = (
            None  # the framing of an upgrade request's body, still to read
        )
        self.replaying = False
        self.idle_since: float | None = None  # when the connection last went idle, if it is

    # Connections: the cap and the deadlines
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self.guard.admit(self):
            transport.write(at_capacity())
            transport.close()
            return
        self.admitted = True
        super().connection_made(transport)
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.admitted:
            return
        self.admitted = False
        self.guard.release(self)
        self._disarm_head_deadline()
        self._cancel_body_deadline()
        self._cancel_idle_timer()
        super().connection_lost(exc)

    def evict(self) -> None:
        """Closed at the cap to make room for a new connection: at once, whatever is buffered
        (a client that does not read its answer must not keep the descriptor)."""
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        if self.transport is not None:
            self.transport.abort()  # also one closing already, whose answer the client does not read

    # The idle timeout (uvicorn's keep-alive timeout) with at most one timer per connection: a
    # kept-alive connection goes idle after every answer (a node's report every second), and a
    # timer armed and cancelled each time costs more than the look at when it went idle that the
    # timer takes when it fires.
    def _unset_keepalive_if_required(self) -> None:
        self.idle_since = None  # not idle: a request has begun (its timer, if any, finds it so)

    def on_response_complete(self) -> None:
        # uvicorn's (HttpToolsProtocol.on_response_complete), but the idle timer is armed only
        # when none is pending: one pending counts from ``idle_since`` when it fires.
        self.server_state.total_requests += 1
        if not self.transport.is_closing():
            self.idle_since = None
            self.flow.resume_reading()
            if self.pipeline:
                cycle, app = self.pipeline.pop()
                self._start_asgi_task(cycle, app)
            else:
                self.idle_since = self.loop.time()
                if self.timeout_keep_alive_task is None:
                    self.timeout_keep_alive_task = self.loop.call_later(
                        self.timeout_keep_alive, self._idle_timer
                    )
        if not self.pipeline:
            self.guard.unreserve(self)  # idle again, or closing: it may make room at the cap

    def _idle_timer(self) -> None:
        self.timeout_keep_alive_task = None
        if self.idle_since is None:
            return  # a request since: armed again when it has been answered
        remaining = self.idle_since + self.timeout_keep_alive - self.loop.time()
        if remaining > 0:
            self.timeout_keep_alive_task = self.loop.call_later(remaining, self._idle_timer)
        else:
            self.timeout_keep_alive_handler()

    def _cancel_idle_timer(self) -> None:
        self.idle_since = None
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None

    def data_received(self, data: bytes) -> None:
        if self.admitted:
            self._unset_keepalive_if_required()
            self._feed(data)
            if self.lane_reserve_due and self.lane_request is not None:
                self.lane_reserve_due = False  # its body is still to come: reserved meanwhile
                self.guard.reserve(self, self._client_host())
            if self.body_open and self.body_since is None and not self.transport.is_closing():
                self._arm_body_deadline()  # counted from now: the end of the head's last piece

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
        refusal = Refusal(
            408,
            "head_timeout",
            f"the request head was not complete within {self.guard.head_timeout:g}s",
        )
        if self.in_head:  # a client that sent part of a head learns why
            self._refuse(refusal)
        else:
            self.guard.refuse(refusal, self._client_host())
            self.transport.close()

    # The body deadline, like the idle timer, with at most one timer per connection: a body
    # sent apart from its head (Java's HttpClient sends every one so) follows it within
    # milliseconds, and the timer of an earlier body, still pending, looks at ``body_since``
    # when it fires.
    def _arm_body_deadline(self) -> None:
        self.body_since = self.loop.time()
        if self.body_deadline is None:
            self.body_deadline = self.loop.call_later(self.guard.body_timeout, self._body_timer)

    def _disarm_body_deadline(self) -> None:
        self.body_since = None  # its timer, if pending, finds no body awaited

    def _cancel_body_deadline(self) -> None:
        self.body_since = None
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None

    def _body_timer(self) -> None:
        self.body_deadline = None
        if self.body_since is None:
            return  # the body it was armed for came: armed again for the next one
        remaining = self.body_since + self.guard.body_timeout - self.loop.time()
        if remaining > 0:
            self.body_deadline = self.loop.call_later(remaining, self._body_timer)
        else:
            self._body_timed_out()

    def _body_timed_out(self) -> None:
        self.body_since = None
        if self.transport.is_closing():
            return
        refusal = Refusal(
            408,
            "body_timeout",
            f"the request body was not complete within {self.guard.body_timeout:g}s of its head",
        )
        if self.lane_request is not None or self.cycle is None or not self.cycle.response_started:
            self._refuse(refusal)  # (a report in the lane: the cycle is the previous request's)
        else:  # answered already (a token refused before the body): only the connection is left
            self.guard.refuse(refusal, self._client_host())
            self.transport.close()

    def _refuse(self, refusal: Refusal) -> None:
        self.guard.refuse(refusal, self._client_host())
        self._disarm_head_deadline()
        self._disarm_body_deadline()
        self.transport.write(
            _canned(refusal.status, PHRASES.get(refusal.status, "Bad Request"), refusal.detail)
        )
        self.transport.close()

    def _client_host(self) -> str:
        return self.client[0] if self.client else "-"

    # Parsing: the head's size, its framing, an ignored upgrade
    def _feed(self, data: bytes) -> None:
        started_in_head = self.in_head
        self.piece_size = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            self._ignore_upgrade(data[upgrade.args[0] :])
            return
        except httptools.HttpParserError as exc:
            self._refuse(self.refusal or llhttp_refusal(exc))
            return
        if not self.in_head:
            if (
                self.head_deadline is not None
            ):  # none is waiting: a head that arrives whole arms no timer
                self._disarm_head_deadline()
            return
        # A head still incomplete: every byte of a piece that began inside it is the head's; of
        # the piece it began in, what the parser has handed over so far.
        self.head_received = (
            self.head_received + len(data)
            if started_in_head
            else max(1, head_size(self.url, self.headers))
        )
        if self.head_received > self.max_head_bytes:
            self._refuse(_head_too_large(self.max_head_bytes))
        elif self.head_deadline is None and not self.transport.is_closing():
            self._arm_head_deadline()  # a kept-alive connection's next head has begun

    def _ignore_upgrade(self, rest: bytes) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.parser.set_dangerous_leniencies(
            lenient_data_after_close=True
        )  # as uvicorn's own parser
        if self.upgrade_body is not None:
            self.replaying = True
            self.parser.feed_data(
                _REPLAYED_HEAD % self.upgrade_body
            )  # its url and headers go to a scope of their own
            self.upgrade_body = None
        if rest:
            self._feed(rest)
        else:
            self._disarm_head_deadline()

    def on_message_begin(self) -> None:
        # uvicorn's (HttpToolsProtocol.on_message_begin), but the request's scope is made only
        # for a request the app answers (_begin_scope): a report the lane answers needs none.
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        # Not idle: a request has begun (also one in the same piece as a report the lane has
        # just answered, which armed the idle timer while the parser was still reading).
        self._unset_keepalive_if_required()
        self.in_head = True
        self.head_received = 0

    def _begin_scope(self) -> None:
        """The request's ASGI scope, as uvicorn's on_message_begin makes it (its headers the list
        the parser's callbacks filled)."""
        self.scope = {
            "type": "http",
            "asgi": {"version": self.asgi_version, "spec_version": "2.3"},
            "http_version": "1.1",
            "server": self.server,
            "client": self.client,
            "scheme": self.scheme,  # type: ignore[typeddict-item]  # as uvicorn sets it
            "root_path": self.root_path,
            "headers": self.headers,
            "state": self.app_state.copy(),
        }

    def on_headers_complete(self) -> None:
        self.in_head = False
        if self.replaying:
            self.replaying = False  # what follows is the upgrade request's body
            return
        # A head that arrived in one piece no larger than the limit is within it: measured
        # only when it came in pieces or in a larger one.
        if (self.head_received or self.piece_size > self.max_head_bytes) and head_size(
            self.url, self.headers
        ) > self.max_head_bytes:
            self.refusal = _head_too_large(self.max_head_bytes)
            raise _Refused
        if self.parser.get_http_version() == "1.0" and any(
            name == b"transfer-encoding" for name, _ in self.headers
        ):
            self.refusal = Refusal(
                400, "ambiguous_framing", "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1)"
            )
            raise _Refused
        framing = body_framing(self.headers)
        if self.parser.should_upgrade():
            self.upgrade_body = framing
        self.body_open = framing is not None
        in_lane = self.lane is not None and self._in_lane()
        if in_lane and self.lane_reserves:
            self.lane_reserve_due = True  # reserved, or renewed, when known which is needed
            return
        if self.guard.reserves(self.url, self.headers):
            self.guard.reserve(self, self._client_host())
        if in_lane:
            return
        self._begin_scope()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self.lane_request is not None:
            self.lane_request[1].append(body)  # at most the node report's limit
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self.upgrade_body is not None:
            return  # llhttp ends an upgrade request at its head: its body is still to come
        self.body_open = False
        self._disarm_body_deadline()
        if self.lane_request is not None:
            self._answer_in_lane(*self.lane_request)
            return
        super().on_message_complete()

    # Node reports answered by the connection (app/server/edge/report_lane.py)
    def _in_lane(self) -> bool:
        """Whether the request whose head is complete is a plain node report the lane answers
        (nothing else of this connection's in progress); its body is then kept here."""
        assert self.lane is not None
        if (
            (self.cycle is not None and not self.cycle.response_complete)
            or self.pipeline
            or self.parser.should_upgrade()
            or self.parser.get_http_version() != "1.1"
            or not self.parser.should_keep_alive()
        ):
            return False
        node_id = self.lane.node_of(self.parser.get_method(), self.url, self.headers)
        if node_id is None:
            return False
        self.lane_request = (node_id, [], default_timer())
        return True

    def _answer_in_lane(self, node_id: int, pieces: list[bytes], started: float) -> None:
        assert self.lane is not None
        self.lane_request = None
        body = b"".join(pieces)
        try:
            taken = self.lane.take(node_id, body)
        except Exception:  # noqa: BLE001 - the app answers it, as it answers its own failures
            taken = False
        reserve_due, self.lane_reserve_due = self.lane_reserve_due, False
        if not taken:
            if reserve_due:  # reserved while the app answers it, as any token holder's request
                self.guard.reserve(self, self._client_host())
            # To the app as it came: the request's cycle and task, its body, its end.
            self._begin_scope()
            super().on_headers_complete()
            if self.lane_closing and self.cycle is not None:
                self.cycle.keep_alive = False
            if body:
                super().on_body(body)
            super().on_message_complete()
            return
        self.transport.write(
            self.lane.answer(self.server_state.default_headers, close=self.lane_closing)
        )
        self.lane.count(default_timer() - started)
        if reserve_due:  # answered within the call that read its head: as reserved and released
            self.guard.renew(self, self._client_host())
        if self.lane_closing:
            self.transport.close()
        self.on_response_complete()

    def shutdown(self) -> None:
        """The server stops: a report in the lane is answered first (and the connection closed),
        as uvicorn answers a request in progress; otherwise as uvicorn does."""
        if self.lane_request is not None:
            self.lane_closing = True
            return
        super().shutdown()


def head_size(url: bytes, headers: list[tuple[bytes, bytes]]) -> int:
    """The bytes of a head's target and header lines (the request line's method and version,
    and optional whitespace, not counted)."""
    return len(url) + sum(len(name) + len(value) + 4 for name, value in headers)


def _head_too_large(limit: int) -> Refusal:
    return Refusal(431, "head_too_large", f"the request head is larger than {limit} bytes")


def body_framing(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The framing header of a request's body (llhttp has checked there is one framing), or
    None when it has no body."""
    for name, value in headers:
        if name == b"transfer-encoding":
            return b"transfer-encoding: chunked"
        if name == b"content-length" and value.strip() not in (b"0", b""):
            return b"content-length: " + value.strip()
    return None


def llhttp_refusal(exc: httptools.HttpParserError) -> Refusal:
    detail = str(exc)
    if isinstance(exc, httptools.HttpParserInvalidMethodError):
        return Refusal(
            501, "malformed", f"the API serves the methods {', '.join(SERVED_METHODS)} ({detail})"
        )
    if detail == "Transfer-Encoding can't be present with Content-Length":
        return Refusal(400, "ambiguous_framing", CL_WITH_TE)
    if "Content-Length" in detail or "Transfer-Encoding" in detail:
        return Refusal(400, "ambiguous_framing", detail)
    return Refusal(400, "malformed", f"not a valid HTTP/1.1 request ({detail})")
