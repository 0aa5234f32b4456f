"""The quota endpoints over HTTP (in-process): table, resolve, auth, validation, long-poll."""

import asyncio
import time

import httpx
import pytest

from app.clock import ManualClock
from app.server.app import create_app
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaType
from app.quotas.store import QuotaStore
from app.settings import load_settings
from app.observation.model import ObservationRound, VolumeObservation

from .asgi import run_scenario

TOKEN = "s3cret-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def run(scenario, tmp_path, **overrides):
    clock = ManualClock()
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        storage_per_volume_limit_min_available_bytes="100",
        data_dir=str(tmp_path),
        produce="10000000",
        excluded_principal_name_list="User:CN=ops,O=acme",
        **{"admin_token": TOKEN, **overrides},
    )
    app = create_app(settings, clock=clock, observe=False)
    return run_scenario(app, clock, scenario)


def test_table_has_defaults_excluded_principals_factor_and_an_etag(tmp_path):
    async def scenario(client, observer, clock):
        response = await client.get("/quotas")
        body = response.json()
        assert body["defaults"]["produce"] == 10000000
        assert body["excluded_principals"] == ["User:CN=ops,O=acme"]
        assert body["factor_types"] == ["produce"]
        assert (body["factor"], body["source"]) == (1.0, "initial")
        assert body["floors"]["produce"] == 65536
        again = await client.get("/quotas", headers={"If-None-Match": response.headers["etag"]})
        assert again.status_code == 304

    run(scenario, tmp_path)


def test_overrides_and_groups_change_the_table_and_resolution(tmp_path):
    async def scenario(client, observer, clock):
        etag = (await client.get("/quotas")).headers["etag"]
        put = await client.put("/quotas/overrides", params={"user": "alice", "client-id": "<default>"}, json={"produce": 2048000}, headers=AUTH)
        assert put.status_code == 200
        assert put.json() == {"entity": {"user": "alice", "client_id": "<default>"}, "level": "user, default client-id",
                              "limits": {"produce": 2048000.0, "fetch": None, "request": None, "controller_mutation": None}}
        table = await client.get("/quotas", headers={"If-None-Match": etag})
        assert table.status_code == 200 and table.json()["overrides"][0]["entity"] == {"user": "alice", "client_id": "<default>"}
        group = await client.put("/quotas/groups/analytics", json={"users": ["bob", "carol"], "limits": {"produce": 3000000}}, headers=AUTH)
        assert group.status_code == 200
        resolved = (await client.get("/quotas/resolve", params={"user": "carol", "client-id": "x", "type": "produce"})).json()
        assert (resolved["level"], resolved["group"], resolved["limit"]) == ("group", "analytics", 3000000)
        bob = (await client.get("/quotas/resolve", params={"user": "bob", "client-id": "y", "type": "produce"})).json()
        assert bob["tags"] == resolved["tags"] == {"user": "", "client-id": "", "quota-group": "analytics"}
        alice = (await client.get("/quotas/resolve", params={"user": "alice", "client-id": "app", "type": "produce"})).json()
        assert (alice["level"], alice["limit"], alice["tags"]) == ("user, default client-id", 2048000, {"user": "alice", "client-id": "app"})
        assert (await client.delete("/quotas/overrides", params={"user": "alice", "client-id": "<default>"}, headers=AUTH)).status_code == 204
        assert (await client.delete("/quotas/overrides", params={"user": "alice", "client-id": "<default>"}, headers=AUTH)).status_code == 404
        assert (await client.delete("/quotas/groups/analytics", headers=AUTH)).status_code == 204
        assert (await client.get("/quotas")).json()["overrides"] == []

    run(scenario, tmp_path)


def test_the_factor_in_force_reaches_the_table_and_resolution(tmp_path):
    async def scenario(client, observer, clock):
        etag = (await client.get("/quotas")).headers["etag"]
        now = clock()
        observer.apply_round(ObservationRound(now, now, (1,), (VolumeObservation(1, "/d", 1000, 50, now),)))
        table = await client.get("/quotas", headers={"If-None-Match": etag})
        assert table.status_code == 200
        assert (table.json()["factor"], table.json()["state"]) == (0.0, "PAUSE")
        resolved = (await client.get("/quotas/resolve", params={"user": "x", "client-id": "y", "type": "produce"})).json()
        assert (resolved["base_limit"], resolved["factor"], resolved["limit"]) == (10000000, 0.0, 65536)
        excluded = (await client.get("/quotas/resolve", params={"user": "CN=ops,O=acme", "client-id": "y", "type": "produce"})).json()
        assert (excluded["level"], excluded["limit"]) == ("excluded principal", None)

    run(scenario, tmp_path)


def test_long_poll_on_the_table_returns_on_change_and_times_out_cleanly(tmp_path):
    async def scenario(client, observer, clock):
        etag = (await client.get("/quotas")).headers["etag"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        timed_out = await client.get("/quotas", params={"wait": "0.3s"}, headers={"If-None-Match": etag})
        assert timed_out.status_code == 304 and 0.25 < loop.time() - started < 3

        async def change_soon():
            await asyncio.sleep(0.2)
            await client.put("/quotas/overrides", params={"client-id": "app"}, json={"fetch": 1000000}, headers=AUTH)

        started = loop.time()
        changed, _ = await asyncio.gather(client.get("/quotas", params={"wait": "20"}, headers={"If-None-Match": etag}), change_soon())
        assert changed.status_code == 200 and 0.15 < loop.time() - started < 5
        assert changed.json()["overrides"][0]["entity"] == {"user": None, "client_id": "app"}

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    ("headers", "status"),
    [({}, 401), ({"Authorization": "Bearer wrong-token-wrong-token"}, 403), ({"Authorization": "Basic abc"}, 401)],
)
def test_mutations_need_the_bearer_token(tmp_path, headers, status):
    async def scenario(client, observer, clock):
        response = await client.put("/quotas/overrides", params={"user": "alice"}, json={"produce": 1048576}, headers=headers)
        assert response.status_code == status
        assert response.headers["content-type"] == "application/problem+json"
        if status == 401:
            assert response.headers["www-authenticate"] == "Bearer"
        assert (await client.delete("/quotas/groups/x", headers=headers)).status_code == status
        assert (await client.get("/quotas")).json()["overrides"] == []

    run(scenario, tmp_path)


def test_without_a_configured_token_mutations_are_refused_with_an_explanation(tmp_path):
    async def scenario(client, observer, clock):
        response = await client.put("/quotas/overrides", params={"user": "alice"}, json={"produce": 1048576}, headers=AUTH)
        assert response.status_code == 403
        assert "throttle.service.admin.token" in response.json()["detail"]

    run(scenario, tmp_path, admin_token=None)


@pytest.mark.parametrize(
    ("params", "body", "field"),
    [
        ({"user": "alice"}, {"produce": -1}, "produce"),
        ({"user": "alice"}, {"produce": 0}, "produce"),
        ({"user": "alice"}, {"produce": "NaN"}, "produce"),
        ({"user": "alice"}, {"fetch": "Infinity"}, "fetch"),
        ({"user": "alice"}, {"bytes": 5}, "bytes"),
        ({"user": "alice"}, {}, "body"),
        ({}, {"produce": 5000000}, "user"),
        ({"user": ""}, {"produce": 5000000}, "user"),
        ({"client-id": ""}, {"produce": 5000000}, "client-id"),
    ],
)
def test_invalid_overrides_are_422_naming_the_field_and_change_nothing(tmp_path, params, body, field):
    async def scenario(client, observer, clock):
        before = (await client.get("/quotas")).headers["etag"]
        response = await client.put("/quotas/overrides", params=params, json=body, headers=AUTH)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert field in response.json()["detail"]
        assert (await client.get("/quotas")).headers["etag"] == before

    run(scenario, tmp_path)
    store = QuotaStore(tmp_path / "quotas.sqlite3")
    assert store.load_overrides() == {}
    store.close()


@pytest.mark.parametrize(
    ("name", "body", "text"),
    [
        ("g1", '{"users": [], "client_ids": [], "limits": {"produce": 5000000}}', "at least one user or client id"),
        ("g1", '{"users": ["a"], "limits": {"produce": Infinity}}', "produce"),
        ("bad name!", '{"users": ["a"], "limits": {"produce": 5000000}}', "name"),
        ("g1", '{"users": ["<default>"], "limits": {"produce": 5000000}}', "users"),
        ("g1", '{"users": ["a"], "limits": {"produce": 5000000}, "extra": 1}', "extra"),
        ("g1", '{"users": ["a"], "limits": {}}', "limits"),
    ],
)
def test_invalid_groups_are_422(tmp_path, name, body, text):
    async def scenario(client, observer, clock):
        response = await client.put(f"/quotas/groups/{name}", content=body, headers={**AUTH, "content-type": "application/json"})
        assert response.status_code == 422, response.text
        assert text in response.json()["detail"]
        assert (await client.get("/quotas")).json()["groups"] == []

    run(scenario, tmp_path)


def test_a_member_belongs_to_one_group_at_most(tmp_path):
    async def scenario(client, observer, clock):
        assert (await client.put("/quotas/groups/a", json={"users": ["bob"], "limits": {"produce": 5000000}}, headers=AUTH)).status_code == 200
        conflict = await client.put("/quotas/groups/b", json={"users": ["bob"], "limits": {"produce": 5000000}}, headers=AUTH)
        assert conflict.status_code == 409 and "already belongs to group 'a'" in conflict.json()["detail"]

    run(scenario, tmp_path)


@pytest.mark.parametrize("params", [{"user": "a"}, {"user": "a", "type": "bytes"}])
def test_resolve_needs_a_known_type(tmp_path, params):
    async def scenario(client, observer, clock):
        response = await client.get("/quotas/resolve", params=params)
        assert response.status_code == 422 and "type" in response.json()["detail"]

    run(scenario, tmp_path)


def test_overrides_survive_a_restart(tmp_path):
    async def write(client, observer, clock):
        await client.put("/quotas/overrides", params={"user": "<default>"}, json={"request": 25.5}, headers=AUTH)
        await client.put("/quotas/groups/g", json={"client_ids": ["etl"], "limits": {"fetch": 1000000}}, headers=AUTH)

    async def read(client, observer, clock):
        body = (await client.get("/quotas")).json()
        assert body["overrides"][0]["entity"] == {"user": "<default>", "client_id": None}
        assert body["overrides"][0]["limits"]["request"] == 25.5
        assert body["groups"][0]["client_ids"] == ["etl"]

    run(write, tmp_path)
    run(read, tmp_path)


async def _refused(client, response, *texts):
    """A 422 problem+json whose detail and errors name each text, having changed nothing."""
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    for text in texts:
        assert text in problem["detail"] and any(text in f"{e['field']}: {e['message']}" for e in problem["errors"]), problem
    table = (await client.get("/quotas")).json()
    assert (table["overrides"], table["groups"]) == ([], [])


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"produce": true}', "produce"),
        ('{"fetch": false}', "fetch"),
        ('{"produce": "1048576"}', "produce"),
        ('{"request": "50"}', "request"),
        ('{"produce": [1048576]}', "produce"),
        ('{"controller_mutation": {"value": 5}}', "controller_mutation"),
        ('{"produce": 1e400}', "produce"),
        ('{"produce": 1048576, "fetch": NaN}', "fetch"),
    ],
)
def test_quotas_are_finite_json_numbers_only(tmp_path, text, field):
    async def scenario(client, observer, clock):
        headers = {**AUTH, "content-type": "application/json"}
        await _refused(client, await client.put("/quotas/overrides", params={"user": "alice"}, content=text, headers=headers), field)
        group = f'{{"users": ["bob"], "limits": {text}}}'
        await _refused(client, await client.put("/quotas/groups/g", content=group, headers=headers), f"limits.{field}")

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    ("limits", "field", "reason"),
    [
        ({"produce": 5e-324}, "produce", "5e-324 is below the floor of produce quotas, 65536 (throttle.service.quota.floor.bytes)"),
        ({"fetch": 65535}, "fetch", "65535 is below the floor of fetch quotas, 65536 (throttle.service.quota.floor.bytes)"),
        ({"request": 0.5}, "request", "0.5 is below the floor of request quotas, 1 (throttle.service.quota.floor.request)"),
        ({"produce": 1048576, "controller_mutation": 0.25}, "controller_mutation",
         "0.25 is below the floor of controller_mutation quotas, 1 (throttle.service.quota.floor.controller.mutation)"),
    ],
)
def test_quotas_below_the_floor_of_their_type_are_refused_naming_the_floor(tmp_path, limits, field, reason):
    async def scenario(client, observer, clock):
        override = await client.put("/quotas/overrides", params={"user": "alice"}, json=limits, headers=AUTH)
        await _refused(client, override, f"{field}: {reason}")
        group = await client.put("/quotas/groups/g", json={"users": ["bob"], "limits": limits}, headers=AUTH)
        await _refused(client, group, f"limits.{field}: {reason}")

    run(scenario, tmp_path)


def test_a_quota_at_the_configured_floor_is_accepted(tmp_path):
    async def scenario(client, observer, clock):
        at_floor = {"produce": 1000, "fetch": 1000, "request": 0.5, "controller_mutation": 2}
        response = await client.put("/quotas/overrides", params={"user": "alice"}, json=at_floor, headers=AUTH)
        assert response.status_code == 200, response.text
        below = await client.put("/quotas/overrides", params={"user": "bob"}, json={"fetch": 999.5}, headers=AUTH)
        assert below.status_code == 422 and "999.5 is below the floor of fetch quotas, 1000" in below.json()["detail"]

    run(scenario, tmp_path, quota_floor_bytes="1000", quota_floor_request="0.5", quota_floor_controller_mutation="2")


HOSTILE_NAMES = [
    ("a\x00b", "a control character (U+0000)"),
    ("alice\r\nX-Injected: 1", "a control character (U+000D)"),
    ("bob\n", "a control character (U+000A)"),
    ("\x7f", "a control character (U+007F)"),
    ("\u202eecilA", "an invisible format character (U+202E)"),
    ("ali\u200bce", "an invisible format character (U+200B)"),
    ("a\u2028b", "a line separator (U+2028)"),
    (" ", "must not begin or end with whitespace"),
    (" alice", "must not begin or end with whitespace"),
    ("alice\t", "a control character (U+0009)"),
    ("alice\u00a0", "must not begin or end with whitespace"),
]


@pytest.mark.parametrize(("name", "reason"), HOSTILE_NAMES)
@pytest.mark.parametrize("field", ["user", "client-id"])
def test_override_names_without_control_characters_or_surrounding_whitespace(tmp_path, field, name, reason):
    async def scenario(client, observer, clock):
        response = await client.put("/quotas/overrides", params={field: name}, json={"produce": 1048576}, headers=AUTH)
        await _refused(client, response, f"{field}: ", reason)

    run(scenario, tmp_path)


@pytest.mark.parametrize(("name", "reason"), HOSTILE_NAMES)
@pytest.mark.parametrize("field", ["users", "client_ids"])
def test_group_members_follow_the_same_name_rules(tmp_path, field, name, reason):
    async def scenario(client, observer, clock):
        response = await client.put("/quotas/groups/g", json={field: ["fine", name], "limits": {"produce": 1048576}}, headers=AUTH)
        await _refused(client, response, f"{field}: ", reason)

    run(scenario, tmp_path)


def test_a_lone_surrogate_in_a_member_name_is_refused(tmp_path):
    async def scenario(client, observer, clock):
        body = '{"client_ids": ["etl\\ud800"], "limits": {"produce": 1048576}}'
        response = await client.put("/quotas/groups/g", content=body, headers={**AUTH, "content-type": "application/json"})
        await _refused(client, response, "client_ids.0: ", "unable to parse raw data as a unicode string")

    run(scenario, tmp_path)


def test_a_user_prefix_is_refused_with_a_hint_and_a_client_id_may_hold_it(tmp_path):
    async def scenario(client, observer, clock):
        hint = "give the principal name without the User: prefix ('alice')"
        override = await client.put("/quotas/overrides", params={"user": "User:alice"}, json={"produce": 1048576}, headers=AUTH)
        await _refused(client, override, f"user: {hint}")
        group = await client.put("/quotas/groups/g", json={"users": ["User:alice"], "limits": {"produce": 1048576}}, headers=AUTH)
        await _refused(client, group, "users: 'User:alice': " + hint)
        # A client id is any string the client chose; Kafka gives it no prefix.
        client_id = await client.put("/quotas/overrides", params={"client-id": "User:alice"}, json={"produce": 1048576}, headers=AUTH)
        assert client_id.status_code == 200, client_id.text

    run(scenario, tmp_path)


@pytest.mark.parametrize("name", ["%2E", "%2E%2E", "%2e%2e"])
def test_a_group_is_not_named_dot_or_dot_dot(tmp_path, name):
    async def scenario(client, observer, clock):
        response = await client.put(f"/quotas/groups/{name}", json={"users": ["bob"], "limits": {"produce": 1048576}}, headers=AUTH)
        await _refused(client, response, "name: ", "cannot name a group")
        assert (await client.put("/quotas/groups/...", json={"users": ["bob"], "limits": {"produce": 1048576}}, headers=AUTH)).status_code == 200

    run(scenario, tmp_path)


def test_names_stored_before_the_rules_can_still_be_removed(tmp_path):
    store = QuotaStore(tmp_path / "quotas.sqlite3")
    store.put_override(QuotaEntity("User:alice", None), {QuotaType.PRODUCE: 1.0}, 0.0)
    store.put_override(QuotaEntity(None, " etl"), {QuotaType.FETCH: 1.0}, 0.0)
    store.put_group(QuotaGroup("..", frozenset({"bob\n"}), frozenset(), {QuotaType.PRODUCE: 1.0}), 0.0)
    store.close()

    async def scenario(client, observer, clock):
        assert len((await client.get("/quotas")).json()["overrides"]) == 2
        assert (await client.delete("/quotas/overrides", params={"user": "User:alice"}, headers=AUTH)).status_code == 204
        assert (await client.delete("/quotas/overrides", params={"client-id": " etl"}, headers=AUTH)).status_code == 204
        assert (await client.delete("/quotas/groups/%2E%2E", headers=AUTH)).status_code == 204
        table = (await client.get("/quotas")).json()
        assert (table["overrides"], table["groups"]) == ([], [])
def test_a_round_republishes_a_large_table_without_converting_it_again(tmp_path):
    """Every round publishes the table anew (its validity moves); converting 10,000 overrides
    into the response model and digesting them for the ETag took 0.4 s of CPU a round. Only a
    change of the table itself should pay that: a new reading reuses the converted table."""
    store = QuotaStore(tmp_path / "quotas.sqlite3")
    rows = [(("name", f"user-{i}"), ("none", "")) for i in range(10_000)]
    with store._db:  # one transaction; the store's own API commits (and fsyncs) once per override
        store._db.executemany("INSERT INTO overrides VALUES (?, ?, ?, ?, ?, ?)", [(*u, *c, '{"produce": 1048576.0}', 0.0) for u, c in rows])
    store.close()

    async def scenario(client, observer, clock):
        publication = client._transport.app.state.service.quota_table
        first = await client.get("/quotas")
        assert len(first.json()["overrides"]) == 10_000

        def cpu_of_one_publication(round_number: int) -> float:
            clock.advance(1)
            observer.apply_round(ObservationRound(clock(), clock(), (1,), (VolumeObservation(1, "/a", 1000, 900 - round_number, clock()),)))
            started = time.process_time()
            publication.publish()
            return time.process_time() - started

        rounds = min(cpu_of_one_publication(n) for n in range(3))
        # The first conversion of the table, measured the same way, as the yardstick.
        started = time.process_time()
        assert (await client.put("/quotas/overrides?user=one-more", json={"produce": 1048576}, headers=AUTH)).status_code == 200
        converting = time.process_time() - started
        assert rounds < converting / 5, f"{rounds:.3f} s a round against {converting:.3f} s converting the table"
        after = await client.get("/quotas", headers={"If-None-Match": first.headers["etag"]})
        assert after.status_code == 200 and len(after.json()["overrides"]) == 10_001

    run(scenario, tmp_path)


def test_a_large_table_goes_gzipped_to_clients_that_accept_it_and_plain_to_the_others(tmp_path):
    store = QuotaStore(tmp_path / "quotas.sqlite3")
    rows = [(("name", f"user-{i}"), ("none", "")) for i in range(500)]
    with store._db:
        store._db.executemany("INSERT INTO overrides VALUES (?, ?, ?, ?, ?, ?)", [(*u, *c, '{"produce": 1048576.0}', 0.0) for u, c in rows])
    store.close()

    async def scenario(client, observer, clock):
        plain = await client.get("/quotas", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers and len(plain.json()["overrides"]) == 500
        for accepted in ("gzip", "br;q=1, gzip;q=0.5", "*"):
            packed = await client.get("/quotas", headers={"Accept-Encoding": accepted})
            assert packed.headers["content-encoding"] == "gzip", accepted
            assert int(packed.headers["content-length"]) < len(plain.content) / 10
            # (httpx inflates it) the same table, under the same (weak) ETag
            assert packed.content == plain.content and packed.headers["etag"] == plain.headers["etag"]
        for refused in ("gzip;q=0", "*, gzip;q=0", "br", "deflate;q=1"):
            answer = await client.get("/quotas", headers={"Accept-Encoding": refused})
            assert "content-encoding" not in answer.headers, refused
        for answer in (plain, await client.get("/quotas", headers={"If-None-Match": plain.headers["etag"]})):
            assert answer.headers["vary"] == "accept-encoding"
        small = await client.get("/throttle-factor", headers={"Accept-Encoding": "gzip"})
        assert "content-encoding" not in small.headers, "a small body is not worth compressing"

    run(scenario, tmp_path)
