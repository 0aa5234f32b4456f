"""HTTP semantics of the decision endpoints, with rounds applied by the test (no Kafka).

The real service against a real cluster is covered in tests/integration."""

import asyncio
import tempfile

import httpx
import pytest

from app.clock import ManualClock
from app.server.app import create_app
from app.settings import load_settings
from app.observation.model import ObservationRound, VolumeObservation

from .asgi import run_scenario


def make_app(clock, **overrides):
    overrides.setdefault("data_dir", tempfile.mkdtemp(prefix="throttle-test-"))
    overrides.setdefault("throttle_factor_fallback", "0.0")
    overrides.setdefault("throttle_factor_validity_duration", "PT2M")
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        storage_per_volume_limit_min_available_bytes="100",
        **overrides,
    )
    return create_app(settings, clock=clock, observe=False)


def healthy(clock, usable=500):
    now = clock()
    return ObservationRound(now, now, (1, 2), (VolumeObservation(1, "/a", 1000, usable, now), VolumeObservation(2, "/b", 1000, 900, now)))


def run(scenario, **overrides):
    clock = ManualClock()
    app = make_app(clock, **overrides)
    return run_scenario(app, clock, scenario)


def test_throttle_factor_carries_etag_and_answers_304_to_if_none_match():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        first = await client.get("/throttle-factor")
        assert first.status_code == 200
        etag = first.headers["etag"]
        assert etag.startswith('W/"') and etag.endswith('"'), "weak: equal for representations a client treats alike"
        body = first.json()
        assert (body["factor"], body["state"], body["source"]) == (1.0, "OPEN", "observed")
        assert body["active_brokers"] == 2 and body["active_log_dirs"] == 2
        again = await client.get("/throttle-factor", headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        weak = await client.get("/throttle-factor", headers={"If-None-Match": f'"other", {etag.removeprefix("W/")}'})
        assert weak.status_code == 304
        observer.apply_round(healthy(clock, usable=50))
        changed = await client.get("/throttle-factor", headers={"If-None-Match": etag})
        assert changed.status_code == 200 and changed.headers["etag"] != etag
        assert changed.json()["state"] == "PAUSE"
        assert changed.json()["breaching"][0]["log_dir"] == "/a"

    run(scenario)


def test_a_new_round_with_the_same_decision_keeps_the_etag_and_renews_the_validity():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        first = await client.get("/throttle-factor")
        clock.advance(60)
        observer.apply_round(healthy(clock, usable=800))  # other figures, the same decision
        again = await client.get("/throttle-factor", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 304 and again.headers["etag"] == first.headers["etag"]
        body = (await client.get("/throttle-factor")).json()
        assert body["valid_until"] != first.json()["valid_until"]
        assert again.headers["throttle-valid-until"] == body["valid_until"]
        assert again.headers["cache-control"] == "no-cache, max-age=120"
        assert first.headers["throttle-valid-until"] == first.json()["valid_until"]

    run(scenario)


def test_a_long_poll_sleeps_through_rounds_that_change_nothing_a_client_acts_on():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        etag = (await client.get("/throttle-factor")).headers["etag"]
        table = await client.get("/quotas")
        loop = asyncio.get_running_loop()
        for delay in (0.1, 0.2, 0.3):
            loop.call_later(delay, lambda: (clock.advance(10), observer.apply_round(healthy(clock, usable=700))))
        started = loop.time()
        decision, quotas = await asyncio.gather(
            client.get("/throttle-factor", params={"wait": "0.6"}, headers={"If-None-Match": etag}),
            client.get("/quotas", params={"wait": "0.6"}, headers={"If-None-Match": table.headers["etag"]}),
        )
        assert loop.time() - started >= 0.55, "woken by a round that changed nothing"
        assert decision.status_code == 304 and quotas.status_code == 304
        renewed = (await client.get("/quotas")).json()["valid_until"]
        assert renewed != table.json()["valid_until"] and quotas.headers["throttle-valid-until"] == renewed

    run(scenario)


def test_a_long_poll_longer_than_the_clients_validity_answers_with_the_renewal_before_it_lapses():
    """A shim holding a table valid for 2 s that long-polls for 10 s must hear of the next
    round's renewal before its copy lapses, or it applies its fallback while nothing changed."""

    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        for path in ("/throttle-factor", "/quotas"):
            first = await client.get(path)
            held = first.headers["throttle-valid-until"]
            loop = asyncio.get_running_loop()
            loop.call_later(0.1, lambda: (clock.advance(1.5), observer.apply_round(healthy(clock, usable=700))))
            started = loop.time()
            answer = await client.get(path, params={"wait": "10"}, headers={"If-None-Match": first.headers["etag"]})
            assert answer.status_code == 304, path
            assert loop.time() - started < 3, f"{path}: held past the validity the client had"
            renewed = answer.headers["throttle-valid-until"]
            assert renewed > held and renewed == (await client.get(path)).json()["valid_until"], path

    run(scenario, throttle_factor_validity_duration="PT2S", storage_check_interval="PT1S")


def test_a_long_poll_past_an_unrenewed_validity_answers_with_the_fallback_at_the_expiry():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        first = await client.get("/throttle-factor")
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, lambda: clock.advance(1.5))  # past the renewal point, and no round
        loop.call_later(1.5, lambda: clock.advance(1.0))  # past the validity
        answer = await client.get("/throttle-factor", params={"wait": "10"}, headers={"If-None-Match": first.headers["etag"]})
        assert answer.status_code == 200 and answer.json()["source"] == "fallback"

    run(scenario, throttle_factor_validity_duration="PT2S", storage_check_interval="PT1S")


def test_the_quota_tables_etag_changes_when_it_stops_expiring_even_with_the_same_factor():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        table = await client.get("/quotas")
        assert table.json()["valid_until"] is not None
        clock.advance(121)  # the factor expires; the fallback (1.0 here) has no expiry
        after = await client.get("/quotas", headers={"If-None-Match": table.headers["etag"]})
        assert after.status_code == 200, "a shim holding an expiring table must learn that it no longer expires"
        assert (after.json()["factor"], after.json()["valid_until"]) == (table.json()["factor"], None)
        assert "throttle-valid-until" not in after.headers

    run(scenario, throttle_factor_fallback="1.0")


def test_expiry_is_judged_on_read_and_changes_the_etag():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        etag = (await client.get("/throttle-factor")).headers["etag"]
        clock.advance(121)
        response = await client.get("/throttle-factor", headers={"If-None-Match": etag})
        assert response.status_code == 200
        assert (response.json()["source"], response.json()["factor"]) == ("fallback", 0.0)

    run(scenario)


def test_long_poll_returns_as_soon_as_the_decision_changes():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        etag = (await client.get("/throttle-factor")).headers["etag"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        loop.call_later(0.2, lambda: observer.apply_round(healthy(clock, usable=50)))
        response = await client.get("/throttle-factor?wait=10s", headers={"If-None-Match": etag})
        elapsed = loop.time() - started
        assert response.status_code == 200 and response.json()["state"] == "PAUSE"
        assert 0.15 < elapsed < 5

    run(scenario)


def test_long_poll_times_out_with_304_when_nothing_changes():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        etag = (await client.get("/throttle-factor")).headers["etag"]
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await client.get("/throttle-factor", params={"wait": "0.3"}, headers={"If-None-Match": etag})
        assert response.status_code == 304
        assert 0.25 < loop.time() - started < 3

    run(scenario)


@pytest.mark.parametrize("wait", ["abc", "-1", "301", "1e3"])
def test_invalid_wait_is_a_problem_json_422(wait):
    async def scenario(client, observer, clock):
        response = await client.get("/throttle-factor", params={"wait": wait})
        assert response.status_code == 422
        assert response.headers["content-type"] == "application/problem+json"
        assert "wait" in response.json()["detail"]

    run(scenario)


def test_unknown_path_is_problem_json_404():
    async def scenario(client, observer, clock):
        response = await client.get("/nope")
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["status"] == 404

    run(scenario)


def test_volumes_lists_the_cache_with_ages():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock, usable=50))
        clock.advance(30)
        body = (await client.get("/volumes")).json()
        assert body["active_brokers"] == [1, 2]
        first = body["volumes"][0]
        assert (first["broker_id"], first["log_dir"], first["status"], first["age_seconds"]) == (1, "/a", "breaching", 30.0)
        assert first["total_bytes"] == 1000 and first["usable_bytes"] == 50 and first["available_ratio"] == 0.05

    run(scenario)


def test_readiness_waits_for_a_first_observation_or_the_fallback():
    async def scenario(client, observer, clock):
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 503
        clock.advance(121)
        assert (await client.get("/readyz")).json() == {"ready": True, "source": "fallback", "rounds": 0}

    run(scenario)


def test_metrics_expose_the_decision_and_the_http_metrics():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock, usable=50))
        await client.get("/throttle-factor")
        text = (await client.get("/metrics")).text
        assert "kafka_throttle_factor 0.0" in text
        assert 'kafka_throttle_state{kafka_throttle_state="PAUSE"} 1.0' in text
        assert 'kafka_throttle_limit_violations_total{limit="hard"} 1.0' in text
        assert "kafka_throttle_active_brokers 2.0" in text
        assert "kafka_throttle_active_log_dirs 2.0" in text
        assert 'kafka_throttle_volume_available_bytes{broker_id="1",log_dir="/a"} 50.0' in text
        assert "kafka_throttle_admin_connected 1.0" in text
        assert 'http_requests_total{handler="/throttle-factor",method="GET",status="2xx"}' in text
        # a volume that goes away takes its series with it
        now = clock()
        observer.apply_round(ObservationRound(now, now, (2,), (VolumeObservation(2, "/b", 1000, 900, now),)))
        clock.advance(121)
        observer.apply_round(ObservationRound(clock(), clock(), (2,), (VolumeObservation(2, "/b", 1000, 900, clock()),)))
        text = (await client.get("/metrics")).text
        assert 'broker_id="1"' not in text

    run(scenario)


def test_fallback_is_counted_once_per_takeover_and_shown_as_lack_of_data():
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        clock.advance(121)
        for _ in range(3):
            # The loop wakes at the expiry and publishes; reads judge the expiry too.
            observer.publisher.publish()
            assert (await client.get("/throttle-factor")).json()["source"] == "fallback"
        text = (await client.get("/metrics")).text
        assert "kafka_throttle_fallback_applied_total 1.0" in text
        assert "kafka_throttle_fallback_in_force 1.0" in text

    run(scenario)


def test_a_read_judges_an_expiry_without_logging_or_counting_it(caplog):
    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        clock.advance(121)
        caplog.clear()
        for _ in range(3):
            assert (await client.get("/throttle-factor")).json()["source"] == "fallback"
        text = (await client.get("/metrics")).text
        assert "kafka_throttle_fallback_applied_total 0.0" in text and "kafka_throttle_fallback_in_force 1.0" in text
        assert caplog.records == [], "a GET has no side effects"

    run(scenario)


def test_disabled_observation_serves_factor_one():
    async def scenario(client, observer, clock):
        body = (await client.get("/throttle-factor")).json()
        assert (body["factor"], body["source"], body["state"]) == (1.0, "disabled", "OPEN")
        assert (await client.get("/readyz")).status_code == 200

    run(scenario, storage_check_interval="PT0S")


def test_the_policy_judges_a_round_once_whatever_is_read_afterwards(monkeypatch):
    import sys

    from app.decision import policy

    calls = []
    judge = policy.evaluate
    for module in [m for m in list(sys.modules.values()) if getattr(m, "evaluate", None) is judge]:
        monkeypatch.setattr(module, "evaluate", lambda *args: calls.append(1) or judge(*args))

    async def scenario(client, observer, clock):
        observer.apply_round(healthy(clock))
        assert len(calls) == 1
        for _ in range(3):
            for path in ("/throttle-factor", "/volumes", "/quotas", "/metrics"):
                assert (await client.get(path)).status_code == 200, path
        assert len(calls) == 1, "the routes, the publications and the metrics read the round's verdicts"

    run(scenario)
