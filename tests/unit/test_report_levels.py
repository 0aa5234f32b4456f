"""What GET /quotas tells the shims to report on (report_on): the limits' levels, and the
time-to-full take-hold levels, computed once a round and kept while they hardly move."""

import pytest

from app.clock import ManualClock
from app.decision.horizon import KAFKA_QUOTA_WINDOW_SECONDS, AppliedFactor, HorizonRule
from app.decision.policy import LimitKind, StoragePolicy
from app.decision.report_levels import (
    MAX_TAKE_HOLD,
    MOVE_SHARE,
    LimitLevels,
    ReportLevels,
    ReportOn,
    take_hold_levels,
)
from app.observation.model import ObservationRound, VolumeObservation
from app.server.api.schemas.quotas import ReportOnModel
from app.server.runtime.report_rate import BURST, MIN_INTERVAL_SECONDS

from .asgi import run_scenario
from .test_api import make_app

MiB = 1024**2
GiB = 1024**3
HARD = 1 * GiB
POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=HARD)
HORIZON = 120.0
CHECK = 2.0
TOTAL = 100 * GiB


def fill(
    rule: HorizonRule,
    rounds: int,
    starts: dict[tuple[int, str], tuple[float, float]],
    t0: float = 0.0,
):
    """``rounds`` rounds of steady fills: per volume key, (usable at t0, rate in bytes/s); returns
    the last round's observations."""
    observations = []
    for i in range(rounds):
        t = t0 + i * CHECK
        observations = [
            VolumeObservation(broker, log_dir, TOTAL, int(usable - rate * (t - t0)), t)
            for (broker, log_dir), (usable, rate) in starts.items()
        ]
        rule.record(observations, AppliedFactor(1.0))
    return observations


def test_the_limits_levels_are_sent_in_their_kinds_hard_first():
    data = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.05, soft_level=0.15, hysteresis=0.01)
    metadata = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(GiB))
    report_on = ReportLevels(data, metadata, min_interval_ms=250, burst=4).current(None, list)
    body = ReportOnModel.of(report_on).model_dump(mode="json")
    assert body == {
        "kind": "min-available-ratio",
        "levels": [0.05, 0.15],
        "hysteresis": 0.01,
        "metadata": {"kind": "min-available-bytes", "levels": [float(GiB)], "hysteresis": 0.0},
        "move_share": MOVE_SHARE,
        "min_interval_ms": 250,
        "burst": 4,
        "take_hold": {},
    }
    without = ReportOnModel.of(ReportLevels(POLICY, None, 1000).current(None, list))
    assert without.metadata is None and without.levels == [HARD]


def test_a_fill_within_two_horizons_gets_the_level_where_the_rule_would_take_hold():
    rule = HorizonRule(POLICY, HORIZON)
    rate = 20 * MiB
    near = (1, "/near")  # 1.5 horizons from its hard limit
    far = (1, "/far")  # 5 horizons
    draining = (2, "/draining")
    observations = fill(
        rule,
        6,
        {
            near: (HARD + 1.5 * HORIZON * rate + 5 * CHECK * rate, rate),
            far: (HARD + 5 * HORIZON * rate, rate),
            draining: (HARD + 10 * MiB, -rate),
        },
    )
    levels = take_hold_levels(rule, observations)
    assert set(levels) == {near}
    assert levels[near] == pytest.approx(
        HARD + (HORIZON + KAFKA_QUOTA_WINDOW_SECONDS) * rate, rel=1e-6
    )


def test_the_rule_takes_hold_of_a_steady_fill_where_its_level_said():
    rule = HorizonRule(POLICY, HORIZON)
    rate = 20 * MiB
    key = (1, "/data")
    usable = HARD + 1.9 * HORIZON * rate
    t = 0.0
    level = None
    previous = usable
    while True:
        (volume,) = [VolumeObservation(1, "/data", TOTAL, int(usable), t)]
        at_risk = rule.record([volume], AppliedFactor(1.0))
        if key in at_risk:
            break
        level = take_hold_levels(rule, [volume]).get(key, level)
        previous, t, usable = usable, t + CHECK, usable - rate * CHECK
    assert level is not None
    assert usable <= level < previous, "held on the first observation below the level"


def test_a_volume_the_rule_holds_gets_no_level():
    rule = HorizonRule(POLICY, HORIZON)
    rate = 20 * MiB
    observations = fill(rule, 6, {(1, "/data"): (HARD + 0.5 * HORIZON * rate, rate)})
    assert (1, "/data") in rule.at_risk
    assert take_hold_levels(rule, observations) == {}


def test_a_published_level_is_kept_while_the_rate_moves_a_little_and_replaced_when_it_moves_more():
    rule = HorizonRule(POLICY, HORIZON)
    key = (1, "/data")
    rate = 20 * MiB
    observations = fill(rule, 6, {key: (HARD + 1.5 * HORIZON * rate, rate)})
    published = take_hold_levels(rule, observations)
    slightly = HorizonRule(POLICY, HORIZON)
    observations = fill(slightly, 6, {key: (HARD + 1.5 * HORIZON * rate, rate * 1.05)})
    assert take_hold_levels(slightly, observations, published) == published
    faster = HorizonRule(POLICY, HORIZON)
    observations = fill(faster, 6, {key: (HARD + 1.5 * HORIZON * rate * 1.3, rate * 1.3)})
    moved = take_hold_levels(faster, observations, published)
    assert moved[key] == pytest.approx(
        HARD + (HORIZON + KAFKA_QUOTA_WINDOW_SECONDS) * rate * 1.3, rel=1e-6
    )


def test_at_most_2000_levels_the_nearest_to_full_first():
    rule = HorizonRule(POLICY, HORIZON)
    rate = MiB
    starts = {
        (b, "/d"): (HARD + (1.3 + b / 10_000) * HORIZON * rate, rate)
        for b in range(MAX_TAKE_HOLD + 50)
    }
    observations = fill(rule, 4, starts)
    levels = take_hold_levels(rule, observations)
    assert len(levels) == MAX_TAKE_HOLD
    assert set(levels) == {(b, "/d") for b in range(MAX_TAKE_HOLD)}


def test_take_hold_is_computed_once_per_round_and_the_same_object_is_published_until_it_changes():
    rule = HorizonRule(POLICY, HORIZON)
    rate = 20 * MiB
    observations = fill(rule, 6, {(1, "/data"): (HARD + 1.5 * HORIZON * rate, rate)})
    levels = ReportLevels(POLICY, None, 250)
    reads = []

    def volumes():
        reads.append(1)
        return observations

    first = levels.current(rule, volumes)
    assert dict(first.take_hold) == take_hold_levels(rule, observations)
    assert levels.current(rule, volumes) is first and len(reads) == 1, (
        "no new round: nothing computed"
    )
    observations = fill(
        rule, 1, {(1, "/data"): (observations[0].usable_bytes - rate * CHECK, rate)}, t0=6 * CHECK
    )
    assert levels.current(rule, volumes) is first and len(reads) == 2, (
        "a new round, the same level: the same object"
    )


def test_the_body_groups_take_hold_by_node_id_and_log_dir():
    report_on = ReportOn(
        LimitLevels.of(POLICY), None, MOVE_SHARE, 250, {(2, "/b"): 7, (1, "/a"): 5, (1, "/c"): 6}
    )
    assert ReportOnModel.of(report_on).take_hold == {"1": {"/a": 5, "/c": 6}, "2": {"/b": 7}}


def test_get_quotas_carries_report_on_and_its_etag_moves_only_when_report_on_does():
    async def scenario(client, observer, clock):
        def round_(usable):
            now = clock()
            return ObservationRound(
                now, now, (1,), (VolumeObservation(1, "/a", 10 * GiB, int(usable), now),)
            )

        observer.apply_round(round_(8 * GiB))
        first = await client.get("/quotas")
        report_on = first.json()["report_on"]
        assert report_on["kind"] == "min-available-bytes" and report_on["levels"] == [100.0]
        assert report_on["take_hold"] == {} and report_on["metadata"] is None
        # the pace the service takes reports at (app/server/runtime/report_rate.py)
        assert (report_on["min_interval_ms"], report_on["burst"]) == (round(MIN_INTERVAL_SECONDS * 1000), BURST)
        clock.advance(CHECK)
        observer.apply_round(round_(8 * GiB))  # nothing moves: the same ETag
        same = await client.get("/quotas", headers={"If-None-Match": first.headers["etag"]})
        assert same.status_code == 304
        usable = 8 * GiB
        # 40 MiB/s: about 190 s from full at the end, within two horizons (240 s)
        for _ in range(8):
            clock.advance(CHECK)
            usable -= 40 * MiB * CHECK
            observer.apply_round(round_(usable))
        filling = await client.get("/quotas", headers={"If-None-Match": first.headers["etag"]})
        assert filling.status_code == 200
        level = filling.json()["report_on"]["take_hold"]["1"]["/a"]
        assert level == pytest.approx(
            100 + (HORIZON + KAFKA_QUOTA_WINDOW_SECONDS) * 40 * MiB, rel=1e-3
        )
        for _ in range(3):  # the same fill: the level is kept, and so is the ETag (no long-poll wakes)
            clock.advance(CHECK)
            usable -= 40 * MiB * CHECK
            observer.apply_round(round_(usable))
            steady = await client.get("/quotas", headers={"If-None-Match": filling.headers["etag"]})
            assert steady.status_code == 304
        for _ in range(16):  # slower, 30 MiB/s: once the fitted rate follows, a new level and ETag
            clock.advance(CHECK)
            usable -= 30 * MiB * CHECK
            observer.apply_round(round_(usable))
            slower = await client.get("/quotas", headers={"If-None-Match": filling.headers["etag"]})
            if slower.status_code == 200:
                break
        assert slower.status_code == 200 and slower.json()["factor"] == 1.0, "report_on moved the ETag"
        moved = slower.json()["report_on"]["take_hold"]["1"]["/a"]
        assert moved < level * 0.9

    clock = ManualClock()
    app = make_app(clock, ramp_horizon="PT2M", storage_check_interval="PT2S")
    run_scenario(app, clock, scenario)
