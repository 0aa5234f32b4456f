"""The quota API takes exactly what its OpenAPI document allows: quotas as doubles between the
floor and 2^53 - 1, names of at most 1,024 UTF-8 bytes, each query parameter once and in UTF-8,
JSON objects without a key given twice, groups and a table of bounded size, ?wait= from 0 to
300 s in ASCII digits; and the document states each of these rules."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given, settings, strategies as st

from app.clock import ManualClock
from app.quotas.change_rules import NAME_MAX_BYTES, member_name_problem, name_pattern, name_problem, user_name_problem
from app.server.app import create_app
from app.server.api.conditional import WAIT_PATTERN
from app.settings import load_settings
from app.settings.model import QUOTA_MAX
from devtools.openapi import render

from .asgi import run_scenario

TOKEN = "s3cret-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON_AUTH = {**AUTH, "Content-Type": "application/json"}


def run(scenario, tmp_path, **overrides):
    settings_ = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        storage_per_volume_limit_min_available_bytes="100",
        data_dir=str(tmp_path),
        admin_token=TOKEN,
        **overrides,
    )
    clock = ManualClock()
    return run_scenario(create_app(settings_, clock=clock, observe=False), clock, scenario)


def _problem(response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    for word in words:
        assert word in body["detail"], body
    return body


def test_the_largest_quota_and_a_float32_rounding_number_read_back_exactly(tmp_path):
    async def scenario(client, observer, clock):
        put = await client.put("/quotas/overrides", params={"user": "max"}, json={"produce": QUOTA_MAX, "fetch": 123456789}, headers=AUTH)
        assert put.status_code == 200, put.text
        raw = (await client.get("/quotas")).content
        limits = json.loads(raw)["overrides"][0]["limits"]
        assert (limits["produce"], limits["fetch"]) == (QUOTA_MAX, 123456789)
        assert b"9007199254740991" in raw and b"123456789" in raw

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"produce": QUOTA_MAX + 1}, ["produce", "less than or equal to 9007199254740991"]),
        ({"produce": 1e39}, ["produce", "less than or equal to"]),
        ({"produce": None}, ["produce", "valid number"]),
        ({"produce": 65535}, ["produce", "below the floor", "throttle.service.quota.floor.bytes"]),
        ({}, ["set at least one quota"]),
    ],
)
def test_quotas_outside_the_floor_and_the_maximum_or_null_are_refused(tmp_path, body, words):
    async def scenario(client, observer, clock):
        _problem(await client.put("/quotas/overrides", params={"user": "alice"}, json=body, headers=AUTH), 422, *words)

    run(scenario, tmp_path)


def test_names_are_capped_at_1024_utf8_bytes(tmp_path):
    ascii_name, three_byte_name = "a" * NAME_MAX_BYTES, "\u20ac" * (NAME_MAX_BYTES // 3 + 1)  # 342 characters, 1,026 bytes

    async def scenario(client, observer, clock):
        ok = await client.put("/quotas/overrides", params={"user": ascii_name}, json={"produce": 70000}, headers=AUTH)
        assert ok.status_code == 200
        for params in ({"user": ascii_name + "b"}, {"client-id": three_byte_name}):
            _problem(await client.put("/quotas/overrides", params=params, json={"produce": 70000}, headers=AUTH), 422, "at most 1024 bytes")
        group = {"client_ids": ["x" * 17000], "limits": {"produce": 70000}}
        _problem(await client.put("/quotas/groups/long", json=group, headers=AUTH), 422, "client_ids", "at most 1024 bytes")

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    ("method", "query", "words"),
    [
        ("PUT", "user=%ED%A0%80", ["user: is not valid UTF-8"]),
        ("PUT", "user=a&user=b", ["user: is given more than once"]),
        ("PUT", "user=a&client-id=%FF", ["client-id: is not valid UTF-8"]),
        ("DELETE", "user=%ED%A0%80", ["user: is not valid UTF-8"]),
        ("DELETE", "client-id=a&client-id=a", ["client-id: is given more than once"]),
        ("GET", "type=produce&user=%C3", ["user: is not valid UTF-8"]),
        ("GET", "type=produce&type=fetch", ["type: is given more than once"]),
    ],
)
def test_query_parameters_given_twice_or_not_utf8_are_refused(tmp_path, method, query, words):
    path = "/quotas/resolve" if method == "GET" else "/quotas/overrides"

    async def scenario(client, observer, clock):
        body = b'{"produce": 70000}' if method == "PUT" else None
        response = await client.request(method, f"{path}?{query}", content=body, headers=JSON_AUTH)
        _problem(response, 422, *words)
        assert (await client.get("/quotas")).json()["overrides"] == []  # nothing stored under U+FFFD or the last value

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/quotas/overrides?user=alice", b'{"produce": 70000, "produce": 1e12}', "produce"),
        ("/quotas/groups/analytics", b'{"users": ["bob"], "limits": {"produce": 70000, "fetch": 70000, "fetch": 80000}}', "fetch"),
        ("/quotas/groups/analytics", b'{"users": ["bob"], "users": ["eve"], "limits": {"produce": 70000}}', "users"),
    ],
)
def test_json_bodies_with_a_key_given_twice_are_refused(tmp_path, path, body, key):
    async def scenario(client, observer, clock):
        response = await client.put(path, content=body, headers=JSON_AUTH)
        problem = _problem(response, 422, "more than once")
        assert problem["errors"][0]["field"] == key
        table = (await client.get("/quotas")).json()
        assert table["overrides"] == [] and table["groups"] == []

    run(scenario, tmp_path)


def test_a_what_if_body_with_a_key_given_twice_is_refused_not_decided_with_the_last_value(tmp_path):
    body = b'{"hard": {"min_available_ratio": 0.1}, "hard": {"min_available_ratio": 0.3}}'

    async def scenario(client, observer, clock):
        problem = _problem(await client.post("/what-if", content=body, headers={"Content-Type": "application/json"}), 422, "more than once")
        assert problem["errors"][0]["field"] == "hard"
        nested = b'{"hard": {"min_available_ratio": 0.1, "min_available_ratio": 0.3}}'
        problem = _problem(await client.post("/what-if", content=nested, headers={"Content-Type": "application/json"}), 422, "more than once")
        assert problem["errors"][0]["field"] == "min_available_ratio"

    run(scenario, tmp_path)


def test_every_operation_that_takes_a_json_body_refuses_a_key_given_twice(tmp_path):
    node_token = "node-token-0123456789abcdef"
    operations = [
        (method.upper(), path.replace("{name}", "g").replace("{node_id}", "1"))
        for path, item in json.loads(render())["paths"].items()
        for method, operation in item.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert {path for _, path in operations} >= {"/what-if", "/quotas/overrides", "/quotas/groups/g", "/enforcement", "/nodes/1/volumes"}

    async def scenario(client, observer, clock):
        for method, path in operations:
            token = node_token if path.startswith("/nodes/") else TOKEN
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
            response = await client.request(method, path, params={"user": "alice"}, content=b'{"x": 1, "x": 2}', headers=headers)
            problem = _problem(response, 422, "more than once")
            assert problem["errors"][0]["field"] == "x", (method, path)

    run(scenario, tmp_path, node_token=node_token)


@pytest.mark.parametrize(
    "body",
    [b'{"produce": "\xff"}', b'{"produce": ' + b"7" * 5000 + b"}", b"[" * 100_000 + b"]" * 100_000],
    ids=["not-utf8", "5000-digit-integer", "100000-deep-arrays"],
)
def test_bodies_python_cannot_parse_are_answered_400_as_documented(tmp_path, body):
    async def scenario(client, observer, clock):
        response = await client.put("/quotas/overrides?user=alice", content=body, headers=JSON_AUTH)
        assert response.status_code == 400 and response.headers["content-type"] == "application/problem+json"
        assert response.json()["title"] == "Bad request"

    run(scenario, tmp_path, http_max_body_bytes=str(1024 * 1024))
    document = json.loads(render())
    for path, operation in (("/quotas/overrides", "put"), ("/quotas/groups/{name}", "put")):
        assert "400" in document["paths"][path][operation]["responses"]


def test_groups_need_a_member_and_hold_at_most_the_configured_number(tmp_path):
    async def scenario(client, observer, clock):
        empty = await client.put("/quotas/groups/g", json={"users": [], "client_ids": [], "limits": {"produce": 70000}}, headers=AUTH)
        _problem(empty, 422, "at least one user or client id")
        three = {"users": ["a", "b", "c"], "limits": {"produce": 70000}}
        _problem(await client.put("/quotas/groups/g", json=three, headers=AUTH), 422, "users", "more than 2", "throttle.service.quota.group.max.members")
        assert (await client.put("/quotas/groups/g", json={"users": ["a", "b"], "client_ids": ["x"], "limits": {"produce": 70000}}, headers=AUTH)).status_code == 200

    run(scenario, tmp_path, quota_group_max_members="2")


def test_the_table_holds_at_most_the_configured_number_of_entries(tmp_path):
    async def scenario(client, observer, clock):
        for user in ("a", "b"):
            assert (await client.put("/quotas/overrides", params={"user": user}, json={"produce": 70000}, headers=AUTH)).status_code == 200
        full = await client.put("/quotas/overrides", params={"user": "c"}, json={"produce": 70000}, headers=AUTH)
        _problem(full, 413, "3 entries", "more than 2", "throttle.service.quota.table.max.entries")
        group = await client.put("/quotas/groups/g", json={"client_ids": ["x"], "limits": {"produce": 70000}}, headers=AUTH)
        _problem(group, 413, "throttle.service.quota.table.max.entries")
        # Replacing what is there does not grow the table.
        assert (await client.put("/quotas/overrides", params={"user": "a"}, json={"produce": 90000}, headers=AUTH)).status_code == 200

    run(scenario, tmp_path, quota_table_max_entries="2")


@pytest.mark.parametrize(("wait", "status"), [("300", 304), ("300.0s", 304), ("0.05", 304), ("301", 422), ("300.5", 422), ("\u0663\u0660", 422), ("05", 422), ("1e2", 422)])
def test_wait_takes_ascii_seconds_from_0_to_300(tmp_path, wait, status):
    async def scenario(client, observer, clock):
        etag = (await client.get("/throttle-factor")).headers["etag"]
        # A 0 s wait answers at once; the others would hold the request: no If-None-Match then.
        headers = {"If-None-Match": etag} if wait == "0.05" else {}
        response = await client.get("/throttle-factor", params={"wait": wait}, headers=headers)
        assert response.status_code == (status if headers or status == 422 else 200)

    run(scenario, tmp_path)


def test_the_document_states_the_bounds_the_service_enforces():
    document = json.loads(render())
    assert document["servers"] == [{"url": "/"}]
    schemas = document["components"]["schemas"]
    body = schemas["QuotaLimitsBody"]["properties"]
    assert {t: (q["format"], q["minimum"], q["maximum"]) for t, q in body.items()} == {
        "produce": ("double", 65536, QUOTA_MAX),
        "fetch": ("double", 65536, QUOTA_MAX),
        "request": ("double", 1, QUOTA_MAX),
        "controller_mutation": ("double", 1, QUOTA_MAX),
    }
    for quota in schemas["QuotaLimits"]["properties"].values():
        assert quota["anyOf"][0]["format"] == "double" and quota["anyOf"][0]["maximum"] == QUOTA_MAX
    group = schemas["GroupBody"]
    assert group["if"] == {"properties": {"users": {"maxItems": 0}}}
    assert group["then"] == {"required": ["client_ids"], "properties": {"client_ids": {"minItems": 1}}}
    assert group["properties"]["users"]["maxItems"] == 10000
    waits = [p for path in ("/quotas", "/throttle-factor") for p in document["paths"][path]["get"]["parameters"] if p["name"] == "wait"]
    assert [w["schema"]["pattern"] for w in waits] == [WAIT_PATTERN, WAIT_PATTERN]
    put_names = {p["name"]: p["schema"] for p in document["paths"]["/quotas/overrides"]["put"]["parameters"]}
    assert put_names["user"]["maxLength"] == put_names["client-id"]["maxLength"] == NAME_MAX_BYTES
    assert put_names["user"]["pattern"] == name_pattern(users=True, members=False)


def test_the_served_document_carries_the_configured_floors_and_caps(tmp_path):
    async def scenario(client, observer, clock):
        document = (await client.get("/openapi.json")).json()
        assert document["components"]["schemas"]["QuotaLimitsBody"]["properties"]["produce"]["minimum"] == 100000
        assert document["components"]["schemas"]["GroupBody"]["properties"]["client_ids"]["maxItems"] == 50

    run(scenario, tmp_path, quota_floor_bytes="100000", quota_group_max_members="50")


# Names the change rules weigh: letters of several scripts, spaces, controls, format and
# separator characters, the principal prefix and the default entity's name.
NAMES = st.text(st.characters(exclude_categories=["Cs"]), max_size=12) | st.sampled_from(["User:x", "<default>", " a", "a ", "a\u2028b"])


@settings(max_examples=500, deadline=None, derandomize=True)
@given(NAMES)
@example("a\u200bb")
@example("\u3000a")
@example("U")
def test_the_documented_name_patterns_agree_with_the_change_rules(name):
    for users, members, problem_of in (
        (True, False, user_name_problem),
        (False, False, name_problem),
        (True, True, lambda n: member_name_problem(n, users=True)),
        (False, True, lambda n: member_name_problem(n, users=False)),
    ):
        documented = re.fullmatch(name_pattern(users, members), name) is not None
        assert documented == (problem_of(name) is None), (name, users, members, problem_of(name))


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("produce", "1e39", "client.quota.callback.static.produce"),
        ("quota_floor_bytes", "9007199254740992", "throttle.service.quota.floor.bytes"),
        ("quota_group_max_members", "0", "throttle.service.quota.group.max.members"),
        ("quota_table_max_entries", "10000001", "throttle.service.quota.table.max.entries"),
    ],
)
def test_settings_beyond_the_documented_bounds_stop_start_up_naming_the_key(field, value, key):
    from app.settings import ConfigurationError

    environ = {"CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL": "PT0S", "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO": "0.05"}
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ=environ, **{field: value})
    assert [str(p) for p in caught.value.problems if key in str(p)], caught.value.problems


def test_a_quota_stored_above_the_maximum_before_it_existed_is_served_as_the_maximum(tmp_path):
    # Kafka treats 1e39 and 2^53 - 1 bytes/s alike (no broker nears either); a table holding
    # 1e39 would break every client that reads doubles no larger than the document allows.
    from app.quotas.model import QuotaEntity, QuotaGroup, QuotaType
    from app.quotas.store import QuotaStore

    store = QuotaStore(tmp_path / "quotas.sqlite3")
    store.put_override(QuotaEntity("big"), {QuotaType.PRODUCE: 1e39, QuotaType.FETCH: 70000.0}, 0.0)
    store.put_group(QuotaGroup("g", frozenset({"u"}), frozenset(), {QuotaType.REQUEST: 1e300}), 0.0)
    store.close()

    async def scenario(client, observer, clock):
        response = await client.get("/quotas")
        assert response.status_code == 200, response.text
        table = response.json()
        assert table["overrides"][0]["limits"]["produce"] == QUOTA_MAX and table["overrides"][0]["limits"]["fetch"] == 70000
        assert table["groups"][0]["limits"]["request"] == QUOTA_MAX

    run(scenario, tmp_path)
