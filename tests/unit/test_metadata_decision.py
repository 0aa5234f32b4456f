"""The metadata volumes' decision (app/decision/metadata.py, app/observation/node_reports.py):
pure, to the instant, with a manual time line."""

from __future__ import annotations

from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import ObservationRound
from app.observation.node_reports import NodeReport, NodeVolume

MiB = 1024 * 1024
DATA_POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 8 * MiB)
METADATA_POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.1, 0.3, hysteresis=0.05)
VALIDITY = 120.0
T0 = 1_800_000_000.0


def decider(keep_fenced: bool = True, policy: StoragePolicy | None = METADATA_POLICY, fallback: float = 1.0) -> ThrottleDecider:
    return ThrottleDecider(DATA_POLICY, VALIDITY, fallback, started_at=T0, keep_fenced=keep_fenced, metadata_policy=policy)


def report(node: int, at: float, usable: int, roles=("controller",), holds=("metadata",), total: int = 100 * MiB) -> NodeReport:
    return NodeReport(node, frozenset(roles), (NodeVolume("/meta", total, usable, frozenset(holds)),), at)


def test_the_mutation_factor_is_the_minimum_over_metadata_volumes_ramping_between_soft_and_hard():
    d = decider()
    d.record_node_report(report(1000, T0, 50 * MiB))
    assert d.reading(T0).mutation_factor == 1.0
    d.record_node_report(report(1001, T0, 20 * MiB))  # ratio 0.2: halfway between 0.1 and 0.3
    assert abs(d.reading(T0).mutation_factor - 0.5) < 1e-9
    d.record_node_report(report(1002, T0, 10 * MiB))
    assert d.reading(T0).mutation_factor == 0.0
    assert d.reading(T0).factor == 1.0  # none of them holds data


def test_hysteresis_holds_a_breaching_metadata_volume_until_it_is_above_hard_plus_hysteresis():
    d = decider()
    d.record_node_report(report(1000, T0, 10 * MiB))
    d.record_node_report(report(1000, T0 + 5, 14 * MiB))  # 0.14 < 0.1 + 0.05: still breaching
    assert d.reading(T0 + 5).mutation_factor == 0.0
    d.record_node_report(report(1000, T0 + 10, 16 * MiB))
    assert d.reading(T0 + 10).mutation_factor > 0.0


def test_a_shared_data_and_metadata_volume_lowers_the_cluster_factor_and_a_data_only_one_is_ignored():
    d = decider()
    d.record_node_report(report(2, T0, 0, roles=("broker",), holds=("data",)))
    assert (d.reading(T0).factor, d.reading(T0).mutation_factor) == (1.0, 1.0)
    d.record_node_report(report(3, T0, 5 * MiB, roles=("broker", "controller"), holds=("data", "metadata")))
    assert (d.reading(T0).factor, d.reading(T0).mutation_factor) == (0.0, 0.0)
    assert d.decision(T0).state.value == "PAUSE"


def test_a_controller_that_stops_reporting_is_forgotten_one_validity_duration_after_its_last_report():
    d = decider()
    d.record_node_report(report(1000, T0, 5 * MiB))
    assert d.reading(T0 + VALIDITY).mutation_factor == 0.0
    assert d.reading(T0 + VALIDITY).next_change_at == T0 + VALIDITY
    assert d.reading(T0 + VALIDITY + 0.001).mutation_factor == 1.0


def test_a_fenced_broker_keeps_its_last_metadata_report_while_rounds_list_it_fenced_with_keep():
    for keep, expected in ((True, 0.0), (False, 1.0)):
        d = decider(keep_fenced=keep)
        d.record_node_report(report(3, T0, 5 * MiB, roles=("broker", "controller")))
        d.record_node_report(report(1000, T0, 5 * MiB))  # controller-only: never in DescribeCluster
        at = T0 + VALIDITY - 1
        d.apply_round(ObservationRound(at - 0.1, at, active_brokers=(1, 2), fenced_brokers=(3,)))
        later = T0 + VALIDITY + 10
        step = d.metadata.at(later)
        assert [v.verdict.volume.broker_id for v in step.volumes] == ([3] if keep else [])
        assert d.reading(later).mutation_factor == expected


def test_without_metadata_limits_reports_are_listed_and_every_factor_stays_1():
    d = decider(policy=None)
    d.record_node_report(report(3, T0, 0, roles=("broker", "controller"), holds=("data", "metadata")))
    reading = d.reading(T0)
    assert (reading.factor, reading.mutation_factor) == (1.0, 1.0)
    assert [v.verdict.volume.broker_id for v in d.metadata.at(T0).volumes] == [3]
    assert d.metadata.at(T0 + 10 * VALIDITY).mutation_factor == 1.0


def test_with_no_report_in_view_the_mutation_factor_is_initial_then_the_fallback_and_produce_is_untouched():
    d = decider(fallback=0.0)
    assert d.metadata.at(T0 + VALIDITY).source is FactorSource.INITIAL
    late = T0 + VALIDITY + 0.001
    assert d.metadata.at(late).source is FactorSource.FALLBACK
    assert (d.reading(late).mutation_factor, d.metadata.at(late).data_factor) == (0.0, 1.0)
    d.record_node_report(report(1000, late, 90 * MiB))
    assert d.metadata.at(late).source is FactorSource.OBSERVED and d.reading(late).mutation_factor == 1.0


def test_a_frozen_step_lists_the_metadata_volumes_of_its_moment_whatever_the_watch_takes_after():
    d = decider()
    d.record_node_report(report(1000, T0, 50 * MiB))
    d.record_node_report(report(1001, T0, 20 * MiB, roles=("broker",)))
    d.apply_round(ObservationRound(T0 + 1, T0 + 1, (), fenced_brokers=(1001,)))  # 1001 kept while fenced
    frozen = d.decision(T0 + 1).metadata.frozen()
    for node in range(1002, 1100):  # reports come and go after the step was taken
        d.record_node_report(report(node, T0 + 2, 50 * MiB))
    d.apply_round(ObservationRound(T0 + VALIDITY + 10, T0 + VALIDITY + 10, (2,)))  # 1001 unfenced, the early ones expire
    d.metadata.evict_expired(T0 + VALIDITY + 10)
    volumes = frozen.volumes
    assert [v.verdict.volume.broker_id for v in volumes] == [1000, 1001]
    assert volumes[1].expires_at == T0 + 1 + VALIDITY  # as confirmed when the step was taken
    assert frozen.frozen() is frozen


def test_what_shims_act_on_of_the_metadata_step_is_that_of_the_full_step_at_every_instant():
    """``acting_at`` (asked at every node report) gives the full step's factors, source and
    listed volumes: before any report (initial, then fallback), with reports ok, ramping and
    breaching, after they expire, and without metadata limits."""

    def projected(watch, now):
        step = watch.at(now)
        listed = tuple((m.verdict.volume.key, m.verdict.reason) for m in step.listed)
        return step.mutation_factor, step.data_factor, step.source, listed

    sources = set()
    for d, reports in [
        (decider(fallback=0.25), [report(1000, T0 + 200, 90 * MiB), report(1001, T0 + 210, 20 * MiB), report(3, T0 + 220, 5 * MiB, roles=("broker", "controller"), holds=("data", "metadata"))]),
        (decider(policy=None), [report(3, T0 + 10, 0, roles=("broker", "controller"), holds=("data", "metadata"))]),
        (decider(), [report(1000, T0 + 5, 15 * MiB), report(1000, T0 + 50, 80 * MiB)]),
    ]:
        pending = sorted(reports, key=lambda r: r.received_at)
        for second in range(0, 700, 3):
            now = T0 + second
            while pending and pending[0].received_at <= now:
                d.record_node_report(pending.pop(0))
            acting = d.metadata.acting_at(now)
            assert acting == projected(d.metadata, now), second
            sources.add(acting[2])
    assert sources == {FactorSource.INITIAL, FactorSource.FALLBACK, FactorSource.OBSERVED}


def test_a_reports_metadata_volumes_are_judged_as_the_storage_policy_judges_each_with_the_nodes_previous_breach():
    """The watch decides a plainly ok volume inline and builds its records without their
    constructors: every verdict, factor and listing is still the policy's own, for either kind of
    limit, with and without metadata limits, a volume's hysteresis following its own log dir."""
    import random

    from app.decision.metadata import MetadataWatch
    from app.decision.policy import VolumeStatus, VolumeVerdict, judge_volume
    from app.observation.model import reported_observation
    from app.observation.node_reports import NodeReportBook

    draw = random.Random(43)
    policies = [METADATA_POLICY, StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 10 * MiB, 30 * MiB, hysteresis=5 * MiB), StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.1), None]
    for policy in policies:
        watch = MetadataWatch(policy, NodeReportBook(VALIDITY, keep_fenced=True), 1.0, T0)
        breached: dict[tuple[int, str], bool] = {}
        for n in range(400):
            node, at = draw.randrange(3), T0 + n
            volumes = tuple(
                NodeVolume(log_dir, total, draw.randrange(-1, total + 1) if draw.random() < 0.05 else draw.randrange(0, total + 1), frozenset(holds))
                for log_dir, holds in (("/meta", ("metadata",)), ("/shared", ("data", "metadata")), ("/data", ("data",)))
                for total in [draw.choice([0, 100 * MiB, 60 * MiB])]
                if draw.random() < 0.8
            )
            watch.record(NodeReport(node, frozenset({"broker", "controller"}), volumes, at))
            judged = watch._judged[node]
            expected = []
            for v in volumes:
                if "metadata" not in v.holds:
                    continue
                observation = reported_observation(node, v.log_dir, v.total_bytes, v.usable_bytes, at)
                expected.append(VolumeVerdict(observation, VolumeStatus.OK, 1.0, "") if policy is None else judge_volume(policy, observation, breached.get((node, v.log_dir), False)))
            breached = {key: was for key, was in breached.items() if key[0] != node}  # this report's alone
            for verdict in expected:
                breached[(node, verdict.volume.log_dir)] = verdict.status is VolumeStatus.BREACHING
            assert judged.verdicts == tuple(expected)
            assert judged.entries == tuple(v for v in volumes if "metadata" in v.holds)
            assert judged.mutation_factor == min([1.0, *(v.factor for v in expected)])
            assert judged.data_factor == min([1.0, *(v.factor for v, e in zip(expected, judged.entries) if "data" in e.holds)])
            assert (node in watch._listed) is (judged.mutation_factor < 1.0)
