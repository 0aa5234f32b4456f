"""The pure parts of the HTTP edge: which framings are refused and why, what an ignored
upgrade replays, the rate limit of refusal lines, the methods each path serves and the metrics' method label. The real
server is covered in tests/integration/test_http_edge.py."""

from __future__ import annotations

import logging

import httptools
import pytest

from app.clock import ManualClock
from app.server.edge.http_protocol import CL_WITH_TE, ConnectionGuard, body_framing, head_size, llhttp_refusal
from app.server.edge.methods import AllowedMethods, metric_method
from app.server.edge.refusal_log import RefusalLog, bounded, quoted

from .test_admission import make_app


def llhttp_error(raw: bytes) -> httptools.HttpParserError:
    class Ignored:
        pass

    with pytest.raises(httptools.HttpParserError) as raised:
        httptools.HttpRequestParser(Ignored()).feed_data(raw)
    return raised.value


@pytest.mark.parametrize(
    ("framing", "reason"),
    [
        (b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", "ambiguous_framing"),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", "ambiguous_framing"),
        (b"Content-Length: 4\r\nContent-Length: 4\r\n", "ambiguous_framing"),
        (b"Content-Length: 4, 5\r\n", "ambiguous_framing"),
        (b"Transfer-Encoding: chunked, gzip\r\n", "ambiguous_framing"),
        (b"Bad Header\r\n", "malformed"),
    ],
)
def test_the_parser_refuses_every_framing_that_could_be_read_two_ways(framing, reason):
    refusal = llhttp_refusal(llhttp_error(b"PUT /x HTTP/1.1\r\nHost: a\r\n" + framing + b"\r\nabcd"))
    assert (refusal.status, refusal.reason) == (400, reason)
    if framing.startswith(b"Content-Length: 4\r\nTransfer"):
        assert refusal.detail == CL_WITH_TE


def test_a_method_the_parser_does_not_know_is_501():
    refusal = llhttp_refusal(llhttp_error(b"BREWCOFFEE / HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert refusal.status == 501 and "GET, HEAD, POST, PUT, DELETE, OPTIONS" in refusal.detail


@pytest.mark.parametrize(
    ("headers", "framing"),
    [
        ([(b"content-length", b"17")], b"content-length: 17"),
        ([(b"transfer-encoding", b"chunked")], b"transfer-encoding: chunked"),
        ([(b"content-length", b"0")], None),
        ([(b"host", b"a")], None),
    ],
)
def test_an_ignored_upgrade_replays_only_the_framing_of_its_body(headers, framing):
    assert body_framing(headers) == framing


def test_a_head_is_measured_by_its_target_and_header_lines():
    head = b"GET /throttle-factor HTTP/1.1\r\nHost: a\r\nX-Padding: " + b"p" * 100 + b"\r\n\r\n"
    request_line_rest = len(b"GET  HTTP/1.1\r\n") + len(b"\r\n")  # what head_size leaves out
    assert head_size(b"/throttle-factor", [(b"host", b"a"), (b"x-padding", b"p" * 100)]) == len(head) - request_line_rest


def test_refusal_lines_are_one_per_source_and_reason_per_interval_then_count_those_left_out(caplog):
    clock = ManualClock()
    refusals = RefusalLog(60, clock)
    logger = logging.getLogger("test.refusals")
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for _ in range(5):
            refusals.log(logger, logging.WARNING, "10.0.0.1", "401", "refused %s", "a")
        refusals.log(logger, logging.WARNING, "10.0.0.2", "401", "refused %s", "b")
        refusals.log(logger, logging.WARNING, "10.0.0.1", "403", "refused %s", "c")
        clock.advance(60)
        refusals.log(logger, logging.WARNING, "10.0.0.1", "401", "refused %s", "d")
    assert [record.getMessage() for record in caplog.records] == [
        "refused a",
        "refused b",
        "refused c",
        "refused d (4 more like it from this client left out since the previous line)",
    ]


def test_refusal_log_memory_is_bounded_by_forgetting_old_sources():
    clock = ManualClock()
    refusals = RefusalLog(1, clock)
    for n in range(30_000):
        refusals.admit(f"10.{n}", "401")
        clock.advance(0.001)
    assert len(refusals._last) <= 10_000


def test_quoted_names_are_bounded_escaped_and_on_one_line():
    assert bounded("a" * 300) == "a" * 200 + "..."
    assert quoted("eve\r\nforged") == '"eve\\r\\nforged"'
    assert len(quoted("\u2028" * 1000)) < 1300


def test_the_connection_cap_is_one_warning_per_episode(caplog):
    guard = ConnectionGuard(max_connections=10, head_timeout_seconds=1)
    with caplog.at_level(logging.WARNING, logger="app.server.edge.http_protocol"):
        assert all(guard.admit() for _ in range(10))
        assert not guard.admit() and not guard.admit()
        guard.release()
        assert guard.admit() and not guard.admit()  # still the same episode
        for _ in range(3):
            guard.release()  # below 90% of the cap: the episode is over
        assert all(guard.admit() for _ in range(3)) and not guard.admit()  # a new one
    assert len(caplog.records) == 2 and guard.refused["connection_cap"] == 4


def test_every_path_allows_exactly_the_methods_its_routes_serve(tmp_path):
    allowed = AllowedMethods(make_app(tmp_path).routes)
    assert allowed.of("/quotas/overrides") == ("PUT", "DELETE", "OPTIONS")
    assert allowed.of("/quotas/groups/any-name") == ("PUT", "DELETE", "OPTIONS")
    assert allowed.of("/throttle-factor") == ("GET", "HEAD", "OPTIONS")
    assert allowed.of("/metrics") == ("GET", "HEAD", "OPTIONS")
    assert allowed.of("/what-if") == ("POST", "OPTIONS")
    assert allowed.of("/quotas/groups/a/b") is None and allowed.of("/nothing") is None


def test_the_metrics_method_label_takes_only_the_served_methods():
    assert [metric_method(m) for m in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW", "get")] == [
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "other", "other", "other"
    ]


class Connection:
    """A stand-in for a protocol: what the guard closes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.evicted = False

    def evict(self) -> None:
        self.evicted = True

    def __repr__(self) -> str:
        return self.name


def test_at_the_cap_a_new_connection_closes_the_oldest_one_not_reserved():
    guard = ConnectionGuard(max_connections=3, head_timeout_seconds=1)
    shim, flood_1, flood_2, probe = (Connection(n) for n in ("shim", "flood-1", "flood-2", "probe"))
    for connection in (shim, flood_1, flood_2):
        assert guard.admit(connection)
    assert guard.reserve(shim, "10.0.0.1")  # a long-poll with the node token
    assert guard.admit(probe)
    assert (shim.evicted, flood_1.evicted, flood_2.evicted) == (False, True, False)
    guard.release(flood_1)  # its transport closes
    assert guard.open == 3 and guard.refused["evicted"] == 1
    assert guard.admit(Connection("next")) and flood_2.evicted and not probe.evicted and not shim.evicted


def test_when_every_connection_is_reserved_a_new_one_is_refused_and_an_answered_one_makes_room_again():
    guard = ConnectionGuard(max_connections=2, head_timeout_seconds=1)
    first, second = Connection("a"), Connection("b")
    assert guard.admit(first) and guard.admit(second)
    assert guard.reserve(first, "10.0.0.1") and guard.reserve(second, "10.0.0.2")
    assert not guard.admit(Connection("refused")) and guard.refused["connection_cap"] == 1
    guard.unreserve(first)  # its request answered: an idle kept-alive connection
    assert guard.admit(Connection("c")) and first.evicted and not second.evicted


def test_a_client_reserves_at_most_its_share_of_connections():
    guard = ConnectionGuard(max_connections=100, head_timeout_seconds=1, reserved_per_client=2)
    held = [Connection(str(n)) for n in range(3)]
    for connection in held:
        guard.admit(connection)
    assert [guard.reserve(c, "10.0.0.9") for c in held] == [True, True, False]
    assert guard.reserve(Connection("other"), "10.0.0.8"), "another client has its own share"
    guard.release(held[0])
    assert guard.reserve(held[2], "10.0.0.9"), "a share is freed when its connection closes"


@pytest.mark.parametrize(
    ("target", "authorization", "reserves"),
    [
        (b"/healthz", None, True),
        (b"/readyz?x=1", None, True),
        (b"/metrics", None, True),
        (b"/quotas?wait=30", b"Bearer node-token-0123456789", True),
        (b"/quotas?wait=30", b"bearer admin-token-0123456789", True),
        (b"/quotas?wait=30", None, False),
        (b"/quotas?wait=30", b"Bearer guessed-token-01234567", False),
        (b"/volumes", b"Basic bm9kZS10b2tlbi0wMTIzNDU2Nzg5", False),
        (b"/healthz/../volumes", None, False),
    ],
)
def test_probes_and_token_holders_reserve_their_connection_and_no_one_else(target, authorization, reserves):
    guard = ConnectionGuard(10, 1, tokens=[b"node-token-0123456789", b"admin-token-0123456789"])
    headers = [(b"host", b"a")] + ([(b"authorization", authorization)] if authorization else [])
    assert guard.reserves(target, headers) is reserves


def test_the_uvicorn_internals_the_edge_protocol_relies_on_are_where_it_expects_them():
    """The edge extends uvicorn's httptools protocol through its internals (tested with uvicorn
    0.54): this fails when they move, before a flood finds out."""
    import inspect

    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

    for method in ("connection_made", "connection_lost", "data_received", "on_message_begin", "on_headers_complete",
                   "on_message_complete", "on_response_complete", "_unset_keepalive_if_required"):
        assert callable(getattr(HttpToolsProtocol, method, None)), method
    protocol_source = inspect.getsource(HttpToolsProtocol)
    # A request's end reaches the subclass's on_response_complete (it frees the connection's reservation).
    assert "on_response=self.on_response_complete" in protocol_source
    for attribute in ("self.pipeline", "self.cycle", "self.url", "self.headers", "self.transport"):
        assert attribute in protocol_source, attribute
    cycle_source = inspect.getsource(RequestResponseCycle)
    assert "self.response_started" in cycle_source and "self.disconnected" in cycle_source
    # A GET's second receive() waits for the connection to close: how a long-poll learns its client went.
    receive = inspect.getsource(RequestResponseCycle.receive)
    assert "await self.message_event.wait()" in receive and '{"type": "http.disconnect"}' in receive
