"""A Java application's stock HTTP client (java.net.http.HttpClient) reads and writes quotas.

Its default client prefers HTTP/2 and so sends ``Upgrade: h2c`` with every http:// request, a
PUT with a body included; the service must answer in HTTP/1.1 with the body read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.commands import run_command

TOKEN = "java-http-client-admin-token"
SOURCE = Path(__file__).parent / "java" / "JavaHttpRequests.java"


@pytest.fixture(scope="module")
def java_requests(tmp_path_factory) -> Path:
    classes = tmp_path_factory.mktemp("java-http-requests")
    run_command(["javac", "-d", classes, SOURCE], 120, check=True)
    return classes


def send_with_java(classes: Path, base_url: str, *requests: tuple[str, ...]) -> list[tuple[int, str, str, str]]:
    """Each request as (method, path[, body]); each answer as (status, etag, content length, body)."""
    lines = "".join("\t".join(request) + "\n" for request in requests)
    result = run_command(["java", "-cp", classes, "JavaHttpRequests", base_url, TOKEN], 120, input=lines)
    assert result.returncode == 0, result.stderr[-3000:]
    answers = []
    for line in result.stdout.splitlines():
        status, etag, length, body = line.split("\t", 3)
        answers.append((int(status), etag, length, body))
    assert len(answers) == len(requests), result.stdout
    return answers


def test_java_http_client_puts_reads_and_deletes_an_override_and_a_group(start_service, java_requests):
    service = start_service(storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.05", admin_token=TOKEN)
    override = "/quotas/overrides?user=alice&client-id=%3Cdefault%3E"
    answers = send_with_java(
        java_requests,
        service.base_url,
        ("PUT", override, json.dumps({"produce": 250000})),
        ("PUT", "/quotas/groups/analytics", json.dumps({"users": ["bob"], "limits": {"fetch": 3000000}})),
        ("GET", "/quotas/resolve?user=alice&client-id=billing&type=produce"),
        ("GET", "/quotas/resolve?user=bob&client-id=app&type=fetch"),
        ("DELETE", override),
        ("DELETE", "/quotas/groups/analytics"),
        ("GET", "/quotas"),
    )
    statuses = [status for status, *_ in answers]
    assert statuses == [200, 200, 200, 200, 204, 204, 200], answers
    assert json.loads(answers[0][3])["limits"]["produce"] == 250000
    assert json.loads(answers[1][3])["limits"]["fetch"] == 3000000
    alice, bob = json.loads(answers[2][3]), json.loads(answers[3][3])
    assert (alice["level"], alice["limit"]) == ("user, default client-id", 250000)
    assert (bob["level"], bob["group"], bob["limit"]) == ("group", "analytics", 3000000)
    table = json.loads(answers[6][3])
    assert table["overrides"] == [] and table["groups"] == []
    assert service.client.get("/quotas").json() == table
    assert "upgrade" not in service.log().lower(), "an ignored h2c upgrade is HTTP/1.1 as usual, not worth a line"
