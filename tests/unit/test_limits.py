"""The storage policy: hard limit, soft ramp, hysteresis, cluster minimum (pure logic)."""

import pytest

from app.decision.policy import LimitKind, State, StoragePolicy, VolumeStatus, evaluate, judge_volume, policy_from_levels
from app.observation.model import VolumeObservation

MiB = 1024 * 1024


def volume(usable: int, total: int = 64 * MiB, broker: int = 1, log_dir: str = "/data", error: str | None = None) -> VolumeObservation:
    return VolumeObservation(broker, log_dir, total, usable, observed_at=0.0, error=error)


BYTES = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=8 * MiB)
RATIO = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_level=0.25)


@pytest.mark.parametrize(
    ("usable", "status", "factor"),
    [
        (8 * MiB, VolumeStatus.BREACHING, 0.0),  # usable == level breaches (<=)
        (8 * MiB - 1, VolumeStatus.BREACHING, 0.0),
        (8 * MiB + 1, VolumeStatus.OK, 1.0),
        (0, VolumeStatus.BREACHING, 0.0),
    ],
)
def test_bytes_hard_limit_is_breached_at_or_below_the_level(usable, status, factor):
    verdict = judge_volume(BYTES, volume(usable))
    assert (verdict.status, verdict.factor) == (status, factor)


def test_ratio_exactly_at_the_level_breaches():
    assert judge_volume(RATIO, volume(16 * MiB, 64 * MiB)).status is VolumeStatus.BREACHING  # 0.25 == 0.25
    assert judge_volume(RATIO, volume(16 * MiB + 1, 64 * MiB)).status is VolumeStatus.OK
    assert judge_volume(RATIO, volume(16 * MiB - 1, 64 * MiB)).status is VolumeStatus.BREACHING


def test_zero_capacity_counts_as_ratio_zero_and_breaches():
    v = volume(0, total=0)
    assert v.available_ratio == 0.0
    assert judge_volume(RATIO, v).status is VolumeStatus.BREACHING
    assert judge_volume(StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.0), v).status is VolumeStatus.BREACHING


def test_minus_one_totals_are_unjudged_counted_and_do_not_lower_the_factor():
    unknown = volume(-1, total=-1, broker=7)
    evaluation = evaluate(BYTES, [unknown, volume(60 * MiB)])
    assert evaluation.factor == 1.0
    assert [v.volume.broker_id for v in evaluation.unjudged] == [7]
    assert evaluation.volume_count == 2


def test_offline_log_dir_counts_as_breaching_even_with_space_left():
    offline = volume(60 * MiB, error="KAFKA_STORAGE_ERROR")
    evaluation = evaluate(BYTES, [offline])
    assert evaluation.factor == 0.0
    assert State.of(evaluation.factor) is State.PAUSE
    assert evaluation.breaching[0].reason == "log dir error KAFKA_STORAGE_ERROR"


def test_offline_log_dir_without_totals_still_breaches():
    assert judge_volume(BYTES, volume(-1, total=-1, error="KAFKA_STORAGE_ERROR")).status is VolumeStatus.BREACHING


SOFT = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=8 * MiB, soft_level=24 * MiB)


@pytest.mark.parametrize(
    ("usable", "factor", "status"),
    [
        (16 * MiB, 0.5, VolumeStatus.RAMPING),  # halfway between soft and hard
        (12 * MiB, 0.25, VolumeStatus.RAMPING),
        (20 * MiB, 0.75, VolumeStatus.RAMPING),
        (24 * MiB, 1.0, VolumeStatus.RAMPING),  # at the soft level the ramp starts at 1.0
        (24 * MiB + 1, 1.0, VolumeStatus.OK),
        (8 * MiB, 0.0, VolumeStatus.BREACHING),
    ],
)
def test_soft_limit_ramps_linearly_from_one_to_zero(usable, factor, status):
    verdict = judge_volume(SOFT, volume(usable))
    assert verdict.factor == pytest.approx(factor)
    assert verdict.status is status


def test_soft_ramp_with_ratio_limits():
    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_level=0.1, soft_level=0.3)
    assert judge_volume(policy, volume(20, total=100)).factor == pytest.approx(0.5)


def test_cluster_factor_is_the_minimum_over_volumes_and_names_them():
    evaluation = evaluate(SOFT, [volume(20 * MiB, broker=1), volume(12 * MiB, broker=2), volume(60 * MiB, broker=3)])
    assert evaluation.factor == pytest.approx(0.25)
    assert State.of(evaluation.factor) is State.THROTTLE
    assert [v.volume.broker_id for v in evaluation.ramping] == [1, 2]
    assert evaluation.breaching == ()


def test_one_breaching_volume_pauses_the_whole_cluster():
    evaluation = evaluate(SOFT, [volume(60 * MiB, broker=1), volume(8 * MiB, broker=2, log_dir="/d2")])
    assert evaluation.factor == 0.0
    assert State.of(evaluation.factor) is State.PAUSE
    assert [(v.volume.broker_id, v.volume.log_dir) for v in evaluation.breaching] == [(2, "/d2")]


HYST = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=8 * MiB, hysteresis=2 * MiB)


def test_hysteresis_keeps_a_breaching_volume_breaching_until_above_level_plus_hysteresis():
    first = evaluate(HYST, [volume(8 * MiB)])
    assert first.factor == 0.0
    hovering = evaluate(HYST, [volume(9 * MiB)], first.breaching_keys)
    assert hovering.factor == 0.0 and hovering.breaching[0].reason == "hard limit (hysteresis)"
    at_edge = evaluate(HYST, [volume(10 * MiB)], hovering.breaching_keys)
    assert at_edge.factor == 0.0
    released = evaluate(HYST, [volume(10 * MiB + 1)], at_edge.breaching_keys)
    assert released.factor == 1.0 and released.breaching_keys == frozenset()


def test_hysteresis_does_not_apply_to_a_volume_that_never_breached():
    assert evaluate(HYST, [volume(9 * MiB)]).factor == 1.0


def test_state_of_factor():
    assert State.of(1.0) is State.OPEN
    assert State.of(0.0) is State.PAUSE
    assert State.of(0.3) is State.THROTTLE


def test_soft_limit_must_be_strictly_looser():
    with pytest.raises(ValueError):
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=10, soft_level=10)


def test_policy_from_levels_picks_the_configured_kind():
    assert policy_from_levels(100, None, 200, None, 5, None) == StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 100.0, 200.0, 5.0)
    assert policy_from_levels(None, 0.1).kind is LimitKind.MIN_AVAILABLE_RATIO
