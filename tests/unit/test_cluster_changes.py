"""One log line per change of the cluster, never one per round, each saying what happened."""

import logging

from app.observation.changes import ClusterChanges
from app.observation.model import ObservationRound, VolumeObservation


def obs(broker, at, log_dir="/data", error=None):
    return VolumeObservation(broker, log_dir, -1 if error else 1000, -1 if error else 500, at, error)


def round_(at, active, observations=(), fenced=(), missing=None, error=None):
    return ObservationRound(at, at, tuple(active), tuple(observations), missing or {}, error, fenced_brokers=tuple(fenced))


def lines(changes: ClusterChanges, *rounds: ObservationRound, cached=(1, 2, 3)) -> list[str]:
    out = []
    for r in rounds:
        out += [c.message for c in changes.after_round(r, [], cached)]
    return out


def test_an_offline_log_dir_is_said_once_however_many_rounds_it_lasts_and_once_when_back():
    changes = ClusterChanges(300, keep_fenced=True)
    healthy = [obs(1, 0, "/a"), obs(1, 0, "/b")]
    offline = [obs(1, 0, "/a", error="KAFKA_STORAGE_ERROR"), obs(1, 0, "/b")]
    said = lines(changes, round_(0, [1], healthy), *[round_(t, [1], offline) for t in range(1, 50)], round_(50, [1], healthy))
    assert said == [
        "broker 1 log dir /a offline: KAFKA_STORAGE_ERROR (counts as breaching the hard limit until the broker reports it back)",
        "broker 1 log dir /a back online",
    ]


def test_a_log_dir_offline_at_start_up_is_said_once():
    changes = ClusterChanges(300, keep_fenced=True)
    offline = [obs(1, 0, "/a", error="KAFKA_STORAGE_ERROR")]
    assert len(lines(changes, *[round_(t, [1], offline) for t in range(5)])) == 1


def test_a_broker_halted_by_a_full_disk_is_said_fenced_never_answering_again():
    changes = ClusterChanges(300, keep_fenced=True)
    said = lines(
        changes,
        round_(0, [1, 2], [obs(1, 0), obs(2, 0)]),
        round_(1, [1, 2], [obs(1, 1)], missing={2: "KafkaConnectionError: refused"}),
        *[round_(t, [1], [obs(1, t)], fenced=[2]) for t in range(2, 40)],
    )
    assert said == [
        "broker 2 did not answer DescribeLogDirs: KafkaConnectionError: refused; its last observation stays in the view until older than the validity duration",
        "broker 2 fenced (stopped, or halted by a failed disk): its last observation stays in the view for as long as it stays registered",
    ]


def test_fencing_unfencing_and_unregistering_are_said_once_each():
    changes = ClusterChanges(20, keep_fenced=False)
    said = lines(
        changes,
        round_(0, [1, 2], [obs(1, 0), obs(2, 0)]),
        round_(1, [1], [obs(1, 1)], fenced=[2]),
        round_(2, [1], [obs(1, 2)], fenced=[2]),
        round_(3, [1, 2], [obs(1, 3), obs(2, 3)]),
        round_(4, [1, 2], [obs(1, 4), obs(2, 4)]),
        round_(5, [1], [obs(1, 5)], fenced=[2]),
        round_(6, [1], [obs(1, 6)]),
        round_(7, [1], [obs(1, 7)]),
        round_(8, [1, 3], [obs(1, 8), obs(3, 8)]),
    )
    assert said == [
        "broker 2 fenced (stopped, or halted by a failed disk): its last observation is forgotten once older than the validity duration (20 s)",
        "broker 2 unfenced: serving again",
        "broker 2 fenced (stopped, or halted by a failed disk): its last observation is forgotten once older than the validity duration (20 s)",
        "broker 2 no longer registered (unregistered or removed): its last observation is forgotten once older than the validity duration (20 s)",
        "broker 3 registered",
    ]


def test_a_broker_fenced_when_the_service_starts_is_said_once_and_active_ones_are_not_listed():
    changes = ClusterChanges(300, keep_fenced=True)
    said = lines(changes, *[round_(t, [1, 2], [obs(1, t), obs(2, t)], fenced=[3]) for t in range(10)])
    assert said == [
        "broker 3 registered but fenced (stopped, or halted by a failed disk): its last observation stays in the view for as long as it stays registered"
    ]


def test_a_fenced_broker_never_observed_is_said_to_have_nothing_kept():
    changes = ClusterChanges(300, keep_fenced=True)
    said = lines(changes, round_(0, [1], [obs(1, 0)], fenced=[3]), cached=(1,))
    assert said == ["broker 3 registered but fenced (stopped, or halted by a failed disk): the service has no observation of it to keep"]


def test_failing_rounds_are_said_when_they_start_and_when_they_stop():
    changes = ClusterChanges(300, keep_fenced=True)
    failed = [round_(t, [], error="DescribeCluster failed: KafkaTimeoutError") for t in range(1, 300)]
    said = lines(changes, round_(0, [1], [obs(1, 0)]), *failed, round_(300, [1], [obs(1, 300)]))
    assert said == ["observation failing: DescribeCluster failed: KafkaTimeoutError", "observation restored: 1 active brokers"]


def test_forgotten_volumes_are_said_at_info_level():
    changes = ClusterChanges(300, keep_fenced=True)
    [change] = changes.after_round(round_(0, [1], [obs(1, 0)]), [obs(2, -301.0)])
    assert change.level == logging.INFO and change.message.startswith("forgot broker 2 log dir /data")
