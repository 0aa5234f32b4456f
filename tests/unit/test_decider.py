"""From observation rounds to decisions: complete, incomplete and failed rounds."""

from app.decision.policy import LimitKind, StoragePolicy
from app.server.api.schemas.decision import decision_response
from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.observation.model import ObservationRound, VolumeObservation

POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=100)


def obs(broker, usable, at, log_dir="/data"):
    return VolumeObservation(broker, log_dir, 1000, usable, at)


def round_(at, brokers, observations, missing=None, error=None):
    return ObservationRound(at, at, tuple(brokers), tuple(observations), missing or {}, error)


def decide(d: ThrottleDecider, now: float):
    """The decision at ``now`` as /throttle-factor serves it, and the factor reading behind it."""
    decision = d.decision(now)
    return decision_response(decision), decision.reading


def decider(fallback=0.0, validity=120.0):
    return ThrottleDecider(POLICY, validity, fallback, started_at=0.0)


def test_a_complete_round_gives_an_observed_factor():
    d = decider()
    d.apply_round(round_(10, [1, 2], [obs(1, 500, 10), obs(2, 50, 10)]))
    decision, reading = decide(d, 10)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "observed")
    assert [(v.broker_id, v.log_dir) for v in decision.breaching] == [(2, "/data")]
    assert decision.active_brokers == 2 and decision.active_log_dirs == 2
    assert reading.valid_until == 130


def test_a_stopped_broker_keeps_counting_until_its_observation_expires():
    d = decider(fallback=1.0)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    # broker 2 stopped: DescribeCluster lists only broker 1 from now on
    d.apply_round(round_(60, [1], [obs(1, 500, 60)]))
    decision, reading = decide(d, 60)
    assert (decision.factor, decision.source) == (0.0, "observed")
    assert reading.valid_until == 120  # bounded by the oldest observation used
    d.apply_round(round_(121, [1], [obs(1, 500, 121)]))
    decision, _ = decide(d, 121)
    assert (decision.factor, decision.active_log_dirs) == (1.0, 1)


def test_an_active_broker_that_does_not_answer_is_covered_by_its_cached_observation():
    d = decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 500, 0)]))
    d.apply_round(round_(60, [1, 2], [obs(1, 500, 60)], missing={2: "KafkaTimeoutError"}))
    decision, _ = decide(d, 60)
    assert decision.source == "observed"
    assert decision.round.complete is False
    assert [(m.broker_id, m.reason) for m in decision.round.missing_brokers] == [(2, "KafkaTimeoutError")]


def test_an_active_broker_without_any_data_makes_the_round_a_failure():
    d = decider(fallback=0.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.apply_round(round_(60, [1, 3], [obs(1, 500, 60)], missing={3: "NodeNotReadyError"}))
    decision, _ = decide(d, 60)
    assert (decision.factor, decision.source) == (1.0, "last-valid")
    assert decide(d, 121)[0].source == "fallback"


def test_a_breach_seen_in_an_incomplete_round_is_not_ignored():
    d = decider(fallback=1.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.apply_round(round_(60, [1, 3], [obs(1, 50, 60)], missing={3: "NodeNotReadyError"}))
    decision, _ = decide(d, 60)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "last-valid")
    assert [v.broker_id for v in decision.breaching] == [1]


def test_failed_rounds_keep_the_last_valid_factor_then_fall_back():
    d = decider(fallback=0.0)
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    for minute in (1, 2, 3):
        d.apply_round(round_(60 * minute, [], [], error="DescribeCluster failed: KafkaTimeoutError"))
    assert [decide(d, t)[0].factor for t in (60, 120, 180)] == [1.0, 1.0, 0.0]
    decision, _ = decide(d, 180)
    assert decision.source == FactorSource.FALLBACK.value
    assert decision.round.error == "DescribeCluster failed: KafkaTimeoutError"


def test_an_unreachable_cluster_at_start_gives_the_fallback_after_the_validity():
    d = decider(fallback=0.0, validity=120)
    d.apply_round(round_(5, [], [], error="DescribeCluster failed"))
    assert decide(d, 120)[0].source == "initial"
    assert (decide(d, 120.5)[0].source, decide(d, 120.5)[0].factor) == ("fallback", 0.0)


def test_an_offline_log_dir_beside_a_healthy_one_pauses_and_is_listed_not_dropped():
    # Kafka answers an offline log dir (KAFKA_STORAGE_ERROR) with -1 totals, next to the
    # broker's healthy dirs; dropping it (strimzi/kafka-quotas-plugin) would fail open.
    d = decider(fallback=1.0)
    offline = VolumeObservation(1, "/data-1", -1, -1, 10, error="KAFKA_STORAGE_ERROR")
    d.apply_round(round_(10, [1, 2], [offline, obs(1, 900, 10, "/data-2"), obs(2, 900, 10)]))
    decision, _ = decide(d, 10)
    assert (decision.factor, decision.state, decision.source) == (0.0, "PAUSE", "observed")
    assert [(v.broker_id, v.log_dir, v.reason) for v in decision.breaching] == [(1, "/data-1", "log dir error KAFKA_STORAGE_ERROR")]
    assert decision.unjudged == [] and decision.active_log_dirs == 3


def test_a_halted_broker_last_seen_breaching_keeps_the_pause_until_its_observation_expires():
    d = decider(fallback=1.0, validity=120.0)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    d.apply_round(round_(5, [1, 2], [obs(1, 500, 5)], missing={2: "connection refused"}))
    d.apply_round(round_(10, [1], [obs(1, 500, 10)]))  # fenced
    assert decide(d, 10)[0].state == "PAUSE"
    assert decide(d, 120)[0].state == "PAUSE"
    d.apply_round(round_(121, [1], [obs(1, 500, 121)]))
    assert decide(d, 121)[0].state == "OPEN", "forgotten once older than the validity duration"


def fenced_round(at, brokers, observations, fenced, missing=None, error=None):
    return ObservationRound(at, at, tuple(brokers), tuple(observations), missing or {}, error, fenced_brokers=tuple(fenced))


def test_a_stale_observation_leaves_the_view_at_the_instant_it_expires_never_a_fallback():
    # Broker 2 stopped at 0.5 s and is no longer listed; broker 1 answers every second. At
    # 20.000 s broker 2's observation is exactly validity old (still valid); one millisecond
    # later the view holds broker 1 alone, the factor is re-judged from it and stays observed.
    d = ThrottleDecider(POLICY, 20.0, 0.0, started_at=0.0, keep_fenced=False)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 150, 0)]))
    for second in range(1, 21):
        d.apply_round(round_(second, [1], [obs(1, 500, second)]))
    decision, reading = decide(d, 20.0)
    assert (decision.source, decision.active_log_dirs, reading.next_change_at) == ("observed", 2, 20.0)
    # The factor after broker 2 leaves the view is the same: a client may hold it until 40 s.
    assert reading.valid_until == 40.0
    for now in (20.001, 20.5, 20.999):
        decision, reading = decide(d, now)
        assert (decision.source, decision.factor, decision.active_log_dirs) == ("observed", 1.0, 1), now
        assert reading.valid_until == 40.0 and reading.computed_at == 20.0


def test_valid_until_is_the_end_of_the_run_of_steps_with_the_same_factor():
    # A shim holding the factor until the stale observation's expiry would fall back there,
    # though the view after it keeps the same factor; a change of factor still ends it.
    d = ThrottleDecider(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=100, soft_level=300), 20.0, 0.0, started_at=0.0, keep_fenced=False)
    d.apply_round(round_(0, [1, 2, 3], [obs(1, 500, 0), obs(2, 500, 0), obs(3, 200, 0)]))
    d.apply_round(round_(5, [1, 3], [obs(1, 500, 5), obs(3, 200, 5)]))  # broker 2 stopped
    d.apply_round(round_(10, [1], [obs(1, 500, 10)]))  # broker 3 stopped
    _, reading = decide(d, 10.0)
    assert (reading.factor, reading.next_change_at, reading.valid_until) == (0.5, 20.0, 25.0)
    _, reading = decide(d, 20.5)
    assert (reading.factor, reading.valid_until) == (0.5, 25.0)
    _, reading = decide(d, 25.5)
    assert (reading.factor, reading.valid_until) == (1.0, 30.0)


def test_an_expiring_breach_re_judges_the_factor_from_the_volumes_left():
    d = ThrottleDecider(POLICY, 20.0, 1.0, started_at=0.0, keep_fenced=False)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    d.apply_round(round_(10, [1], [obs(1, 150, 10)]))  # broker 2 no longer listed
    assert decide(d, 20.0)[0].state == "PAUSE"
    decision, _ = decide(d, 20.001)
    assert (decision.state, decision.source, decision.breaching) == ("OPEN", "observed", [])


def test_with_keep_a_fenced_broker_holds_its_breach_for_as_long_as_it_is_registered():
    d = ThrottleDecider(POLICY, 5.0, 1.0, started_at=0.0, keep_fenced=True)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    for second in range(1, 1000):  # broker 2 halted by its full disk: registered, fenced
        d.apply_round(fenced_round(second, [1], [obs(1, 500, second)], fenced=[2]))
    decision, _ = decide(d, 999.5)
    assert (decision.state, decision.source) == ("PAUSE", "observed")
    assert [(v.broker_id, v.broker_fenced, v.observed_at) for v in decision.breaching] == [(2, True, "1970-01-01T00:00:00.000Z")]
    assert [(f.broker_id, f.log_dirs) for f in decision.fenced_brokers] == [(2, 1)]
    # Unregistered at 1000 s: forgotten a validity after the last round that listed it (999 s).
    d.apply_round(round_(1000, [1], [obs(1, 500, 1000)]))
    assert decide(d, 1004.0)[0].state == "PAUSE"
    decision, _ = decide(d, 1004.001)
    assert (decision.state, decision.fenced_brokers, decision.active_log_dirs) == ("OPEN", [], 1)


def test_with_expire_a_fenced_broker_is_forgotten_after_the_validity_duration():
    d = ThrottleDecider(POLICY, 5.0, 1.0, started_at=0.0, keep_fenced=False)
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 50, 0)]))
    for second in range(1, 10):
        d.apply_round(fenced_round(second, [1], [obs(1, 500, second)], fenced=[2]))
        assert decide(d, second)[0].state == ("PAUSE" if second <= 5 else "OPEN"), second


def test_every_broker_fenced_keeps_the_pause_past_the_validity_even_with_an_open_fallback():
    d = ThrottleDecider(POLICY, 5.0, 1.0, started_at=0.0, keep_fenced=True)
    d.apply_round(round_(0, [1], [obs(1, 50, 0)]))
    for second in range(1, 60):
        d.apply_round(fenced_round(second, [], [], fenced=[1], error="DescribeCluster listed no active broker"))
    decision, _ = decide(d, 59.5)
    assert (decision.factor, decision.state) == (0.0, "PAUSE")
    assert decision.source in ("last-valid", "fallback")
