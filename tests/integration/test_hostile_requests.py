"""Unfriendly requests against the real service over HTTP: bodies over the limit, heads too
large, writes without the token, bodies that would fill the memory; HEAD on every GET; a
failure inside is still problem+json; every write leaves one audit line.

One service for the module (observation off, a configured token, the default body limit of
1 MiB); a test that needs other settings starts its own."""

from __future__ import annotations

import http.client
import json
import select
import socket
import sqlite3
import time
from collections.abc import Iterable, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from devtools.devcluster.resources import process_resources

from .conftest import MiB, RunningService, launch_service

TOKEN = "hostile-requests-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
LIMIT = MiB  # throttle.service.http.max.body.bytes by default
PROBLEM_JSON = "application/problem+json"
SETTINGS = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_ratio": "0.05", "admin_token": TOKEN}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    running = launch_service(tmp_path_factory.mktemp("hostile"), **SETTINGS)
    yield running
    running.stop()


def port_of(service: RunningService) -> int:
    port = urlsplit(service.base_url).port
    assert port is not None
    return port


def exchange(
    service: RunningService, head: bytes, body: Iterable[bytes] = (), pause: float = 0, timeout: float = 10
) -> tuple[http.client.HTTPResponse | None, int]:
    """Send a request head, then body pieces only while the service has not answered (waiting
    up to ``pause`` seconds for an answer after each); return its answer (None if it closed the
    connection without one) and the body bytes sent."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port_of(service)), timeout=timeout) as sock:
        try:
            sock.sendall(head)
            for piece in body:
                sock.sendall(piece)
                sent += len(piece)
                if select.select([sock], [], [], pause)[0]:
                    break  # answered: the rest of the body is not needed
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = http.client.HTTPResponse(sock)
        try:
            answer.begin()
            answer.read()
        except (http.client.RemoteDisconnected, ConnectionResetError):
            return None, sent
        return answer, sent


def request_head(method: str, target: str, headers: dict[str, str]) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(total: int, piece: int = 64 * 1024) -> Iterator[bytes]:
    """A chunked body of ``total`` bytes of JSON whitespace, never finished (no last chunk)."""
    for _ in range(total // piece):
        yield f"{piece:x}\r\n".encode() + b" " * piece + b"\r\n"


def problem(answer: http.client.HTTPResponse | httpx.Response | None) -> dict:
    assert answer is not None, "the service closed the connection without an answer"
    content_type = answer.headers["content-type"]
    assert content_type == PROBLEM_JSON, content_type
    body = answer.content if isinstance(answer, httpx.Response) else answer.data  # type: ignore[attr-defined]
    return json.loads(body)


def test_a_body_over_the_limit_is_refused_with_413_before_it_is_read(service):
    padded = json.dumps({"produce": 5000000}).encode()
    exactly = padded + b" " * (LIMIT - len(padded))
    accepted = service.client.put("/quotas/overrides", params={"user": "limit"}, content=exactly, headers={**AUTH, **JSON})
    assert accepted.status_code == 200, accepted.text
    over = service.client.put("/quotas/overrides", params={"user": "limit"}, content=exactly + b" ", headers={**AUTH, **JSON})
    assert over.status_code == 413
    assert "1048576 bytes" in problem(over)["detail"] and "throttle.service.http.max.body.bytes" in problem(over)["detail"]

    # A Content-Length over the limit is answered at once: the body is never sent.
    head = request_head("PUT", "/quotas/overrides?user=limit", {**AUTH, "Content-Type": "application/json", "Content-Length": str(300 * MiB)})
    answer, sent = exchange(service, head)
    assert answer is not None and answer.status == 413 and sent == 0
    # A chunked body is counted as it arrives and refused at the limit, not at its end.
    head = request_head("PUT", "/quotas/overrides?user=limit", {**AUTH, "Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    answer, sent = exchange(service, head, chunked(300 * MiB))
    assert answer is not None and answer.status == 413, answer and answer.status
    assert sent < 64 * MiB, f"{sent} bytes sent before the answer"
    assert service.client.get("/quotas/resolve", params={"user": "limit", "type": "produce"}).json()["limit"] == 5000000


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer not-the-admin-token"}, 403), ({"Authorization": "Basic YWxpY2U6c2VjcmV0"}, 401)],
)
def test_the_token_is_checked_before_the_body_is_read_or_parsed(service, headers, status):
    for body in (b"{not json", b'{"produce": "lots"}', b"\xff\xfe" * 100):
        answer = service.client.put("/quotas/overrides", params={"user": "mallory"}, content=body, headers={**headers, **JSON})
        assert answer.status_code == status, answer.text
        assert problem(answer)["status"] == status
        if status == 401:
            assert answer.headers["www-authenticate"] == "Bearer"
    group = service.client.put("/quotas/groups/mallory", content=b"[" * 10000, headers={**headers, **JSON})
    assert group.status_code == status and problem(group)["status"] == status
    # A body that is not even sent: the answer comes from the headers alone.
    head = request_head("PUT", "/quotas/overrides?user=mallory", {**headers, "Content-Type": "application/json", "Content-Length": str(300 * MiB)})
    answer, sent = exchange(service, head)
    assert answer is not None and answer.status == status and sent == 0
    table = service.client.get("/quotas").json()
    assert "mallory" not in json.dumps(table["overrides"]) and table["groups"] == []


def test_without_a_configured_token_writes_are_refused_before_the_body_is_read(start_service):
    service = start_service(storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.05")
    answer = service.client.put("/quotas/overrides", params={"user": "alice"}, content=b"{not json", headers={**AUTH, **JSON})
    assert answer.status_code == 403 and "throttle.service.admin.token" in problem(answer)["detail"]
    answer, sent = exchange(service, request_head("PUT", "/quotas/groups/g", {"Content-Length": str(300 * MiB)}))
    assert answer is not None and answer.status == 403 and sent == 0


def test_a_10_mb_header_and_100000_headers_are_refused(service):
    huge_header = request_head("GET", "/throttle-factor", {"X-Padding": "a" * (10 * MiB)})
    many_headers = ("GET /throttle-factor HTTP/1.1\r\nHost: 127.0.0.1\r\n" + "".join(f"X-{n}: {n}\r\n" for n in range(100_000)) + "\r\n").encode()
    for head in (huge_header, many_headers):
        pieces = [head[start : start + 64 * 1024] for start in range(0, len(head), 64 * 1024)]
        answer, sent = exchange(service, b"", pieces, pause=0.2)
        # Refused once the head passed 16 KiB: a 431, or the connection closed under the rest.
        assert answer is None or answer.status == 431, answer.status
        assert sent <= 256 * 1024, f"{sent} bytes of a {len(head)}-byte head sent before the refusal"
    assert service.client.get("/healthz").status_code == 200


def test_memory_stays_bounded_while_300_mb_bodies_are_refused(service):
    pid = service.process.pid
    before = process_resources(pid).rss_kib * 1024
    body_size = 300 * MiB

    def body() -> Iterator[bytes]:
        piece = b" " * MiB
        for _ in range(body_size // MiB):
            yield piece

    with httpx.Client(base_url=service.base_url, timeout=60) as client:
        cases = [
            ({}, {"Content-Length": str(body_size)}, 401),
            ({"Authorization": "Bearer not-the-admin-token"}, {}, 403),  # chunked
            (AUTH, {"Content-Length": str(body_size)}, 413),
            (AUTH, {}, 413),  # chunked
        ]
        for auth, length, status in cases:
            answer = client.put("/quotas/overrides", params={"user": "big"}, content=body(), headers={**auth, **length, "Content-Type": "application/json"})
            assert answer.status_code == status, (auth, length, answer.status_code, answer.text[:200])
    peak = process_resources(pid).peak_rss_kib * 1024
    print(f"\n4 x 300 MiB bodies refused: resident {before / MiB:.0f} MiB before, peak {peak / MiB:.0f} MiB")
    assert peak - before < 100 * MiB, f"resident memory grew from {before / MiB:.0f} MiB to a peak of {peak / MiB:.0f} MiB"
    assert service.client.get("/healthz").status_code == 200


def test_head_is_answered_on_every_get_endpoint_like_the_get_without_a_body(service):
    document = service.client.get("/openapi.json").json()
    targets = ["/openapi.json", "/docs", "/redoc"]
    for path, operations in document["paths"].items():
        if "get" in operations:
            targets.append(path + ("?user=alice&type=produce" if path == "/quotas/resolve" else ""))
    assert {"/throttle-factor", "/quotas", "/volumes", "/healthz", "/readyz", "/metrics"} <= set(targets)
    for target in targets:
        get = service.client.get(target)
        head = service.client.head(target)
        assert (head.status_code, head.content) == (get.status_code, b""), target
        assert head.headers["content-type"] == get.headers["content-type"], target
        if target != "/metrics":  # its counters move between the two requests
            assert head.headers["content-length"] == get.headers["content-length"] == str(len(get.content)), target
        assert head.headers.get("etag") == get.headers.get("etag"), target
    for target in ("/throttle-factor", "/quotas"):
        etag = service.client.head(target).headers["etag"]
        again = service.client.head(target, headers={"If-None-Match": etag})
        assert (again.status_code, again.headers["etag"], again.content) == (304, etag, b"")


def test_a_failure_inside_the_service_is_a_problem_json_500_not_text(start_service, tmp_path):
    service = start_service(**SETTINGS, data_dir=str(tmp_path / "data"))
    assert service.client.put("/quotas/groups/before", json={"users": ["a"], "limits": {"produce": 1e6}}, headers=AUTH).status_code == 200
    # The store's file changed under the running service: its next write fails unexpectedly.
    with sqlite3.connect(tmp_path / "data" / "quotas.sqlite3") as db:
        db.execute("DROP TABLE quota_groups")
    answer = service.client.put("/quotas/groups/after", json={"users": ["b"], "limits": {"produce": 1e6}}, headers=AUTH)
    assert answer.status_code >= 500
    body = problem(answer)
    assert body["status"] == answer.status_code and body["instance"] == "/quotas/groups/after"
    assert "quota_groups" not in answer.text, "no internals in the answer; they are in the log"
    assert "no such table: quota_groups" in service.log() and "PUT /quotas/groups/after failed" in service.log()
    assert service.client.get("/healthz").status_code == 200


def test_every_write_and_every_refused_token_leaves_one_audit_line(start_service):
    service = start_service(**SETTINGS)  # its own: refusal lines are rate-limited per client
    service.client.put("/quotas/overrides", params={"user": "audited", "client-id": "<default>"}, json={"produce": 2e6}, headers=AUTH)
    service.client.put("/quotas/groups/audited-group", json={"users": ["u1"], "limits": {"fetch": 3e6}}, headers=AUTH)
    service.client.delete("/quotas/groups/audited-group", headers=AUTH)
    service.client.delete("/quotas/overrides", params={"user": "audited", "client-id": "<default>"}, headers=AUTH)
    service.client.put("/quotas/overrides", params={"client-id": "sneaky"}, json={"produce": 1}, headers={"Authorization": "Bearer guessed-token-123"})
    service.client.delete("/quotas/groups/audited-group")
    service.client.get("/quotas")  # reads are not audited
    deadline = time.monotonic() + 5
    while len(audit_lines(service)) < 6 and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = audit_lines(service)
    expected = [
        ("PUT /quotas/overrides", 'user="audited" client-id="<default>"', "outcome=accepted status=200"),
        ("PUT /quotas/groups/audited-group", 'group="audited-group"', "outcome=accepted status=200"),
        ("DELETE /quotas/groups/audited-group", 'group="audited-group"', "outcome=accepted status=204"),
        ("DELETE /quotas/overrides", 'user="audited" client-id="<default>"', "outcome=accepted status=204"),
        ("PUT /quotas/overrides", 'client-id="sneaky"', "outcome=refused status=403"),
        ("DELETE /quotas/groups/audited-group", 'group="audited-group"', "outcome=refused status=401"),
    ]
    assert len(lines) == len(expected), "\n".join(lines)
    for line, parts in zip(lines, expected):
        for part in parts:
            assert part in line, (part, line)
        assert line.endswith(" client=127.0.0.1"), line
        assert "produce" not in line and "fetch" not in line, "never the body"
    log = service.log()
    assert TOKEN not in log and "guessed-token-123" not in log


def audit_lines(service: RunningService) -> list[str]:
    return [line for line in service.log().splitlines() if " app.server.api.audit: " in line and ("audited" in line or "sneaky" in line)]
