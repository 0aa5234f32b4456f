"""The pure parts of the HTTP edge: what framing is ambiguous, how large a head is, the rate
limit of refusal lines, the methods each path serves and the metrics' method label. The real
server is covered in tests/integration/test_http_edge.py."""

from __future__ import annotations

import logging

import h11
import pytest

from app.clock import ManualClock
from app.server.http_protocol import MAX_REQUEST_HEAD_BYTES, CheckedConnection, ConnectionGuard, framing_problem, head_size
from app.server.methods import AllowedMethods, metric_method
from app.server.refusal_log import RefusalLog, bounded, quoted

from .test_admission import make_app


def received(raw: bytes) -> h11.Request | CheckedConnection:
    connection = CheckedConnection(MAX_REQUEST_HEAD_BYTES)
    connection.receive_data(raw)
    try:
        return connection.next_event()
    except h11.RemoteProtocolError:
        return connection


@pytest.mark.parametrize(
    ("headers", "version"),
    [(b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n", b"1.1"), (b"Transfer-Encoding: chunked\r\nContent-Length: 4\r\n", b"1.1"), (b"Transfer-Encoding: chunked\r\n", b"1.0")],
)
def test_content_length_with_transfer_encoding_and_chunked_http_1_0_are_ambiguous(headers, version):
    refused = received(b"PUT /x HTTP/" + version + b"\r\nHost: a\r\n" + headers + b"\r\n")
    assert isinstance(refused, CheckedConnection) and refused.refusal is not None
    assert (refused.refusal.status, refused.refusal.reason) == (400, "ambiguous_framing")


def test_one_content_length_or_chunked_alone_is_one_framing():
    for headers in (b"Content-Length: 4\r\n", b"Transfer-Encoding: chunked\r\n", b"Content-Length: 4\r\nContent-Length: 4\r\n"):
        request = received(b"PUT /x HTTP/1.1\r\nHost: a\r\n" + headers + b"\r\n")
        assert isinstance(request, h11.Request) and framing_problem(request) is None


def test_a_head_is_measured_as_sent_and_refused_with_431_past_the_limit():
    head = b"GET /throttle-factor HTTP/1.1\r\nHost: a\r\nX-Padding: " + b"a" * 100 + b"\r\n\r\n"
    request = received(head)
    assert isinstance(request, h11.Request) and head_size(request) == len(head)
    padding = MAX_REQUEST_HEAD_BYTES - len(head) + 100
    at_limit = received(head.replace(b"a" * 100, b"a" * padding))
    assert isinstance(at_limit, h11.Request)
    over = received(head.replace(b"a" * 100, b"a" * (padding + 1)))
    assert isinstance(over, CheckedConnection) and over.refusal is not None and over.refusal.status == 431


def test_a_malformed_head_is_refused_as_malformed():
    refused = received(b"GET /x HTTP/1.1\r\nBad Header\r\n\r\n")
    assert isinstance(refused, CheckedConnection) and refused.refusal is not None and refused.refusal.reason == "malformed"


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
    with caplog.at_level(logging.WARNING, logger="app.server.http_protocol"):
        assert all(guard.admit() for _ in range(10))
        assert not guard.admit() and not guard.admit()
        guard.release()
        assert guard.admit() and not guard.admit()  # still the same episode
        for _ in range(3):
            guard.release()  # below 90% of the cap: the episode is over
        assert all(guard.admit() for _ in range(3)) and not guard.admit()  # a new one
    assert len(caplog.records) == 2 and guard.refused["connection_cap"] == 4


def test_every_path_allows_exactly_the_methods_its_routes_serve(tmp_path):
    allowed = AllowedMethods(make_app(tmp_path))
    assert allowed.of("/quotas/overrides") == ("PUT", "DELETE", "OPTIONS")
    assert allowed.of("/quotas/groups/any-name") == ("PUT", "DELETE", "OPTIONS")
    assert allowed.of("/throttle-factor") == ("GET", "HEAD", "OPTIONS")
    assert allowed.of("/metrics") == ("GET", "HEAD", "OPTIONS")
    assert allowed.of("/quotas/groups/a/b") is None and allowed.of("/nothing") is None


def test_the_metrics_method_label_takes_only_the_served_methods():
    assert [metric_method(m) for m in ("GET", "HEAD", "PUT", "DELETE", "OPTIONS", "POST", "BREW", "get")] == ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "other", "other", "other"]
