"""Node reports answered by the HTTP connection itself (app/server/edge/report_lane.py), over a
real loopback socket through the service's edge protocol on uvicorn: every request, plain or
not, is answered exactly as the server without the lane answers it (status, headers but the
date, body) and counted the same in the HTTP metrics; only the plain reports the service takes
are answered by the lane; pipelined requests keep their order; and the cheap proof that a body
gives no key twice never lets a duplicate through."""

from __future__ import annotations

import asyncio
import functools
import json
import socket

import httpx
import pytest
import uvicorn

from app.clock import ManualClock
from app.server.api.schemas.nodes import NodeVolumesBody
from app.server.edge.http_protocol import ConnectionGuard, EdgeHttpToolsProtocol
from app.server.edge.json_bodies import keys_counted_once

from .test_node_report_direct_route import REQUESTS
from .test_node_reports import NODE, NODE_AUTH, make_app, report

GiB = 1024**3
PLAIN = json.dumps(report(GiB)).encode()
# Of REQUESTS, the reports the lane answers: nodes 1, 2, 0 and 2147483647 and node 1's three
# more within its burst (its two past the burst are refused 429: the app answers those).
ANSWERED_BY_THE_LANE = 7


def head(raw: bytes, node: int, body: bytes, extra: bytes = b"", version: bytes = b"1.1") -> bytes:
    return (
        b"PUT /nodes/%d/volumes HTTP/%s\r\nHost: service\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n" % (node, version, NODE.encode(), len(body), extra)
    ) + body + raw


async def serving(app, lane: bool, scenario, body_timeout: float = 5.0, idle_timeout: float = 5.0, guard: ConnectionGuard | None = None):
    """Run ``scenario(port)`` against ``app`` served by uvicorn with the edge protocol, with or
    without the report lane."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    guard = guard or ConnectionGuard(64, 5.0, tokens=[NODE.encode()], body_timeout_seconds=body_timeout)
    protocol = functools.partial(EdgeHttpToolsProtocol, guard=guard, lane=app.state.report_lane if lane else None)
    server = uvicorn.Server(
        uvicorn.Config(app, http=protocol, ws="none", log_level="warning", access_log=False, timeout_keep_alive=idle_timeout)
    )
    server.install_signal_handlers = lambda: None  # older uvicorn; newer ones leave other threads' signals alone
    task = asyncio.create_task(server.serve(sockets=[listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        return await scenario(listener.getsockname()[1])
    finally:
        server.should_exit = True
        await task


def answers(tmp_path, lane: bool):
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        got = []
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for path, body, headers in REQUESTS:
                answer = await client.put(path, content=body, headers=headers)
                kept = sorted((k, v) for k, v in answer.headers.items() if k != "date")
                got.append((path, answer.status_code, kept, answer.content))
            metrics = (await client.get("/metrics", headers={"Accept-Encoding": "identity"})).text
        counted = sorted(
            line for line in metrics.splitlines()
            if line.startswith(("http_requests_total{", "http_request_duration_seconds_count{")) and "/nodes/" in line
        )
        return got, counted, app.state.report_lane.answered

    return asyncio.run(serving(app, lane, scenario))


def test_every_report_is_answered_as_without_the_lane_and_the_plain_taken_ones_by_the_lane(tmp_path):
    with_lane, counted, answered = answers(tmp_path / "lane", lane=True)
    without, counted_before, answered_before = answers(tmp_path / "app", lane=False)
    assert len(with_lane) == len(without) == len(REQUESTS)
    for got, expected in zip(with_lane, without):
        assert got == expected
    assert answered_before == 0 and answered == ANSWERED_BY_THE_LANE
    statuses = [status for _, status, _, _ in with_lane]
    assert {204, 401, 413, 422, 429} <= set(statuses)
    assert counted == counted_before
    assert any('handler="/nodes/{node_id}/volumes"' in line and 'status="2xx"' in line and line.endswith(" 10.0") for line in counted), counted  # the 204s, by the lane or the app


def raw_exchange(tmp_path, payload: bytes, answers_expected: int) -> tuple[list[bytes], int]:
    """Send ``payload`` in one write on one connection; the status lines of the answers, in
    order, and the reports the lane answered."""
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(payload)
        await writer.drain()
        received = b""
        while received.count(b"HTTP/1.") < answers_expected:
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            if not chunk:
                break
            received += chunk
        writer.close()
        return [line for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.")], app.state.report_lane.answered

    return asyncio.run(serving(app, True, scenario))


def test_pipelined_requests_are_answered_in_order_whoever_answers_them(tmp_path):
    # (uvicorn itself drops a pipelined request with a body that arrives while another is in
    # progress, lane or not: the lane answers only when nothing of its connection is.)
    payload = head(b"", 1, PLAIN) + head(b"", 2, PLAIN) + b"GET /healthz HTTP/1.1\r\nHost: service\r\n\r\n"
    lines, answered = raw_exchange(tmp_path, payload, 3)
    assert [line.split(b" ")[1] for line in lines] == [b"204", b"204", b"200"]
    assert answered == 2


@pytest.mark.parametrize(
    ("payload", "status"),
    [
        (head(b"", 1, PLAIN, version=b"1.0"), b"204"),  # HTTP/1.0: closes after its answer
        (head(b"", 1, PLAIN, extra=b"Connection: close\r\n"), b"204"),
        (head(b"", 1, PLAIN, extra=b"Expect: 100-continue\r\n"), b"204"),
        (head(b"", 1, PLAIN, extra=b"Content-Type: application/json\r\n"), b"204"),  # the type given twice
    ],
)
def test_a_report_off_the_plain_path_is_the_apps(tmp_path, payload, status):
    lines, answered = raw_exchange(tmp_path, payload, 1)
    assert [line.split(b" ")[1] for line in lines if b" 100 " not in line] == [status]
    assert answered == 0


def test_a_chunked_report_is_the_apps(tmp_path):
    body = PLAIN
    payload = (
        b"PUT /nodes/1/volumes HTTP/1.1\r\nHost: service\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (NODE.encode(), len(body), body)
    )
    lines, answered = raw_exchange(tmp_path, payload, 1)
    assert lines == [b"HTTP/1.1 204 No Content"] and answered == 0


ENTRY = '{"log_dir": "/var/lib/kafka/data-0", "total_bytes": 100, "usable_bytes": 50, "holds": ["data"]}'


@pytest.mark.parametrize(
    "text",
    [
        '{"roles": ["broker"], "volumes": [], "roles": ["broker"]}',
        '{"roles": ["broker"], "volumes": [{"log_dir": "/a", "log_dir": "/b", "total_bytes": 1, "usable_bytes": 1, "holds": ["data"]}]}',
        # a duplicate written with a space before its colon, beside a string holding \": to make up the count
        '{"roles": ["broker"], "volumes": [{"log_dir": "/a\\":", "total_bytes": 1, "usable_bytes": 1, "holds": ["data"], "holds" : ["data"]}]}',
        '{"roles":["broker"],"volumes":[{"log_dir":"/a","total_bytes":1,"usable_bytes":1,"holds":["data"]}],"volumes"\n:[]}',
    ],
)
def test_the_cheap_proof_never_passes_a_body_that_gives_a_key_twice(text):
    body = text.encode()
    parsed = NodeVolumesBody.model_validate_json(body)  # the parser itself takes the last value
    assert not keys_counted_once(body, parsed.json_keys())


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"roles": ["broker"], "volumes": [json.loads(ENTRY)] * 0}),
        '{"roles":["broker","controller"],"volumes":[' + ENTRY.replace(" ", "") + "]}",
        json.dumps({"roles": ["broker"], "volumes": [json.loads(ENTRY)]}, indent=2),
    ],
)
def test_the_cheap_proof_holds_for_what_shims_and_json_libraries_write(text):
    body = text.encode()
    assert keys_counted_once(body, NodeVolumesBody.model_validate_json(body).json_keys())


@pytest.mark.parametrize("lane", [True, False])
def test_a_report_whose_body_stops_coming_is_refused_408_at_the_body_deadline_after_an_answered_one(tmp_path, lane):
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: service\r\n\r\n")  # the app's, answered first
        await writer.drain()
        first = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        length = next(int(line.split(b":")[1]) for line in first.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        writer.write(head(b"", 2, PLAIN)[:-10])  # all but the body's last ten bytes
        await writer.drain()
        rest = await asyncio.wait_for(reader.read(65536), 5)
        writer.close()
        return first, rest

    first, rest = asyncio.run(serving(app, lane, scenario, body_timeout=0.3))
    assert first.startswith(b"HTTP/1.1 200 ")
    assert rest.startswith(b"HTTP/1.1 408 ") and b"not complete within 0.3s" in rest, rest


def test_a_request_in_the_same_piece_as_a_report_the_lane_answered_is_not_cut_by_the_idle_timeout(tmp_path):
    """The lane answers in the parser's callback: the connection's idle timer it arms then must
    not run while the next request, already begun, is held (a long-poll of 1 s, idle timeout
    0.3 s)."""
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        long_poll = b"GET /throttle-factor?wait=1 HTTP/1.1\r\nHost: service\r\nIf-None-Match: *\r\n\r\n"
        writer.write(head(b"", 1, PLAIN) + long_poll)
        await writer.drain()
        received = b""
        while received.count(b"HTTP/1.1 ") < 2:
            chunk = await asyncio.wait_for(reader.read(65536), 5)
            if not chunk:
                break
            received += chunk
        writer.close()
        return received

    received = asyncio.run(serving(app, True, scenario, idle_timeout=0.3))
    statuses = [line.split(b" ")[1] for line in received.split(b"\r\n") if line.startswith(b"HTTP/1.1 ")]
    assert statuses == [b"204", b"304"], received


def test_a_report_in_the_lane_when_the_server_stops_is_answered_then_its_connection_closed(tmp_path):
    app = make_app(tmp_path, ManualClock())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    guard = ConnectionGuard(64, 5.0, tokens=[NODE.encode()])
    protocol = functools.partial(EdgeHttpToolsProtocol, guard=guard, lane=app.state.report_lane)
    server = uvicorn.Server(uvicorn.Config(app, http=protocol, ws="none", log_level="warning", access_log=False))

    async def main():
        task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started:
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection(*listener.getsockname())
        request = head(b"", 1, PLAIN)
        writer.write(request[:-10])  # the body not complete yet
        await writer.drain()
        await asyncio.sleep(0.1)
        server.should_exit = True  # the server stops while the report's body is coming
        await asyncio.sleep(0.2)
        writer.write(request[-10:])
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)  # to the end: the connection closes
        await task
        return answer

    answer = asyncio.run(main())
    assert answer.startswith(b"HTTP/1.1 204 ") and b"connection: close" in answer.lower(), answer
    assert app.state.report_lane.answered == 1


def test_a_route_counted_without_the_app_counts_through_series_looked_up_once_as_the_instrumentator_would():
    """DirectCount finds the instrumentator's two series of the route once (in its metric
    functions' closures); counting through them or through the functions gives the same
    samples. Should the instrumentator change how it writes them, this says so (the count
    then falls back to calling them, which is slower, not wrong)."""
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry, generate_latest

    from app.server.api import http_metrics

    samples = []
    for bind in (True, False):
        registry = CollectorRegistry()
        direct = http_metrics.instrument_http(FastAPI(), registry)
        original = http_metrics._series
        if not bind:  # as if the closures were not as expected: the functions, an Info per answer
            http_metrics._series = lambda *args: None
        try:
            count = direct.for_route("/nodes/{node_id}/volumes", "PUT", 204)
        finally:
            http_metrics._series = original
        assert direct.bound is bind and direct.batched is bind
        for duration in (0.0002, 0.0004, 0.003, 0.2):
            count(duration)
        samples.append(sorted(line for line in generate_latest(registry).decode().splitlines() if line.startswith("http_") and "created" not in line))
    assert samples[0] == samples[1]
    assert 'http_requests_total{handler="/nodes/{node_id}/volumes",method="PUT",status="2xx"} 4.0' in samples[0]
    assert any(line.startswith("http_request_duration_seconds_bucket") and line.endswith(" 2.0") and 'le="0.0005"' in line for line in samples[0])


def test_answers_counted_aside_are_folded_in_when_read_or_when_many_wait_as_if_counted_one_by_one(monkeypatch):
    """The lane's answers are kept aside and folded into the route's series when the registry
    is read, or when FOLD_AT wait: every read gives what counting each answer at once gives
    (counts, buckets on their bounds, the sum added in the same order), also between folds."""
    import random

    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry, generate_latest

    from app.server.api import http_metrics

    monkeypatch.setattr(http_metrics, "FOLD_AT", 7)
    registries, counts = [], []
    for bind in (True, False):
        registry = CollectorRegistry()
        direct = http_metrics.instrument_http(FastAPI(), registry)
        original = http_metrics._series
        if not bind:
            http_metrics._series = lambda *args: None
        try:
            counts.append(direct.for_route("/nodes/{node_id}/volumes", "PUT", 204))
        finally:
            http_metrics._series = original
        assert direct.batched is bind
        registries.append(registry)
    bounds = list(http_metrics.HTTP_LATENCY_BUCKETS)
    durations = [random.Random(5).choice(bounds) for _ in range(5)] + [random.Random(n).uniform(0, 2) ** 4 for n in range(60)]

    def lines(registry):
        return sorted(line for line in generate_latest(registry).decode().splitlines() if line.startswith("http_") and "created" not in line)

    labels = {"handler": "/nodes/{node_id}/volumes", "method": "PUT", "status": "2xx"}
    for n, duration in enumerate(durations, start=1):
        for count in counts:
            count(duration)
        if n % 5 == 0:  # read between folds, and while some wait
            assert registries[0].get_sample_value("http_requests_total", labels) == n
            assert lines(registries[0]) == lines(registries[1])
    assert registries[0].get_sample_value("http_request_duration_seconds_count", labels) == len(durations)
    assert lines(registries[0]) == lines(registries[1])


@pytest.mark.parametrize("lane", [True, False])
def test_an_idle_connection_is_closed_the_idle_timeout_after_its_last_answer_not_its_first(tmp_path, lane):
    """The idle timer is armed once and looks, when it fires, at when the connection last went
    idle: reports every 0.25 s keep a connection of idle timeout 0.4 s open past the first
    answer's timeout, and it is closed 0.4 s after the last one."""
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for node in (1, 2, 3, 4):
            writer.write(head(b"", node, PLAIN))
            await writer.drain()
            answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert answer.startswith(b"HTTP/1.1 204 "), answer
            last = loop.time()
            await asyncio.sleep(0.25)  # within the idle timeout
        assert not reader.at_eof()
        rest = await asyncio.wait_for(reader.read(), 5)  # to the end: the server closes it
        closed = loop.time()
        writer.close()
        return rest, closed - last

    rest, after_last = asyncio.run(serving(app, lane, scenario, idle_timeout=0.4))
    assert rest == b""
    assert 0.35 <= after_last <= 0.9, after_last


@pytest.mark.parametrize("lane", [True, False])
def test_the_body_deadline_counts_from_each_head_with_one_timer_per_connection(tmp_path, lane):
    """Bodies sent apart from their heads (as Java's HttpClient sends them), one report every
    0.2 s on one connection with a body timeout of 0.5 s: each is answered, though the timer
    armed for the first body is still pending when later ones come; then a body that stops
    coming is refused 408 the body timeout after its own head, not at that earlier timer."""
    app = make_app(tmp_path, ManualClock())

    async def scenario(port):
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = []
        for node in (1, 2, 3, 4):
            request = head(b"", node, PLAIN)
            split = request.index(b"\r\n\r\n") + 4
            writer.write(request[:split])
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(request[split:])
            await writer.drain()
            answers.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5))
            await asyncio.sleep(0.15)
        writer.write(head(b"", 5, PLAIN)[:-10])  # all but the body's last ten bytes
        await writer.drain()
        sent = loop.time()
        rest = await asyncio.wait_for(reader.read(65536), 5)
        refused_after = loop.time() - sent
        writer.close()
        return answers, rest, refused_after

    answers, rest, refused_after = asyncio.run(serving(app, lane, scenario, body_timeout=0.5, idle_timeout=5.0))
    assert all(answer.startswith(b"HTTP/1.1 204 ") for answer in answers), answers
    assert rest.startswith(b"HTTP/1.1 408 ") and b"not complete within 0.5s" in rest, rest
    assert 0.45 <= refused_after <= 1.2, refused_after


def test_a_report_answered_in_the_piece_that_brought_it_leaves_the_guard_as_a_reservation_would_and_one_whose_body_waits_is_reserved(tmp_path):
    """A plain report whose body came with its head is answered before anything else runs: its
    connection is not reserved for it, only made the newest of those not reserved, as reserving
    and releasing it did; one whose body is still to come holds its reservation meanwhile."""
    app = make_app(tmp_path, ManualClock())
    guard = ConnectionGuard(64, 5.0, tokens=[NODE.encode()])
    head = f"PUT /nodes/1/volumes HTTP/1.1\r\nHost: t\r\nAuthorization: {NODE_AUTH['Authorization']}\r\nContent-Type: application/json\r\nContent-Length: {len(PLAIN)}\r\n\r\n".encode()

    async def scenario(port):
        connections = []
        for _ in range(3):
            connections.append(await asyncio.open_connection("127.0.0.1", port))
            while len(guard._unreserved) < len(connections):
                await asyncio.sleep(0.005)
        order = list(guard._unreserved)
        seen = []  # the guard's connections not reserved (oldest first) and reserved

        async def answered(n):
            reader = connections[n][0]
            status = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)).split(b" ")[1]
            return status

        connections[0][1].write(head + PLAIN)
        assert await answered(0) == b"204"
        seen.append((list(guard._unreserved), dict(guard._reserved)))
        connections[1][1].write(head)
        await asyncio.sleep(0.1)
        seen.append((list(guard._unreserved), dict(guard._reserved)))
        connections[1][1].write(PLAIN)
        assert await answered(1) == b"204"
        await asyncio.sleep(0.02)
        seen.append((list(guard._unreserved), dict(guard._reserved)))
        for _, writer in connections:
            writer.close()
        return order, seen

    order, seen = asyncio.run(serving(app, True, scenario, guard=guard))
    a, b, c = order
    assert seen[0] == ([b, c, a], {})
    assert seen[1][0] == [c, a] and list(seen[1][1]) == [b]  # reserved while its body is awaited
    assert seen[2] == ([c, a, b], {})
    assert app.state.report_lane.answered == 2


def test_renewing_a_connection_is_what_reserving_then_releasing_it_does():
    """ConnectionGuard.renew: for a connection not reserved, reserved, or whose client holds its
    share, the guard ends as reserve then unreserve leave it (before the connection's own
    unreserve after its answer, which both then do)."""

    class Connection:
        def evict(self):
            pass

    def guard_with(state):
        guard = ConnectionGuard(10, 1.0, reserved_per_client=2)
        connections = [Connection() for _ in range(4)]
        for connection in connections:
            guard.admit(connection)
        for index, client in state:
            guard.reserve(connections[index], client)
        return guard, connections

    def snapshot(guard, connections):
        return ([connections.index(c) for c in guard._unreserved], {connections.index(c): k for c, k in guard._reserved.items()}, dict(guard._reserved_by_client))

    states = [(), ((2, "x"),), ((0, "x"), (2, "x")), ((1, "y"),), ((0, "x"), (1, "x"))]
    for state in states:
        for index in range(4):
            for client in ("x", "y"):
                one, ones = guard_with(state)
                reserved_before = index in {i for i, _ in state}
                if one.reserve(ones[index], client) and not reserved_before:
                    one.unreserve(ones[index])
                other, others = guard_with(state)
                other.renew(others[index], client)
                assert snapshot(one, ones) == snapshot(other, others), (state, index, client)
