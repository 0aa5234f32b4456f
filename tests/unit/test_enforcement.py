"""Enforcement (enforce / shadow, canary brokers): the pure model, its settings, its records in
both quota stores' formats, and the history rows and metrics that carry it."""

from __future__ import annotations

import dataclasses

import pytest

from app.decision.enforcement import ENFORCE_EVERYWHERE, Enforcement, EnforcementMode, parse_broker_ids
from app.history.rows import ROW_ENCODER, round_lines, round_rows
from app.quotas.changelog import QuotaLog, enforcement_key, enforcement_value
from app.quotas.store import QuotaStore, store_file
from app.settings import ConfigurationError, load_settings

from .test_history import T0, MiB, decided, observed_round

SHADOW = Enforcement.of("shadow")
CANARY = Enforcement.of("enforce", [3, 1, 3])


def test_every_broker_enforces_by_default_and_none_in_shadow():
    assert ENFORCE_EVERYWHERE.enforced and all(ENFORCE_EVERYWHERE.enforces(b) for b in (0, 1, 7))
    assert not SHADOW.enforced and not any(SHADOW.enforces(b) for b in (0, 1, 7))


def test_with_canary_brokers_only_they_enforce():
    assert CANARY.canary_brokers == (1, 3)
    assert CANARY.enforced
    assert [b for b in range(5) if CANARY.enforces(b)] == [1, 3]
    # In shadow the canary list is kept for the next switch, but nobody enforces.
    assert not any(Enforcement.of("shadow", [1]).enforces(b) for b in range(5))


@pytest.mark.parametrize("text, ids", [("", ()), ("1", (1,)), (" 3, 1,3 ,", (1, 3)), ("0", (0,))])
def test_broker_id_lists_parse(text, ids):
    assert parse_broker_ids(text) == ids


@pytest.mark.parametrize("text", ["one", "-1", "1.5", "1;2", "²"])
def test_a_bad_broker_id_is_refused_naming_it(text):
    with pytest.raises(ValueError, match="not a broker id"):
        parse_broker_ids(text)


def test_settings_default_to_enforce_everywhere_and_take_shadow_and_canaries_from_the_environment():
    assert load_settings(environ={}, storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.1").initial_enforcement == ENFORCE_EVERYWHERE
    settings = load_settings(
        environ={"THROTTLE_SERVICE_ENFORCEMENT": "Shadow", "THROTTLE_SERVICE_ENFORCEMENT_CANARY_BROKERS": "2,1"},
        storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.1",
    )
    assert settings.initial_enforcement == Enforcement(EnforcementMode.SHADOW, (1, 2))


@pytest.mark.parametrize(
    "variable, value, key",
    [
        ("THROTTLE_SERVICE_ENFORCEMENT", "audit", "throttle.service.enforcement"),
        ("THROTTLE_SERVICE_ENFORCEMENT_CANARY_BROKERS", "1,b", "throttle.service.enforcement.canary.brokers"),
    ],
)
def test_a_bad_enforcement_setting_stops_start_up_naming_key_value_and_what_is_allowed(variable, value, key):
    with pytest.raises(ConfigurationError) as raised:
        load_settings(environ={variable: value}, storage_check_interval="PT0S", storage_per_volume_limit_min_available_ratio="0.1")
    message = str(raised.value)
    assert key in message and value in message, message


def test_the_changelog_record_round_trips_and_a_tombstone_returns_to_the_settings():
    log = QuotaLog()
    assert log.apply(enforcement_key(), enforcement_value(CANARY)).accepted
    assert log.enforcement == CANARY
    assert log.apply(enforcement_key(), enforcement_value(SHADOW)).accepted and log.enforcement == SHADOW
    assert log.apply(enforcement_key(), None).accepted and log.enforcement is None


@pytest.mark.parametrize("value", [b'{"mode":"audit","canary_brokers":[]}', b'{"mode":"enforce","canary_brokers":[-1]}', b'{"mode":"enforce"}'])
def test_an_unreadable_enforcement_record_is_skipped_and_changes_nothing(value):
    log = QuotaLog()
    log.apply(enforcement_key(), enforcement_value(SHADOW))
    applied = log.apply(enforcement_key(), value)
    assert not applied.accepted and "unreadable" in applied.reason
    assert log.enforcement == SHADOW


def test_the_sqlite_store_keeps_the_enforcement_across_a_reopening_and_forgets_it_on_delete(tmp_path):
    path = store_file(tmp_path)
    store = QuotaStore(path)
    assert store.load_enforcement() is None
    before = store.generation.number
    store.put_enforcement(CANARY, 1.0)
    assert store.generation.number == before + 1  # a counted change, like a quota change
    store.close()
    store = QuotaStore(path)
    assert store.load_enforcement() == CANARY
    assert store.delete_enforcement() and not store.delete_enforcement()
    store.close()
    assert QuotaStore(path).load_enforcement() is None


def test_history_rows_carry_whether_enforced_and_the_canary_list():
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 4 * MiB})
    decision = decided(round_)
    for enforcement, enforced, canary in ((ENFORCE_EVERYWHERE, True, None), (SHADOW, False, None), (CANARY, True, "1,3")):
        shown = dataclasses.replace(decision, enforcement=enforcement)
        rows = round_rows(round_, shown, 1.0)
        assert {(row["enforced"], row["canary_brokers"]) for row in rows} == {(enforced, canary)}
        assert round_lines(round_, shown, 1.0) == "".join(ROW_ENCODER.encode(row) + "\n" for row in rows)


# -- over HTTP (in-process) ----------------------------------------------------------------------

import asyncio  # noqa: E402

from app.clock import ManualClock  # noqa: E402
from app.observation.model import ObservationRound, VolumeObservation  # noqa: E402
from app.server.app import create_app  # noqa: E402

from .asgi import run_scenario  # noqa: E402

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
        **{"admin_token": TOKEN, **overrides},
    )
    return run_scenario(create_app(settings, clock=clock, observe=False), clock, scenario)


def paused(clock) -> ObservationRound:
    now = clock()
    return ObservationRound(now, now, (1, 2), (VolumeObservation(1, "/a", 1000, 50, now), VolumeObservation(2, "/b", 1000, 900, now)))


def test_shadow_mode_publishes_the_decision_marked_not_enforced_everywhere(tmp_path):
    async def scenario(client, observer, clock):
        observer.apply_round(paused(clock))
        decision = (await client.get("/throttle-factor")).json()
        table = (await client.get("/quotas")).json()
        assert (decision["state"], decision["factor"], decision["enforced"], decision["canary_brokers"]) == ("PAUSE", 0.0, False, [])
        assert (table["factor"], table["enforced"], table["canary_brokers"]) == (0.0, False, [])
        assert (await client.get("/enforcement")).json() == {
            "mode": "shadow", "canary_brokers": [], "enforced": False, "source": "settings",
            "settings": {"mode": "shadow", "canary_brokers": []},
        }
        metrics = (await client.get("/metrics")).text
        assert "kafka_throttle_enforced 0.0" in metrics and "kafka_throttle_applied_factor 1.0" in metrics
        assert "kafka_throttle_factor 0.0" in metrics

    run(scenario, tmp_path, enforcement="shadow")


def test_a_change_of_enforcement_wakes_the_long_polls_of_both_hot_endpoints_and_changes_their_etags(tmp_path):
    async def scenario(client, observer, clock):
        observer.apply_round(paused(clock))
        decision, table = await client.get("/throttle-factor"), await client.get("/quotas")
        assert decision.json()["enforced"] and table.json()["enforced"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        waits = [
            asyncio.ensure_future(client.get(path + "?wait=20s", headers={"If-None-Match": r.headers["etag"]}))
            for path, r in (("/throttle-factor", decision), ("/quotas", table))
        ]
        await asyncio.sleep(0.2)
        changed = await client.put("/enforcement", json={"mode": "enforce", "canary_brokers": [2]}, headers=AUTH)
        assert changed.status_code == 200, changed.text
        assert changed.json() | {"settings": None} == {
            "mode": "enforce", "canary_brokers": [2], "enforced": True, "source": "store", "settings": None,
        }
        woken = await asyncio.gather(*waits)
        assert loop.time() - started < 5
        for response in woken:
            assert response.status_code == 200
            assert (response.json()["enforced"], response.json()["canary_brokers"]) == (True, [2])
        assert woken[0].headers["etag"] != decision.headers["etag"] and woken[1].headers["etag"] != table.headers["etag"]
        assert "kafka_throttle_canary_brokers 1.0" in (await client.get("/metrics")).text
        shadow = await client.put("/enforcement", json={"mode": "shadow"}, headers=AUTH)
        assert shadow.json()["enforced"] is False and (await client.get("/quotas")).json()["enforced"] is False

    run(scenario, tmp_path)


@pytest.mark.parametrize(
    "body, headers, status, where",
    [
        ({"mode": "audit"}, AUTH, 422, "mode"),
        ({"mode": "enforce", "canary_brokers": [9]}, AUTH, 409, "broker 9 is not registered"),
        ({"mode": "enforce", "canary_brokers": ["1"]}, AUTH, 422, "canary_brokers"),
        ({"mode": "enforce", "canary_brokers": [-1]}, AUTH, 422, "canary_brokers"),
        ({"mode": "shadow", "extra": 1}, AUTH, 422, "extra"),
        ({"mode": "shadow"}, {}, 401, "Bearer"),
        ({"mode": "shadow"}, {"Authorization": "Bearer wrong-token-0000000"}, 403, "not the admin token"),
    ],
)
def test_an_invalid_change_is_refused_with_problem_json_and_changes_nothing(tmp_path, body, headers, status, where):
    async def scenario(client, observer, clock):
        observer.apply_round(paused(clock))
        before = [(await client.get(path)).headers["etag"] for path in ("/throttle-factor", "/quotas")]
        refused = await client.put("/enforcement", json=body, headers=headers)
        assert refused.status_code == status, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert where in refused.text
        assert (await client.get("/enforcement")).json()["source"] == "settings"
        assert [(await client.get(path)).headers["etag"] for path in ("/throttle-factor", "/quotas")] == before

    run(scenario, tmp_path)


def test_without_a_configured_token_changes_are_refused(tmp_path):
    async def scenario(client, observer, clock):
        refused = await client.put("/enforcement", json={"mode": "shadow"})
        assert refused.status_code == 403 and "no admin token" in refused.text
        assert (await client.get("/enforcement")).json()["mode"] == "enforce"

    run(scenario, tmp_path, admin_token=None)


def test_the_stored_enforcement_wins_over_the_setting_across_a_restart_until_deleted(tmp_path, caplog):
    caplog.set_level("INFO")

    async def set_canary(client, observer, clock):
        observer.apply_round(paused(clock))
        assert (await client.put("/enforcement", json={"mode": "enforce", "canary_brokers": [1]}, headers=AUTH)).status_code == 200

    async def after_restart(client, observer, clock):
        kept = (await client.get("/enforcement")).json()
        assert (kept["mode"], kept["canary_brokers"], kept["source"]) == ("enforce", [1], "store")
        assert kept["settings"] == {"mode": "shadow", "canary_brokers": []}
        assert (await client.get("/quotas")).json()["canary_brokers"] == [1]
        back = await client.delete("/enforcement", headers=AUTH)
        assert back.status_code == 200 and (back.json()["mode"], back.json()["source"]) == ("shadow", "settings")
        assert (await client.get("/throttle-factor")).json()["enforced"] is False

    run(set_canary, tmp_path)
    run(after_restart, tmp_path, enforcement="shadow")
    assert "enforcement enforce on canary brokers 1 (the others in shadow), was enforce (every broker)" in caplog.text
    assert "PUT /enforcement outcome=accepted status=200" in caplog.text
