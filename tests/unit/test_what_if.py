"""POST /what-if (in-process): a candidate set of limits answers what the decider itself would
answer under those limits on the same view, is checked by the settings' rules, and has no
effect on anything the service publishes, records or counts."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.clock import ManualClock
from app.decision.decider import ThrottleDecider
from app.decision.enforcement import Enforcement
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import ObservationRound, VolumeObservation
from app.server.api.schemas.decision import decision_response
from app.server.api.schemas.volumes import volumes_view
from app.server.api.schemas.what_if import CandidateLimits
from app.server.app import create_app
from app.settings import load_settings

from .asgi import run_scenario

VALIDITY = 120.0
FALLBACK = 0.0
JSON = {"Content-Type": "application/json"}


def make_app(clock: ManualClock, **overrides):
    overrides.setdefault("data_dir", tempfile.mkdtemp(prefix="throttle-test-"))
    overrides.setdefault("storage_per_volume_limit_min_available_bytes", "100")
    settings_ = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        throttle_factor_fallback=str(FALLBACK),
        throttle_factor_validity_duration="PT2M",
        **overrides,
    )
    return create_app(settings_, clock=clock, observe=False)


def body_of(policy: StoragePolicy) -> dict:
    """The what-if body that stands for ``policy``."""
    bytes_kind = policy.kind is LimitKind.MIN_AVAILABLE_BYTES
    level = "min_available_bytes" if bytes_kind else "min_available_ratio"

    def number(value: float):
        return int(value) if bytes_kind else value

    body: dict = {"hard": {level: number(policy.hard_level)}}
    if policy.soft_level is not None:
        body["soft"] = {level: number(policy.soft_level)}
    if policy.hysteresis:
        body["hysteresis"] = {"bytes" if bytes_kind else "ratio": number(policy.hysteresis)}
    return body


# --- the property: what-if == the decider configured with the candidate, on the same rounds ---

TOTAL = 1 << 40


@st.composite
def volumes(draw, at: float) -> tuple[VolumeObservation, ...]:
    keys = draw(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["/a", "/b"])), min_size=0, max_size=5, unique=True))
    observed = []
    for broker, log_dir in keys:
        kind = draw(st.sampled_from(["judged", "judged", "judged", "error", "unreported", "empty"]))
        if kind == "error":
            observed.append(VolumeObservation(broker, log_dir, TOTAL, 0, at, error="KAFKA_STORAGE_ERROR"))
        elif kind == "unreported":
            observed.append(VolumeObservation(broker, log_dir, -1, -1, at))
        elif kind == "empty":
            observed.append(VolumeObservation(broker, log_dir, 0, 0, at))
        else:
            total = draw(st.integers(1, TOTAL))
            observed.append(VolumeObservation(broker, log_dir, total, draw(st.integers(0, total)), at))
    return tuple(observed)


@st.composite
def candidates(draw, hysteresis: bool) -> StoragePolicy:
    if draw(st.booleans()):
        hard = draw(st.integers(0, TOTAL))
        soft = draw(st.none() | st.integers(hard + 1, hard + TOTAL))
        extra = draw(st.integers(0, TOTAL)) if hysteresis and draw(st.booleans()) else 0
        return StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(hard), None if soft is None else float(soft), float(extra))
    ratio = st.floats(0.0, 1.0)
    hard_ratio = draw(ratio)
    soft_ratio = draw(st.none() | ratio.filter(lambda r: r > hard_ratio))
    extra_ratio = draw(ratio) if hysteresis and draw(st.booleans()) else 0.0
    return StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_ratio, soft_ratio, extra_ratio)


@st.composite
def scenarios(draw):
    """Rounds (each observing volumes, missing a broker, or failing) some seconds apart, the
    instant of the what-if, and a candidate. With more than one round the candidate has no
    hysteresis: the what-if remembers no breach (see test_hysteresis_...), the decider does."""
    clock = 1_700_000_000.0
    rounds = []
    for _ in range(draw(st.integers(1, 3))):
        clock += draw(st.sampled_from([1.0, 30.0, 61.0, VALIDITY + 1]))
        outcome = draw(st.sampled_from(["complete", "complete", "missing", "failed"]))
        if outcome == "failed":
            rounds.append(ObservationRound(clock, clock, error="cluster unreachable"))
            continue
        observed = draw(volumes(clock))
        brokers = tuple(sorted({v.broker_id for v in observed} | ({9} if outcome == "missing" else set())))
        missing = {9: "timed out"} if outcome == "missing" else {}
        rounds.append(ObservationRound(clock, clock, brokers, observed, missing))
    read_after = draw(st.sampled_from([0.0, 10.0, VALIDITY - 1, VALIDITY + 5]))
    return rounds, read_after, draw(candidates(hysteresis=len(rounds) == 1))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
@example(  # a breach, a ramp and an unjudged log dir in one round
    (
        [
            ObservationRound(
                1_700_000_001.0,
                1_700_000_001.0,
                (1, 2),
                (
                    VolumeObservation(1, "/a", 1000, 50, 1_700_000_001.0),
                    VolumeObservation(1, "/b", 1000, 150, 1_700_000_001.0),
                    VolumeObservation(2, "/a", -1, -1, 1_700_000_001.0),
                ),
            )
        ],
        10.0,
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 100.0, 200.0, 80.0),
    )
)
def test_what_if_answers_what_the_decider_with_those_limits_answers_on_the_same_view(scenario):
    rounds, read_after, candidate = scenario
    clock = ManualClock()
    app = make_app(clock)
    reference = ThrottleDecider(candidate, VALIDITY, FALLBACK, started_at=clock())

    async def run(client, observer, clock):
        for round_ in rounds:
            clock.now = round_.finished_at
            observer.apply_round(round_)
            reference.apply_round(round_)
        clock.advance(read_after)
        answer = await client.post("/what-if", json=body_of(candidate))
        assert answer.status_code == 200, answer.text
        return answer.json()

    answer = run_scenario(app, clock, run)
    now = clock()
    assert answer["decision"] == decision_response(reference.decision(now)).model_dump(mode="json")
    assert answer["volumes"] == volumes_view(reference, now).model_dump(mode="json")


# --- horizons: the candidate's time factors from the live trends ---

GiB = 1 << 30
LIVE_HORIZON = "PT1H"  # its trend window (15 min) holds every round of a scenario: the replay sees what a candidate would
VOLUME_TOTAL = 100 * GiB


def horizon_app(clock: ManualClock, **overrides):
    return make_app(clock, storage_check_interval="PT1S", ramp_horizon=LIVE_HORIZON, **overrides)


@st.composite
def filling_scenarios(draw):
    """Rounds of volumes that fill (or free) at rates of their own, some rounds failed, under an
    enforcement; a candidate set of limits with a horizon."""
    clock = 1_700_000_000.0
    keys = draw(st.lists(st.tuples(st.integers(1, 3), st.sampled_from(["/a", "/b"])), min_size=1, max_size=4, unique=True))
    usable = {key: draw(st.integers(1 * GiB, 60 * GiB)) for key in keys}
    rates = {key: draw(st.sampled_from([0, 1 << 20, 20 << 20, 200 << 20, 1 << 30])) for key in keys}
    rounds = []
    for _ in range(draw(st.integers(3, 10))):
        gap = draw(st.sampled_from([1.0, 2.0, 5.0, 15.0]))
        clock += gap
        if draw(st.integers(0, 5)) == 0:
            rounds.append(ObservationRound(clock, clock, error="cluster unreachable"))
            continue
        for key in keys:
            step = rates[key] * gap * draw(st.sampled_from([1.0, 1.0, 0.5, 1.5]))
            usable[key] = max(0, int(usable[key] - step)) if draw(st.integers(0, 9)) else usable[key] + 5 * GiB  # now and then a gain
        observed = tuple(VolumeObservation(b, d, VOLUME_TOTAL, usable[(b, d)], clock) for b, d in keys)
        rounds.append(ObservationRound(clock, clock, tuple(sorted({b for b, _ in keys})), observed))
    if draw(st.booleans()):
        hard = draw(st.integers(0, 20 * GiB))
        soft = draw(st.none() | st.integers(hard + 1, hard + 40 * GiB))
        candidate = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(hard), None if soft is None else float(soft))
    else:
        candidate = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, draw(st.sampled_from([0.0, 0.05, 0.1, 0.2])))
    horizon = draw(st.sampled_from([60.0, 90.0, 300.0, 1800.0, 3600.0]))
    enforcement = draw(st.sampled_from([Enforcement.of("enforce"), Enforcement.of("shadow"), Enforcement.of("enforce", [1])]))
    return rounds, draw(st.sampled_from([0.0, 10.0])), candidate, horizon, enforcement


def iso_seconds(seconds: float) -> str:
    return f"PT{seconds:g}S"


def _slowing_fill() -> list[ObservationRound]:
    """A volume taken hold of by a PT1M horizon over a 1 GiB hard limit (0.82 of the reach's
    factor) whose producers then slow to 60%: its time factor rises into the band (0.91, 0.95)
    and it stays held only because it was held: the candidate's rule must remember that."""
    start, usable, rounds = 1_700_000_000.0, GiB + 0.88 * 78.5 * (100 << 20), []
    for second in range(1, 9):
        usable -= (100 if second <= 5 else 60) << 20
        at = start + second
        rounds.append(ObservationRound(at, at, (1,), (VolumeObservation(1, "/a", VOLUME_TOTAL, int(usable), at),)))
    return rounds


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(filling_scenarios())
@example((_slowing_fill(), 0.0, StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(GiB)), 60.0, Enforcement.of("shadow")))
def test_what_if_with_a_horizon_answers_what_a_decider_with_those_settings_answers_on_the_same_rounds(scenario):
    """Time factors, rates and times to the hard limit under the candidate's hard level and
    horizon, from the live trends, equal those of a decider built with the candidate settings
    that took the same rounds under the same factors applied (the live service's: the
    observations were made under them)."""
    rounds, read_after, candidate, horizon, enforcement = scenario
    clock = ManualClock()
    app = horizon_app(clock)
    reference = ThrottleDecider(candidate, VALIDITY, FALLBACK, started_at=clock(), horizon_seconds=horizon)

    async def run(client, observer, clock):
        observer.enforcement.follow(lambda: enforcement)
        for round_ in rounds:
            clock.now = round_.finished_at
            applied = observer.applied_factor(round_)
            observer.apply_round(round_)
            reference.apply_round(round_, applied)
        clock.advance(read_after)
        answer = await client.post("/what-if", json={**body_of(candidate), "horizon": iso_seconds(horizon)})
        assert answer.status_code == 200, answer.text
        return answer.json()

    answer = run_scenario(app, clock, run)
    now = clock()
    assert answer["decision"] == decision_response(reference.decision(now)).model_dump(mode="json")
    assert answer["volumes"] == volumes_view(reference, now).model_dump(mode="json")


def test_the_time_to_the_hard_limit_and_the_time_factor_are_those_of_the_candidates_hard_level_and_horizon():
    """Live: hard limit 100 bytes, horizon PT1H, in shadow mode. A volume 40 GiB above it loses
    100 MiB/s: 410 s to the live hard limit, a time factor of 410 / (3600 + 11 + 450) = 0.10. The
    candidate, a hard limit at 20 GiB and a horizon of PT1M: 205 s to its hard limit, more than
    its reach (60 + 11 + 7.5 s): no time factor."""
    clock = ManualClock()
    app = horizon_app(clock)
    rate = 100 << 20

    async def run(client, observer, clock):
        observer.enforcement.follow(lambda: Enforcement.of("shadow"))
        for i in range(6):
            clock.now = 1_700_000_000.0 + 2 * i
            usable = 40 * GiB + 100 - i * 2 * rate
            observer.apply_round(ObservationRound(clock(), clock(), (1,), (VolumeObservation(1, "/a", VOLUME_TOTAL, usable, clock()),)))
        live = (await client.get("/throttle-factor")).json()
        same = (await client.post("/what-if", json={"hard": {"min_available_bytes": 100}, "horizon": LIVE_HORIZON})).json()
        tighter = (await client.post("/what-if", json={"hard": {"min_available_bytes": 20 * GiB}, "horizon": "PT1M"})).json()
        none = (await client.post("/what-if", json={"hard": {"min_available_bytes": 100}})).json()
        return live, same, tighter, none

    live, same, tighter, none = run_scenario(app, clock, run)
    headroom = 40 * GiB - 10 * rate
    assert live["rule"] == "time to full" and live["ramping"][0]["seconds_to_hard_limit"] == pytest.approx(headroom / rate)
    assert (same["decision"]["factor"], same["decision"]["ramping"]) == (live["factor"], live["ramping"])
    assert live["factor"] == pytest.approx(headroom / (3600 + 11 + 450) / rate)
    assert tighter["decision"]["state"] == "OPEN" and tighter["decision"]["ramping"] == []
    (volume,) = tighter["volumes"]["volumes"]
    assert volume["seconds_to_hard_limit"] == pytest.approx((headroom + 100 - 20 * GiB) / rate)
    assert volume["fill_rate_bytes_per_second"] == pytest.approx(rate)
    assert (none["decision"]["state"], none["decision"]["rule"]) == ("OPEN", None)
    assert none["volumes"]["volumes"][0]["fill_rate_bytes_per_second"] is None


def test_a_horizon_is_refused_naming_it_when_it_is_no_duration_too_short_or_the_service_keeps_no_trends():
    for body, app_overrides, allowed in (
        ({"horizon": "30 minutes"}, {}, "an ISO-8601 duration"),
        ({"horizon": "PT30S"}, {}, "at least PT1M"),
        ({"horizon": 1800}, {}, None),  # a string, as the setting is written
        ({"horizon": "PT30M"}, {"ramp_horizon": None}, "keeps fill trends"),
    ):
        clock = ManualClock()
        overrides = {"storage_check_interval": "PT1S", "ramp_horizon": LIVE_HORIZON, **app_overrides}
        if overrides["ramp_horizon"] is None:
            del overrides["ramp_horizon"]

        async def run(client, observer, clock, body=body):
            return await client.post("/what-if", json={"hard": {"min_available_bytes": 5}, **body})

        answer = run_scenario(make_app(clock, **overrides), clock, run)
        assert answer.status_code == 422, (body, answer.text)
        (error,) = answer.json()["errors"]
        assert error["field"] == "horizon", error
        if allowed is not None:
            assert allowed in error["message"] and "throttle.service.ramp.horizon" in error["message"], error


# --- what it assumes about hysteresis ---


def test_what_if_remembers_no_breach_so_hysteresis_holds_no_volume_that_the_live_decision_holds():
    """Live limits hard 100 bytes, hysteresis 50: a volume at 80 breaches, then at 120 the
    service holds it in breach (it breached before). The what-if with the very same limits
    does not: which volumes breached before under a candidate is not known, so it assumes
    none, as the service does at its first round after a restart with those limits."""
    clock = ManualClock()
    app = make_app(clock, storage_per_volume_limit_hysteresis_bytes="50")
    same_limits = {"hard": {"min_available_bytes": 100}, "hysteresis": {"bytes": 50}}

    async def run(client, observer, clock):
        for usable in (80, 120):
            clock.advance(30)
            now = clock()
            observer.apply_round(ObservationRound(now, now, (1,), (VolumeObservation(1, "/a", 1000, usable, now),)))
        live = (await client.get("/throttle-factor")).json()
        tried = (await client.post("/what-if", json=same_limits)).json()
        return live, tried

    live, tried = run_scenario(app, clock, run)
    assert (live["state"], [v["reason"] for v in live["breaching"]]) == ("PAUSE", ["hard limit (hysteresis)"])
    assert (tried["decision"]["state"], tried["decision"]["breaching"]) == ("OPEN", [])
    assert tried["decision"]["limits"] == {"kind": "min-available-bytes", "hard": 100.0, "soft": None, "hysteresis": 50.0}
    assert [v["status"] for v in tried["volumes"]["volumes"]] == ["ok"]


# --- the settings' rules, answered 422 naming the field ---


def problem_of(body) -> dict:
    clock = ManualClock()

    async def run(client, observer, clock):
        return await client.post("/what-if", json=body)

    answer = run_scenario(make_app(clock), clock, run)
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json", answer.text
    return answer.json()


def fields_of(problem: dict) -> list[str]:
    return [error["field"] for error in problem["errors"]]


def test_a_soft_limit_not_strictly_looser_than_the_hard_one_is_refused_naming_it():
    problem = problem_of({"hard": {"min_available_ratio": 0.2}, "soft": {"min_available_ratio": 0.2}})
    assert fields_of(problem) == ["soft.min_available_ratio"]
    assert "strictly greater than the hard limit" in problem["errors"][0]["message"]
    assert "client.quota.callback.static.storage.per.volume.soft.limit.min.available.ratio" in problem["errors"][0]["message"]


def test_two_hard_limits_a_soft_limit_of_the_other_kind_and_values_out_of_range_are_refused_naming_each():
    assert fields_of(problem_of({"hard": {"min_available_ratio": 0.1, "min_available_bytes": 5}})) == [
        "hard.min_available_bytes",
        "hard.min_available_ratio",
    ]
    assert fields_of(problem_of({"hard": {"min_available_bytes": 5}, "soft": {"min_available_ratio": 0.5}})) == ["soft.min_available_ratio"]
    assert fields_of(problem_of({"hard": {"min_available_bytes": 5}, "hysteresis": {"ratio": 0.5}})) == ["hysteresis.ratio"]
    assert fields_of(problem_of({"hard": {"min_available_ratio": 1.5}})) == ["hard.min_available_ratio"]
    assert fields_of(problem_of({"hard": {"min_available_bytes": -1}})) == ["hard.min_available_bytes"]


def test_a_body_without_a_hard_limit_or_with_unknown_fields_is_refused_naming_them():
    assert fields_of(problem_of({})) == ["hard"]
    assert fields_of(problem_of({"hard": {}})) == ["hard.min_available_bytes"]
    assert fields_of(problem_of({"hard": {"min_available_percent": 5}})) == ["hard.min_available_percent"]


# --- no effect ---


def _history_rounds(directory: Path) -> int:
    """The rounds the history holds (format 2: a round row each, and its volumes' rows)."""
    lines = [json.loads(line) for path in directory.rglob("*.jsonl") for line in path.read_text().splitlines()]
    return sum(1 for row in lines if row.get("row") == "round")


def _decision_metrics(text: str) -> list[str]:
    """The service's own samples (kafka_throttle_*), not the HTTP metrics (those count every
    request) nor the process's, nor the history writer's counters: its thread writes the round's
    rows whenever it gets to them (what the what-if submits is checked by the submissions)."""
    return sorted(
        line for line in text.splitlines() if line.startswith("kafka_throttle_") and not line.startswith("kafka_throttle_history_")
    )


def test_what_if_changes_nothing_the_service_publishes_records_or_counts():
    clock = ManualClock()
    data_dir = tempfile.mkdtemp(prefix="throttle-test-")
    app = make_app(clock, data_dir=data_dir)
    submitted = []

    async def run(client, observer, clock):
        submit = observer.history.submit
        observer.history.submit = lambda *args: (submitted.append(args), submit(*args))
        now = clock()
        observer.apply_round(ObservationRound(now, now, (1,), (VolumeObservation(1, "/a", 1000, 500, now),)))
        before = await client.get("/throttle-factor")
        quotas_before = await client.get("/quotas")
        metrics_before = _decision_metrics((await client.get("/metrics")).text)
        assert any(line.startswith("kafka_throttle_factor ") for line in metrics_before)
        pausing = await client.post("/what-if", json={"hard": {"min_available_bytes": 600}})
        assert pausing.json()["decision"]["state"] == "PAUSE"
        after = await client.get("/throttle-factor")
        quotas_after = await client.get("/quotas")
        assert after.headers["etag"] == before.headers["etag"] and after.json() == before.json()
        assert after.json()["state"] == "OPEN"
        assert quotas_after.headers["etag"] == quotas_before.headers["etag"]
        waited = await client.get("/throttle-factor", params={"wait": "0s"}, headers={"If-None-Match": before.headers["etag"]})
        assert waited.status_code == 304
        assert _decision_metrics((await client.get("/metrics")).text) == metrics_before

    run_scenario(app, clock, run)
    assert len(submitted) == 1  # the round's; the what-if submitted nothing
    assert _history_rounds(Path(data_dir) / "history") == 1  # written when the app stopped


def test_limit_values_are_json_numbers_never_booleans_strings_or_null_as_the_document_says():
    for body in (
        {"hard": {"min_available_ratio": 0.1}, "hysteresis": {"ratio": False}},
        {"hard": {"min_available_bytes": "5"}},
        {"hard": {"min_available_bytes": None}},
        {"hard": {"min_available_bytes": 5.5}},
        {"hard": {"min_available_ratio": 0.1, "min_available_bytes": 5}},
    ):
        problem = problem_of(body)
        assert problem["status"] == 422, body
    document = CandidateLimits.model_json_schema()["$defs"]
    assert (document["HardLimit"]["minProperties"], document["HardLimit"]["maxProperties"]) == (1, 1)
    assert document["LimitLevel"]["maxProperties"] == 1 and document["HysteresisLevel"]["maxProperties"] == 1
