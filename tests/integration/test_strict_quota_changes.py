"""The running service refuses, over real HTTP, the values and names that Kafka would never take:
booleans and strings for quotas, quotas below the floor, names with control characters or
surrounding whitespace, principals with their User: prefix, groups named . or .."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

TOKEN = "strict-changes-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "Content-Type": "application/json"}


@pytest.fixture
def service(start_service):
    return start_service(
        storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.05", admin_token=TOKEN, produce="1000000"
    )


def as_sent(service, method: str, target: str, body: str) -> tuple[int, str, dict]:
    """One request with its target exactly as given (no dot-segment removal, as curl --path-as-is)."""
    address = urlsplit(service.base_url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        connection.request(method, target, body=body.encode(), headers=JSON)
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), json.loads(response.read() or b"null")
    finally:
        connection.close()


def test_hostile_values_and_names_are_refused_with_their_reason_and_nothing_is_stored(service):
    refusals = [
        ("PUT", "/quotas/overrides?user=alice", '{"produce": true}', "produce: Input should be a valid number"),
        ("PUT", "/quotas/overrides?user=alice", '{"produce": "1048576"}', "produce: Input should be a valid number"),
        ("PUT", "/quotas/overrides?user=alice", '{"produce": 5e-324}',
         "produce: 5e-324 is below the floor of produce quotas, 65536 (throttle.service.quota.floor.bytes)"),
        ("PUT", "/quotas/overrides?user=a%00b", '{"produce": 1048576}', "user: must not hold a control character (U+0000)"),
        ("PUT", "/quotas/overrides?client-id=etl%0D%0A", '{"produce": 1048576}', "client-id: must not hold a control character (U+000D)"),
        ("PUT", "/quotas/overrides?user=%E2%80%AEecila", '{"produce": 1048576}',
         "user: must not hold an invisible format character (U+202E)"),
        ("PUT", "/quotas/overrides?user=%20", '{"produce": 1048576}', "user: must not begin or end with whitespace"),
        ("PUT", "/quotas/overrides?user=User:alice", '{"produce": 1048576}',
         "user: give the principal name without the User: prefix ('alice')"),
        ("PUT", "/quotas/groups/..", '{"users": ["bob"], "limits": {"produce": 1048576}}', "name: '..' cannot name a group"),
        ("PUT", "/quotas/groups/%2E", '{"users": ["bob"], "limits": {"produce": 1048576}}', "name: '.' cannot name a group"),
        ("PUT", "/quotas/groups/etl", '{"client_ids": ["etl\\n"], "limits": {"produce": 1048576}}',
         "client_ids: 'etl\\n': must not hold a control character (U+000A)"),
        ("PUT", "/quotas/groups/etl", '{"users": ["bob"], "limits": {"fetch": false}}', "limits.fetch: Input should be a valid number"),
    ]
    for method, target, body, reason in refusals:
        status, content_type, problem = as_sent(service, method, target, body)
        assert (status, content_type) == (422, "application/problem+json"), (target, body, status, problem)
        assert reason in problem["detail"], (target, body, problem)
    table = service.client.get("/quotas").json()
    assert (table["overrides"], table["groups"]) == ([], [])

    # The same requests with acceptable values are taken.
    assert as_sent(service, "PUT", "/quotas/overrides?user=alice", '{"produce": 65536}')[0] == 200
    assert as_sent(service, "PUT", "/quotas/groups/etl", '{"client_ids": ["etl"], "limits": {"fetch": 1048576}}')[0] == 200
    table = service.client.get("/quotas").json()
    assert [o["limits"]["produce"] for o in table["overrides"]] == [65536] and [g["name"] for g in table["groups"]] == ["etl"]
