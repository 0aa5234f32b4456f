"""GET /volumes and POST /what-if cost one rendering per change of what they show, not one per
request: served from the bytes (with ETag and 304 for /volumes) until a round, a node's report,
the decision or an expiry changes them; a new what-if candidate is computed within a budget of
the event loop's time, and past it answered 429 with Retry-After."""

from __future__ import annotations

import pytest

from app.clock import ManualClock
from app.observation.model import ObservationRound, VolumeObservation
from app.server.api.routes import volumes as volumes_route, what_if as what_if_route
from app.server.api.view_cache import ReadPace, ViewCache, WhatIfBudget

from .asgi import run_scenario
from .test_node_reports import GiB, NODE_AUTH, make_app, report

RATIO = {"hard": {"min_available_ratio": 0.1}}
SOFTER = {"hard": {"min_available_ratio": 0.1}, "soft": {"min_available_ratio": 0.3}}


def many_volumes(clock, brokers=50, usable=500):
    now = clock()
    observations = tuple(VolumeObservation(b, f"/data/{d}", 1000, usable, now) for b in range(1, brokers + 1) for d in range(4))
    return ObservationRound(now, now, tuple(range(1, brokers + 1)), observations)


@pytest.fixture
def renders(monkeypatch):
    """How many times each route built its view."""
    counted = {"volumes": 0, "what-if": 0}

    def counting(module, name):
        real = module.volumes_view

        def view(*args, **kwargs):
            counted[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, "volumes_view", view)

    counting(volumes_route, "volumes")
    counting(what_if_route, "what-if")
    return counted


def run(tmp_path, scenario):
    clock = ManualClock()
    return run_scenario(make_app(tmp_path, clock, storage_per_volume_limit_min_available_bytes="100"), clock, scenario)


def test_volumes_is_rendered_once_per_change_and_served_with_its_etag_and_304_in_between(tmp_path, renders):
    async def scenario(client, loop, clock):
        (await _state(client)).views = ViewCache(rerender_after_cost=0.0)  # every change rendered at once
        loop.apply_round(many_volumes(clock))
        first = await client.get("/volumes")
        clock.advance(5)
        again = await client.get("/volumes", headers={"Accept-Encoding": "gzip"})
        assert renders["volumes"] == 1 and first.status_code == again.status_code == 200
        assert again.headers["etag"] == first.headers["etag"] and again.json() == first.json()
        assert again.headers["content-encoding"] == "gzip", "a large view goes gzipped to a client that takes it"
        assert first.json()["volumes"][0]["age_seconds"] == 0.0 and first.json()["rendered_at"] == first.json()["observed_at"]
        unchanged = await client.get("/volumes", headers={"If-None-Match": first.headers["etag"]})
        assert (unchanged.status_code, unchanged.content, unchanged.headers["etag"]) == (304, b"", first.headers["etag"])

        assert (await client.put("/nodes/3000/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        reported = await client.get("/volumes", headers={"If-None-Match": first.headers["etag"]})
        assert reported.status_code == 200 and renders["volumes"] == 2 and reported.json()["reporting_nodes"] == [3000]
        assert reported.json()["volumes"][0]["age_seconds"] == 5.0

        loop.apply_round(many_volumes(clock, usable=50))
        after_round = (await client.get("/volumes")).json()
        assert renders["volumes"] == 3 and {v["status"] for v in after_round["volumes"] if v["observed_by"] == "admin-api"} == {"breaching"}

        clock.advance(loop.decider.validity_seconds + 1)  # every observation and the report expire: the view changes by itself
        expired = (await client.get("/volumes")).json()
        assert renders["volumes"] == 4 and expired["volumes"] == [] and expired["reporting_nodes"] == []

    run(tmp_path, scenario)


def test_a_what_if_answer_is_computed_once_per_candidate_and_change_of_the_view(tmp_path, renders):
    async def scenario(client, loop, clock):
        (await _state(client)).views = ViewCache(rerender_after_cost=0.0)  # every change computed at once
        loop.apply_round(many_volumes(clock))
        first = await client.post("/what-if", json=RATIO)
        assert first.status_code == 200 and (await client.post("/what-if", json=RATIO)).json() == first.json()
        assert renders["what-if"] == 1
        assert (await client.post("/what-if", json=SOFTER)).status_code == 200 and renders["what-if"] == 2
        assert (await client.post("/what-if", json=RATIO)).status_code == 200 and renders["what-if"] == 2
        loop.apply_round(many_volumes(clock, usable=50))
        after = (await client.post("/what-if", json=RATIO)).json()
        assert renders["what-if"] == 3
        assert after["volumes"]["volumes"][0]["status"] == "breaching" and first.json()["volumes"]["volumes"][0]["status"] == "ok"

    run(tmp_path, scenario)


def test_new_what_if_candidates_past_the_budget_are_answered_429_and_known_ones_still_served(tmp_path, renders):
    async def scenario(client, loop, clock):
        loop.apply_round(many_volumes(clock))
        assert (await client.post("/what-if", json=RATIO)).status_code == 200
        # The service's budget, spent as a flood of new candidates would spend it.
        budget = WhatIfBudget(share=0.1, burst=1.0, clock=lambda: 0.0)
        budget.spend(1.5)
        (await _state(client)).views.budget = budget
        refused = await client.post("/what-if", json=SOFTER)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
        assert refused.headers["content-type"] == "application/problem+json"
        assert (await client.post("/what-if", json=RATIO)).status_code == 200, "a candidate already computed costs nothing"
        assert renders["what-if"] == 1

    run(tmp_path, scenario)


async def _state(client):
    return client._transport.app.state  # the app's state: .views is the API's cache


def test_the_what_if_budget_refills_at_its_share_of_the_time_up_to_its_burst():
    now = [0.0]
    budget = WhatIfBudget(share=0.1, burst=1.0, clock=lambda: now[0])
    assert budget.retry_after() is None
    budget.spend(0.6)
    assert budget.retry_after() is None, "a burst of a second"
    budget.spend(0.9)  # 0.5 s past the budget: five seconds at a tenth of the time
    assert budget.retry_after() == 5
    now[0] = 5.01
    assert budget.retry_after() is None
    now[0] = 1000.0
    budget.spend(1.0)
    assert budget.retry_after() == 1, "refilled to the burst, never beyond it"


def test_a_client_gets_the_large_answers_at_its_pace_waits_for_its_turn_and_is_refused_past_the_longest_wait():
    now = [0.0]
    pace = ReadPace(rate=10.0, burst=3, max_delay=1.0, clock=lambda: now[0])
    assert [pace.delay("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.0], "a burst at once"
    waits = [pace.delay("10.0.0.1") for _ in range(10)]
    assert waits == pytest.approx([0.1 * n for n in range(1, 11)]), "then one turn every tenth of a second"
    assert pace.delay("10.0.0.1") is None, "a turn more than a second off is refused"
    assert pace.delay("10.0.0.2") == 0.0, "each address has its own turns"
    now[0] = 5.0
    assert pace.delay("10.0.0.1") == 0.0


def test_a_client_asking_for_volumes_too_fast_waits_then_is_answered_429_and_a_token_holder_is_not_paced(tmp_path):
    async def scenario(client, loop, clock):
        state = await _state(client)
        state.views.pace = ReadPace(rate=1.0, burst=2, max_delay=0.0)  # no waiting: past the burst, refused
        assert [(await client.get("/volumes")).status_code for _ in range(3)] == [200, 200, 429]
        refused = await client.post("/what-if", json=RATIO)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert "faster than they are given to one client" in refused.json()["detail"]
        assert (await client.get("/volumes", headers={"Authorization": NODE_AUTH["Authorization"]})).status_code == 200

    run(tmp_path, scenario)


def test_a_view_changing_faster_than_its_rendering_is_affordable_is_served_as_rendered_until_it_is(tmp_path, monkeypatch):
    timer = [0.0]
    real = volumes_route.volumes_view

    def slow_view(*args, **kwargs):
        timer[0] += 0.3  # a rendering of 0.3 s, as at 1,000 brokers x 12 log dirs
        return real(*args, **kwargs)

    monkeypatch.setattr(volumes_route, "volumes_view", slow_view)

    async def scenario(client, loop, clock):
        (await _state(client)).views = ViewCache(timer=lambda: timer[0])
        loop.apply_round(many_volumes(clock))
        first = await client.get("/volumes")
        assert (await client.put("/nodes/3000/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        timer[0] += 8.9  # less than thirty times the rendering's cost since it
        kept = await client.get("/volumes", headers={"If-None-Match": first.headers["etag"]})
        assert kept.status_code == 304, "the rendering kept: another would cost more than a tenth of the time"
        timer[0] += 0.2
        again = await client.get("/volumes", headers={"If-None-Match": first.headers["etag"]})
        assert again.status_code == 200 and again.json()["reporting_nodes"] == [3000]

    run(tmp_path, scenario)
