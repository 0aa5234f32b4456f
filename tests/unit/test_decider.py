"""From observation rounds to decisions: complete, incomplete and failed rounds."""

from app.policy.limits import LimitKind, StoragePolicy
from app.throttle.decider import ThrottleDecider
from app.throttle.factor import FactorSource
from app.volumes.model import ObservationRound, VolumeObservation

POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=100)


def obs(broker, usable, at, log_dir="/data"):
    return VolumeObservation(broker, log_dir, 1000, usable, at)


def round_(at, brokers, observations, missing=None, error=None):
    return ObservationRound(at, at, tuple(brokers), tuple(observations), missing or {}, error)


def decider(fallback=0.0, validity=120.0):
    return ThrottleDecider(POLICY, validity, fallback, started_at=0.0)


def test_a_complete_round_gives_an_observed_factor():
    d = decider()
    d.apply_round(round_(10, [1, 2], [obs(1, 500, 10), obs(2, 50, 10)]))
    decision, reading = d.decision(10)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "observed")
    assert [(v.broker_id, v.log_dir) for v in decision.breaching] == [(2, "/data")]
    assert decision.active_brokers == 2 and decision.active_log_dirs == 2
    assert reading.valid_until == 130


def test_a_stopped_broker_keeps_counting_until_its_observation_expires():
    d = decider(fallback=1.0)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    # broker 2 stopped: DescribeCluster lists only broker 1 from now on
    d.apply_round(round_(60, [1], [obs(1, 500, 60)]))
    decision, reading = d.decision(60)
    assert (decision.factor, decision.source) == (0.0, "observed")
    assert reading.valid_until == 120  # bounded by the oldest observation used
    d.apply_round(round_(121, [1], [obs(1, 500, 121)]))
    decision, _ = d.decision(121)
    assert (decision.factor, decision.active_log_dirs) == (1.0, 1)


def test_an_active_broker_that_does_not_answer_is_covered_by_its_cached_observation():
    d = decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 500, 0)]))
    d.apply_round(round_(60, [1, 2], [obs(1, 500, 60)], missing={2: "KafkaTimeoutError"}))
    decision, _ = d.decision(60)
    assert decision.source == "observed"
    assert decision.round.complete is False
    assert [(m.broker_id, m.reason) for m in decision.round.missing_brokers] == [(2, "KafkaTimeoutError")]


def test_an_active_broker_without_any_data_makes_the_round_a_failure():
    d = decider(fallback=0.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.apply_round(round_(60, [1, 3], [obs(1, 500, 60)], missing={3: "NodeNotReadyError"}))
    decision, _ = d.decision(60)
    assert (decision.factor, decision.source) == (1.0, "last-valid")
    assert d.decision(121)[0].source == "fallback"


def test_a_breach_seen_in_an_incomplete_round_is_not_ignored():
    d = decider(fallback=1.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.apply_round(round_(60, [1, 3], [obs(1, 50, 60)], missing={3: "NodeNotReadyError"}))
    decision, _ = d.decision(60)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "last-valid")
    assert [v.broker_id for v in decision.breaching] == [1]


def test_failed_rounds_keep_the_last_valid_factor_then_fall_back():
    d = decider(fallback=0.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    for minute in (1, 2, 3):
        d.apply_round(round_(60 * minute, [], [], error="DescribeCluster failed: KafkaTimeoutError"))
    assert [d.decision(t)[0].factor for t in (60, 120, 180)] == [1.0, 1.0, 0.0]
    decision, _ = d.decision(180)
    assert decision.source == FactorSource.FALLBACK.value
    assert decision.round.error == "DescribeCluster failed: KafkaTimeoutError"


def test_an_unreachable_cluster_at_start_gives_the_fallback_after_the_validity():
    d = decider(fallback=0.0, validity=120)
    d.apply_round(round_(5, [], [], error="DescribeCluster failed"))
    assert d.decision(120)[0].source == "initial"
    assert (d.decision(120.5)[0].source, d.decision(120.5)[0].factor) == ("fallback", 0.0)


def test_an_offline_log_dir_beside_a_healthy_one_pauses_and_is_listed_not_dropped():
    # Kafka answers an offline log dir (KAFKA_STORAGE_ERROR) with -1 totals, next to the
    # broker's healthy dirs; dropping it (strimzi/kafka-quotas-plugin) would fail open.
    d = decider(fallback=1.0)
    offline = VolumeObservation(1, "/data-1", -1, -1, 10, error="KAFKA_STORAGE_ERROR")
    d.apply_round(round_(10, [1, 2], [offline, obs(1, 900, 10, "/data-2"), obs(2, 900, 10)]))
    decision, _ = d.decision(10)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "observed")
    assert [(v.broker_id, v.log_dir, v.reason) for v in decision.breaching] == [(1, "/data-1", "log dir error KAFKA_STORAGE_ERROR")]
    assert decision.unjudged == [] and decision.active_log_dirs == 3


def test_a_halted_broker_last_seen_breaching_keeps_the_pause_until_its_observation_expires():
    d = decider(fallback=1.0, validity=120.0)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    d.apply_round(round_(5, [1, 2], [obs(1, 500, 5)], missing={2: "connection refused"}))
    d.apply_round(round_(10, [1], [obs(1, 500, 10)]))  # fenced
    assert d.decision(10)[0].state == "PAUSE"
    assert d.decision(120)[0].state == "PAUSE"
    d.apply_round(round_(121, [1], [obs(1, 500, 121)]))
    assert d.decision(121)[0].state == "OPEN", "forgotten once older than the validity duration"
