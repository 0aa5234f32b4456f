"""The nodes' reports of their data dirs as observations of the data decision, beside the admin
rounds' DescribeLogDirs (app/decision/merge.py): the newer of the two per volume, the more
conservative while a round finds them disagreeing, each with its own expiry and fenced rule; a
report between rounds changes the decision at once; snapshots and replicas carry it."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.decision.policy import LimitKind, State, StoragePolicy
from app.history.compact import Compactor, expand
from app.history.rows import round_lines, round_rows
from app.observation.model import ObservationRound, VolumeObservation
from app.observation.node_reports import NodeReport, NodeVolume
from app.server.api.schemas.decision import decision_response
from app.server.api.schemas.volumes import volumes_view
from app.server.runtime.node_intake import NodeIntake
from app.server.runtime.publisher import what_shims_act_on
from app.server.runtime.shared_state import Replica
from app.settings import ConfigurationError, load_settings

POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=100, soft_level=400)
VALIDITY = 120.0
TOTAL = 1000


def obs(broker: int, usable: int, at: float, log_dir: str = "/data", error: str | None = None) -> VolumeObservation:
    return VolumeObservation(broker, log_dir, TOTAL, usable, at, error)


def round_(at: float, brokers, observations, missing=None, fenced=()) -> ObservationRound:
    return ObservationRound(at, at, tuple(brokers), tuple(observations), missing or {}, None, tuple(fenced))


def report(node: int, usable: int, at: float, log_dir: str = "/data", holds=("data",)) -> NodeReport:
    return NodeReport(node, frozenset({"broker"}), (NodeVolume(log_dir, TOTAL, usable, frozenset(holds)),), at)


def new_decider(tolerance: float = 0.01, keep_fenced: bool = True) -> ThrottleDecider:
    return ThrottleDecider(POLICY, VALIDITY, 0.0, started_at=0.0, keep_fenced=keep_fenced, report_tolerance=tolerance)


def shown(d: ThrottleDecider, now: float) -> tuple:
    """Everything a client can read of a decider at ``now``."""
    return decision_response(d.decision(now)).model_dump(), volumes_view(d, now).model_dump()


def observed_by(d: ThrottleDecider, now: float) -> dict[tuple[int, str], tuple[str, int]]:
    return {
        (v.broker_id, v.log_dir): (v.observed_by, v.usable_bytes)
        for v in volumes_view(d, now).volumes
    }


def test_a_report_newer_than_the_round_is_the_volumes_observation_at_once_and_is_not_a_round():
    d = new_decider()
    d.apply_round(round_(10, [1, 2], [obs(1, 500, 10), obs(2, 500, 10)]))
    assert d.decision(10).state is State.OPEN
    d.record_node_report(report(1, 50, 20))
    decision = d.decision(20)
    assert (decision.state, decision.source) == (State.PAUSE, FactorSource.OBSERVED)
    assert [v.volume.observed_by for v in decision.evaluation.breaching] == ["node-report"]
    assert decision.last_success_at == 10  # a report is not a successful round
    assert observed_by(d, 20) == {(1, "/data"): ("node-report", 50), (2, "/data"): ("admin-api", 500)}
    assert decision.log_dirs == 2
    # a newer round that agrees with the report takes over
    d.apply_round(round_(30, [1, 2], [obs(1, 55, 30), obs(2, 500, 30)]))
    assert observed_by(d, 30)[(1, "/data")] == ("admin-api", 55)
    assert d.decision(30).state is State.PAUSE


def test_a_report_with_room_after_a_breach_opens_at_once_and_the_next_round_agrees():
    d = new_decider()
    d.apply_round(round_(10, [1], [obs(1, 50, 10)]))
    assert d.decision(10).state is State.PAUSE
    d.record_node_report(report(1, 995, 12))  # the filler removed: newer, and reports start no episode
    assert d.decision(12).state is State.OPEN and d.report_discrepancies == 0
    d.apply_round(round_(20, [1], [obs(1, 996, 20)]))
    assert d.decision(20).state is State.OPEN and d.report_discrepancies == 0


def test_a_round_that_disagrees_with_the_report_logs_once_counts_and_the_more_conservative_wins(caplog):
    d = new_decider()
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.record_node_report(report(1, 300, 9))  # the soft limit: factor (300-100)/(400-100)
    with caplog.at_level(logging.WARNING, logger="app.decision.merge"):
        d.apply_round(round_(10, [1], [obs(1, 500, 10)]))  # newer, but 200 bytes (20%) apart
        assert d.decision(10).factor == 2 / 3
        assert observed_by(d, 10)[(1, "/data")] == ("node-report", 300)
        d.apply_round(round_(20, [1], [obs(1, 500, 20)]))  # the same episode: not logged again
    assert d.report_discrepancies == 1 and d.decision(20).report_discrepancies == 1
    assert len([r for r in caplog.records if "disagrees" in r.getMessage()]) == 1
    # a report that agrees with the round ends the episode: the newer (the report) again
    d.record_node_report(report(1, 505, 25))
    assert d.decision(25).factor == 1.0 and observed_by(d, 25)[(1, "/data")] == ("node-report", 505)
    d.record_node_report(report(1, 250, 26))  # between rounds: newer, no episode
    assert d.report_discrepancies == 1 and d.decision(26).factor == 0.5
    d.apply_round(round_(30, [1], [obs(1, 900, 30)]))  # disagrees again: a second episode
    assert d.report_discrepancies == 2 and d.decision(30).factor == 0.5


def test_within_the_tolerance_the_newer_wins_and_a_round_seeing_an_error_overrides_a_healthy_report():
    d = new_decider(tolerance=0.05)
    d.apply_round(round_(0, [1], [obs(1, 300, 0)]))
    d.record_node_report(report(1, 340, 5))
    d.apply_round(round_(10, [1], [obs(1, 320, 10)]))  # 20 bytes apart: within 5% of 1000
    assert d.report_discrepancies == 0 and observed_by(d, 10)[(1, "/data")] == ("admin-api", 320)
    d.record_node_report(report(1, 900, 11))
    d.apply_round(round_(20, [1], [obs(1, -1, 20, error="KAFKA_STORAGE_ERROR")]))
    decision = d.decision(20)
    assert d.report_discrepancies == 1 and decision.state is State.PAUSE
    assert decision.evaluation.breaching[0].reason == "log dir error KAFKA_STORAGE_ERROR"


def test_each_source_keeps_its_own_expiry():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 500, 0)]))
    d.record_node_report(report(1, 50, 5))
    # broker 1 answers no more: its admin observation (0) is kept until 120, the report until 125
    d.apply_round(round_(60, [1, 2], [obs(2, 500, 60)], missing={1: "KafkaTimeoutError"}))
    assert d.decision(60).state is State.PAUSE
    assert d.decision(60).reading.next_change_at == 120  # the admin observation leaving the view
    assert d.decision(122).state is State.PAUSE  # the admin observation expired, the report did not
    assert observed_by(d, 122) == {(1, "/data"): ("node-report", 50), (2, "/data"): ("admin-api", 500)}
    assert d.decision(125).state is State.PAUSE  # exactly validity old: still valid
    assert d.decision(125.001).state is State.OPEN
    assert observed_by(d, 125.001) == {(2, "/data"): ("admin-api", 500)}
    [volume] = [v for v in d.volumes(60) if v.observation.broker_id == 1]
    assert volume.expires_at == 125 and volume.observation.observed_by == "node-report"


def test_a_broker_that_reported_its_volume_full_then_halted_keeps_the_cluster_paused():
    with_report, without = new_decider(), new_decider()
    for d in (with_report, without):
        d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    # healthy at the round; full a few seconds later: Kafka halts the broker before the next round
    with_report.record_node_report(report(1, 0, 3))
    assert with_report.decision(3).state is State.PAUSE
    for d in (with_report, without):
        d.apply_round(round_(60, [2], [obs(2, 900, 60)], fenced=[1]))
        d.apply_round(round_(500, [2], [obs(2, 900, 500)], fenced=[1]))  # long past the validity
    assert without.decision(500).state is State.OPEN  # the kept observation is the last healthy one
    decision = with_report.decision(500)
    assert decision.state is State.PAUSE and decision.source is FactorSource.OBSERVED
    assert [v.broker_id for v in decision.fenced] == [1]
    assert observed_by(with_report, 500)[(1, "/data")] == ("node-report", 0)
    # unregistered: both expire a validity after their last confirmation, and the cluster opens
    with_report.apply_round(round_(600, [2], [obs(2, 900, 600)]))
    assert with_report.decision(620).state is State.PAUSE
    assert with_report.decision(620.001).state is State.OPEN


def test_with_fenced_observations_expiring_the_report_expires_as_well():
    d = new_decider(keep_fenced=False)
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    d.record_node_report(report(1, 0, 3))
    d.apply_round(round_(60, [2], [obs(2, 900, 60)], fenced=[1]))
    assert d.decision(123).state is State.PAUSE and d.decision(123.001).state is State.OPEN


def test_a_report_from_the_node_intake_between_rounds_is_published_when_the_factor_moves():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    published = []

    class Publisher:  # the publisher's part the intake reads: what was last published
        now = 0.0
        acting = what_shims_act_on(d, 0)  # published after the round, as the loop does

        def publish(self):
            published.append(True)
            self.acting = what_shims_act_on(d, self.now)

    publisher = Publisher()
    loop = SimpleNamespace(save_state_soon=lambda: None)
    intake = NodeIntake(d, loop, publisher, observing=True)  # type: ignore[arg-type]

    def offer(node, usable, at):
        publisher.now = at
        return intake.offer(node, lambda now: report(node, usable, now), at)

    assert offer(1, 890, 5) is None
    assert published == []  # nothing shims act on changed
    assert offer(1, 50, 6) is None
    assert published == [True] and d.decision(6).state is State.PAUSE
    assert offer(2, 880, 7) is None
    assert published == [True]
    assert offer(1, 950, 8) is None
    assert published == [True, True] and d.decision(8).state is State.OPEN
    # What was published stays what shims act on: a report that changes nothing of it is not.
    assert offer(2, 870, 9) is None
    assert published == [True, True]


def test_a_report_observed_breach_survives_a_restart_and_a_mirror():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    d.record_node_report(report(1, 0, 3))
    d.apply_round(round_(60, [2], [obs(2, 900, 60)], fenced=[1]))
    d.record_node_report(report(2, 300, 61))  # between rounds: in the view, not yet in a round
    data = d.snapshot(61)
    restarted = new_decider()
    restarted.resume(data, 70)
    decision = restarted.decision(70)
    assert decision.state is State.PAUSE and decision.source is FactorSource.LAST_VALID
    assert observed_by(restarted, 70) == observed_by(d, 70)
    restarted.apply_round(round_(120, [2], [obs(2, 900, 120)], fenced=[1]))
    d.apply_round(round_(120, [2], [obs(2, 900, 120)], fenced=[1]))
    assert shown(restarted, 120) == shown(d, 120)
    mirror = new_decider()
    mirror.mirror(d.snapshot(121), 121)
    for at in (121, 150, 300):
        assert shown(mirror, at) == shown(d, at)


def test_a_discrepancy_episode_survives_a_snapshot():
    d = new_decider()
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.record_node_report(report(1, 300, 9))
    d.apply_round(round_(10, [1], [obs(1, 500, 10)]))
    mirror = new_decider()
    mirror.mirror(d.snapshot(10), 10)
    assert mirror.decision(10).factor == d.decision(10).factor == 2 / 3
    assert mirror.reported.disagreeing == {(1, "/data")}


def _replica(clock: list[float]) -> tuple[Replica, ThrottleDecider, SimpleNamespace]:
    decider = new_decider()
    publisher = SimpleNamespace(acting=None)
    publisher.publish = lambda: setattr(publisher, "acting", what_shims_act_on(decider, clock[0]))
    loop = SimpleNamespace(decider=decider, publisher=publisher, save_state_soon=lambda: None)
    intake = NodeIntake(decider, loop, publisher, observing=True)  # type: ignore[arg-type]
    shared = SimpleNamespace(leading=False)
    # where a report this replica takes goes: set by the test (the state topic, to the other replica)
    shared.node_report_taken = lambda r: shared.to_others(r)
    replica = Replica(shared, loop, intake, lambda: clock[0])  # type: ignore[arg-type]
    return replica, decider, shared


def test_a_report_taken_by_one_replica_changes_the_others_data_decision():
    clock = [0.0]
    leader, deciding, leader_topic = _replica(clock)
    follower, serving, _ = _replica(clock)
    deciding.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    offsets = iter(range(100))
    leader_topic.to_others = lambda r: follower.node_report(r, next(offsets))
    # the follower serves the leader's snapshot (taken before any report)
    follower.adopt(serving.mirrored(deciding.snapshot(0), 0), reports_through=-1)
    assert serving.decision(5).state is State.OPEN
    clock[0] = 5.0
    assert leader.intake.offer(1, lambda now: report(1, 0, now), 5.0) is None
    assert deciding.decision(5).state is State.PAUSE
    assert serving.decision(5).state is State.PAUSE  # taken by the leader, counted on the follower
    assert observed_by(serving, 5)[(1, "/data")] == ("node-report", 0)
    # a snapshot taken before that report (reports-through -1) gets it re-applied over it
    follower.adopt(serving.mirrored(new_decider_snapshot_without_report(), 6), reports_through=-1)
    assert serving.decision(6).state is State.PAUSE


def new_decider_snapshot_without_report() -> bytes:
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    return d.snapshot(0)


def test_history_rows_say_which_source_each_observation_came_from():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    d.record_node_report(report(1, 0, 3))
    round_b = round_(60, [2], [obs(2, 900, 60)], fenced=[1])
    d.apply_round(round_b)
    decision = d.decision(60).frozen()
    rows = round_rows(round_b, decision, 60.0)
    assert {(r["broker_id"], r["observed_by"]) for r in rows} == {(1, "node-report"), (2, "admin-api")}
    lines = round_lines(round_b, decision, 60.0)
    import json

    assert [json.loads(line) for line in lines.splitlines()] == rows
    compactor = Compactor()
    compact = compactor.rows(round_b, decision, 60.0)
    assert list(expand(compact)) == rows


MINIMAL = {
    "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": "localhost:9092",
    "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_BYTES": "1000000000",
}
TOKEN = "THROTTLE_SERVICE_NODE_TOKEN"
TOLERANCE = "THROTTLE_SERVICE_STORAGE_NODE_REPORT_TOLERANCE_RATIO"


def _problems(environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigurationError) as caught:
        load_settings(environ=environ)
    return [str(p) for p in caught.value.problems]


def test_the_tolerance_setting_defaults_to_one_percent_and_is_refused_out_of_range_or_without_the_node_token():
    assert load_settings(environ=MINIMAL).storage_node_report_tolerance_ratio == 0.01
    given = load_settings(environ={**MINIMAL, TOKEN: "n" * 20, TOLERANCE: "0.05"})
    assert given.storage_node_report_tolerance_ratio == 0.05
    [line] = _problems({**MINIMAL, TOKEN: "n" * 20, TOLERANCE: "1.5"})
    assert line.startswith("throttle.service.storage.node.report.tolerance.ratio='1.5'") and "[0.0, 1.0]" in line
    [line] = _problems({**MINIMAL, TOLERANCE: "0.05"})
    assert line.startswith("throttle.service.storage.node.report.tolerance.ratio='0.05'")
    assert "only with throttle.service.node.token set" in line


def test_the_discrepancy_episodes_are_a_metric():
    from app.server.runtime.metrics import DecisionCollector

    d = new_decider()
    d.apply_round(round_(0, [1], [obs(1, 500, 0)]))
    d.record_node_report(report(1, 300, 9))
    d.apply_round(round_(10, [1], [obs(1, 500, 10)]))
    families = {f.name: f for f in DecisionCollector(lambda: d.decision(10)).collect()}
    [sample] = [s for s in families["kafka_throttle_node_report_discrepancies"].samples if s.name.endswith("_total")]
    assert sample.value == 1


def test_a_healthy_report_outliving_a_missing_brokers_kept_observation_stays_in_the_view():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 500, 0), obs(2, 500, 0)]))
    d.record_node_report(report(1, 600, 5))
    d.apply_round(round_(60, [1, 2], [obs(2, 500, 60)], missing={1: "KafkaTimeoutError"}))
    for at in (60, 121, 125):
        assert d.decision(at).log_dirs == 2
        assert observed_by(d, at) == {(1, "/data"): ("node-report", 600), (2, "/data"): ("admin-api", 500)}
    assert d.decision(125.001).log_dirs == 1


def test_what_if_judges_the_reports_by_the_candidate_limits_and_leaves_the_decider_as_it_was():
    d = new_decider()
    d.apply_round(round_(0, [1, 2], [obs(1, 900, 0), obs(2, 900, 0)]))
    d.record_node_report(report(1, 300, 5))  # under the soft limit (400): ramping
    assert d.decision(5).factor == 2 / 3
    twin = d.judged_by(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=350))
    decision = twin.decision(5)
    assert decision.state is State.PAUSE
    assert [v.volume.observed_by for v in decision.evaluation.breaching] == ["node-report"]
    assert d.decision(5).factor == 2 / 3
    d.record_node_report(report(1, 950, 6))
    assert d.decision(6).factor == 1.0


def test_a_plainly_ok_report_is_read_by_the_steps_only_while_the_admin_api_has_not_observed_its_volume():
    """A data dir with room that DescribeLogDirs has not observed (a new dir, the admin poll not
    yet run) is in the view from its report, and among the entries a step's evaluation reads;
    once a round observes it, an ok report of it is not, and the view shows the newer of the two."""
    d = new_decider()
    d.apply_round(round_(0.0, [1], [obs(1, 900, 0.0)]))
    d.record_node_report(report(1, 800, 1.0, log_dir="/new"))
    assert observed_by(d, 1.0)[(1, "/new")] == ("node-report", 800)
    assert set(d.reported.notable) == {(1, "/new")}
    version = d.reported.notable_version
    d.record_node_report(report(1, 790, 2.0, log_dir="/new"))
    assert d.reported.notable_version > version  # what the steps read has changed
    d.apply_round(round_(3.0, [1], [obs(1, 900, 3.0), obs(1, 780, 3.0, log_dir="/new")]))
    d.record_node_report(report(1, 770, 4.0, log_dir="/new"))
    assert set(d.reported.notable) == set()
    assert observed_by(d, 4.0)[(1, "/new")] == ("node-report", 770)


@pytest.mark.parametrize(
    "policy",
    [POLICY, StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_level=0.1, soft_level=0.4, hysteresis=0.05)],
    ids=["bytes", "ratio"],
)
def test_a_report_s_data_dirs_are_judged_as_the_policy_judges_their_observations(policy):
    """The overlay decides the plainly ok ones inline: the status of every entry is the
    policy's verdict on the same observation, whatever the limit's unit (empty and full volumes,
    and right at the levels, included)."""
    from app.decision.policy import judge_volume

    d = ThrottleDecider(policy, VALIDITY, 0.0, started_at=0.0)
    cases = [(1000, u) for u in (0, 1, 99, 100, 101, 149, 150, 151, 399, 400, 401, 450, 451, 999, 1000)] + [(0, 0), (10**18, 10**17)]
    volumes = tuple(NodeVolume(f"/d{i}", total, usable, frozenset({"data"})) for i, (total, usable) in enumerate(cases))
    d.apply_round(round_(0.0, [1], [VolumeObservation(1, v.log_dir, v.total_bytes, v.usable_bytes, 0.0) for v in volumes[::2]]))
    d.record_node_report(NodeReport(1, frozenset({"broker"}), volumes, 1.0))
    for volume in volumes:
        expected = judge_volume(policy, VolumeObservation(1, volume.log_dir, volume.total_bytes, volume.usable_bytes, 1.0)).status
        assert d.reported.entries[(1, volume.log_dir)].status is expected, volume
