"""The history writer: rows per round, partitioned files, crash safety, retention, never blocking."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.history.files import HistoryFiles, Retention, file_for
from app.history.kafka_topic import record_key, record_value
from app.history.rows import ROW_ENCODER, round_lines, round_rows
from app.history.schema import FIELD_NAMES
from app.history.writer import HistoryCounters, HistoryWriter
from app.decision.policy import LimitKind, StoragePolicy
from app.settings import ConfigurationError, load_settings
from app.decision.decider import ThrottleDecider
from app.observation.model import ObservationRound, VolumeObservation

MiB = 1024 * 1024
POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 8 * MiB, 24 * MiB)
T0 = datetime(2026, 11, 21, 23, 59, 30, tzinfo=UTC).timestamp()
LOOSE = Retention(max_age_days=3650, max_total_bytes=1 << 40)


def observed_round(at: float, usable: dict[tuple[int, str], int], missing: dict[int, str] | None = None) -> ObservationRound:
    observations = tuple(VolumeObservation(b, d, 64 * MiB, u, at) for (b, d), u in usable.items())
    brokers = tuple(sorted({b for b, _ in usable} | set(missing or {})))
    return ObservationRound(at - 0.1, at, brokers, observations, missing or {})


def decided(round_: ObservationRound):
    decider = ThrottleDecider(POLICY, 300.0, 0.0, started_at=round_.started_at)
    decider.apply_round(round_)
    return decider.decision(round_.finished_at)


def test_a_round_gives_one_row_per_observed_volume_with_its_verdict_and_the_cluster_decision():
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 16 * MiB, (3, "/c"): 4 * MiB}, missing={4: "timed out"})
    decision = decided(round_)
    rows = round_rows(round_, decision, 60.0)
    assert [tuple(row) for row in rows] == [FIELD_NAMES] * 3
    by_volume = {(r["broker_id"], r["log_dir"]): r for r in rows}
    assert by_volume[(1, "/a")]["volume_status"] == "ok" and by_volume[(1, "/a")]["volume_factor"] == 1.0
    assert by_volume[(2, "/b")]["volume_status"] == "ramping" and by_volume[(2, "/b")]["volume_factor"] == 0.5
    assert by_volume[(3, "/c")]["volume_status"] == "breaching" and by_volume[(3, "/c")]["volume_factor"] == 0.0
    row = by_volume[(3, "/c")]
    assert row["time"] == "2026-11-21T23:59:30.000Z"
    assert (row["total_bytes"], row["usable_bytes"], row["available_ratio"]) == (64 * MiB, 4 * MiB, 0.0625)
    assert (row["limit_kind"], row["hard_limit"], row["soft_limit"]) == ("min-available-bytes", 8 * MiB, 24 * MiB)
    # broker 4 did not answer: the round is incomplete; the breach it saw still caps the factor
    assert (row["cluster_factor"], row["state"], row["source"], row["round_complete"]) == (0.0, "PAUSE", "initial", False)
    assert row["check_interval_seconds"] == 60.0


@pytest.mark.parametrize("policy", [POLICY, StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.05), StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.05, 0.2)])
def test_the_lines_written_are_the_rows_encoded_one_by_one(policy):
    """The writer's fast encoding and the rows agree to the byte, for every kind of value a
    field can hold: unjudged and offline log dirs, names to escape, verdicts of each kind."""
    observations = (
        VolumeObservation(1, "/a", 64 * MiB, 40 * MiB, T0),
        VolumeObservation(2, "/b", 64 * MiB, 10 * MiB, T0),
        VolumeObservation(3, "/c", 64 * MiB, 1 * MiB, T0),
        VolumeObservation(4, '/d "quoted" \\ é \u2028', 0, 0, T0),
        VolumeObservation(5, "/e", -1, -1, T0),
        VolumeObservation(6, "/f", 64 * MiB, 50 * MiB, T0, "KAFKA_STORAGE_ERROR"),
    )
    for round_ in (ObservationRound(T0 - 0.1, T0, (1, 2, 3, 4, 5, 6), observations, {7: "timed out"}),
                   ObservationRound(T0 - 1, T0, error="DescribeCluster failed")):
        decider = ThrottleDecider(policy, 300.0, 0.0, started_at=round_.started_at)
        decider.apply_round(round_)
        decision = decider.decision(round_.finished_at)
        for interval in (60.0, 1):
            expected = "".join(ROW_ENCODER.encode(row) + "\n" for row in round_rows(round_, decision, interval))
            assert round_lines(round_, decision, interval) == expected


def test_with_a_horizon_each_row_carries_the_volumes_fill_rate_time_to_the_hard_limit_and_the_rule():
    """Volume 1 fills at 1 MiB/s with 32 MiB of room above the hard limit (32 s, within the 60 s
    horizon: the time rule slows it), volume 2 is flat, volume 3 is below the soft limit."""
    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 8 * MiB, 12 * MiB)
    decider = ThrottleDecider(policy, 300.0, 0.0, started_at=T0 - 100, horizon_seconds=60.0)
    for step in range(4):
        at = T0 + step * 5.0
        round_ = observed_round(at, {(1, "/a"): 40 * MiB + (3 - step) * 5 * MiB, (2, "/b"): 40 * MiB, (3, "/c"): 10 * MiB})
        decider.apply_round(round_)
    decision = decider.decision(round_.finished_at)
    rows = {(r["broker_id"], r["log_dir"]): r for r in round_rows(round_, decision, 5.0)}
    filling, flat, soft = rows[(1, "/a")], rows[(2, "/b")], rows[(3, "/c")]
    assert filling["fill_rate_bytes_per_second"] == MiB
    assert filling["seconds_to_hard_limit"] == 32.0
    assert filling["volume_rule"] == "time to full" and 0 < filling["volume_factor"] < 1
    assert (flat["fill_rate_bytes_per_second"], flat["seconds_to_hard_limit"], flat["volume_rule"]) == (0.0, None, None)
    assert soft["volume_rule"] == "soft limit" and soft["volume_factor"] == 0.5
    assert {r["rule"] for r in rows.values()} == {decision.rule} == {"time to full"}  # it asks for less than 0.5
    assert round_lines(round_, decision, 5.0) == "".join(ROW_ENCODER.encode(row) + "\n" for row in round_rows(round_, decision, 5.0))
    # Without a horizon the fields are null; the rule is still named.
    plain = decided(round_)
    (row, *_) = round_rows(round_, plain, 5.0)
    assert (row["fill_rate_bytes_per_second"], row["seconds_to_hard_limit"]) == (None, None)


def test_a_round_that_observed_nothing_writes_one_row_without_a_volume():
    round_ = ObservationRound(T0 - 1, T0, error="DescribeCluster failed")
    decider = ThrottleDecider(POLICY, 300.0, 0.0, started_at=T0 - 1000)
    decider.apply_round(round_)
    decision = decider.decision(T0)
    (row,) = round_rows(round_, decision, 60.0)
    assert row["broker_id"] is None and row["log_dir"] is None and row["usable_bytes"] is None
    assert (row["source"], row["state"], row["cluster_factor"], row["round_complete"]) == ("fallback", "PAUSE", 0.0, False)


def test_files_are_partitioned_by_utc_date_and_hour():
    assert file_for(Path("/h"), T0) == Path("/h/date=2026-11-21/history-23.jsonl")
    assert file_for(Path("/h"), T0 + 31) == Path("/h/date=2026-11-22/history-00.jsonl")


def test_appending_after_a_truncated_last_line_keeps_the_truncated_line_alone(tmp_path):
    files = HistoryFiles(tmp_path, LOOSE, wall_clock=lambda: T0)
    files.append(b'{"a":1}\n', T0)
    files.close()
    path = file_for(tmp_path, T0)
    with path.open("ab") as handle:  # what a process killed mid-write leaves
        handle.write(b'{"a":2,"b":')
    files = HistoryFiles(tmp_path, LOOSE, wall_clock=lambda: T0)  # restarted within the hour
    files.append(b'{"a":3}\n', T0)
    files.close()
    assert path.read_bytes().split(b"\n") == [b'{"a":1}', b'{"a":2,"b":', b'{"a":3}', b""]


def test_retention_deletes_files_past_the_age_then_the_oldest_past_the_size_never_the_current_one(tmp_path):
    line = b"x" * 99 + b"\n"
    for hours_ago in (30, 26, 2, 1):  # left by an earlier run
        path = file_for(tmp_path, T0 - hours_ago * 3600)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(line)
    names = lambda: sorted(str(p.relative_to(tmp_path)) for p in files.files())  # noqa: E731
    # at start-up, the files whose hour ended more than a day ago go, and their empty folder;
    # the closed hours left are compressed
    files = HistoryFiles(tmp_path, Retention(max_age_days=1, max_total_bytes=1 << 40), wall_clock=lambda: T0)
    assert names() == ["date=2026-11-21/history-21.jsonl.bz2", "date=2026-11-21/history-22.jsonl.bz2"]
    assert not (tmp_path / "date=2026-11-20").exists()
    compressed = sum(p.stat().st_size for p in files.files())
    assert compressed < 2 * len(line)
    # a new file: retention runs before it, counting the compressed bytes, and the oldest goes to fit
    files.retention = Retention(max_age_days=1, max_total_bytes=compressed - 1)
    files.append(line, T0)
    assert names() == ["date=2026-11-21/history-22.jsonl.bz2", "date=2026-11-21/history-23.jsonl"]
    files.retention = Retention(max_age_days=1, max_total_bytes=1)
    files.apply_retention()
    assert names() == ["date=2026-11-21/history-23.jsonl"]  # the file being written stays
    files.close()


class SlowFiles:
    """History files on a disk that takes ``delay`` seconds per write."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.batches: list[bytes] = []

    def append(self, lines: bytes, at: float) -> None:
        time.sleep(self.delay)
        self.batches.append(lines)

    def close(self) -> None:
        pass


def counting() -> tuple[HistoryCounters, dict[str, int]]:
    counts = {"written": 0, "queue_full": 0, "write_error": 0, "topic": 0}

    def dropped(reason: str, rows: int) -> None:
        counts[reason] += rows

    return HistoryCounters(lambda n: counts.__setitem__("written", counts["written"] + n), dropped, lambda n: None), counts


def test_submitting_never_blocks_and_drops_and_counts_rounds_when_the_queue_is_full():
    counters, counts = counting()
    files = SlowFiles(delay=0.2)
    writer = HistoryWriter(files, 1.0, counters, queue_rounds=2)  # type: ignore[arg-type]
    writer.start()
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 40 * MiB})
    decision = decided(round_)
    started = time.perf_counter()
    for _ in range(10):
        writer.submit(round_, decision)
    assert time.perf_counter() - started < 0.05
    writer.close()
    written_rounds = len(files.batches)
    assert 2 <= written_rounds <= 3  # one being written, two queued
    assert counts["written"] == 2 * written_rounds
    assert counts["queue_full"] == 2 * (10 - written_rounds)
    assert all(json.loads(line)["broker_id"] in (1, 2) for line in files.batches[0].splitlines())


class FullDisk(SlowFiles):
    """History files whose first write fails the way a full disk does."""

    def append(self, lines: bytes, at: float) -> None:
        if not hasattr(self, "failed"):
            self.failed = True
            raise OSError(28, "No space left on device")
        super().append(lines, at)


def test_a_failing_disk_drops_and_counts_the_round_and_the_writer_goes_on(caplog):
    caplog.set_level(logging.INFO, "app.history")
    counters, counts = counting()
    files = FullDisk(delay=0)
    writer = HistoryWriter(files, 1.0, counters)  # type: ignore[arg-type]
    writer.start()
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 40 * MiB})
    decision = decided(round_)
    writer.submit(round_, decision)
    writer.submit(round_, decision)
    writer.close()
    assert (counts["write_error"], counts["written"], len(files.batches)) == (2, 2, 1)
    assert "history files not writable" in caplog.text and "writable again" in caplog.text


def test_the_topic_record_carries_the_metrics_snapshot_fields_of_the_proposal():
    round_ = observed_round(T0, {(2, "/var/lib/kafka"): 4 * MiB})
    decision = decided(round_)
    (row,) = round_rows(round_, decision, 60.0)
    assert record_key(row) == "2:/var/lib/kafka"
    value = record_value(row)
    assert value["brokerId"] == "2" and value["snapshotAt"] == row["time"]
    assert value["hardLimit"] == {"type": "MinFreeBytes", "level": 8 * MiB}
    assert value["softLimit"] == {"type": "MinFreeBytes", "level": 24 * MiB}
    assert value["volumes"] == [{"volumeName": "/var/lib/kafka", "capacity": 64 * MiB, "consumed": 60 * MiB}]
    assert value["usable_bytes"] == 4 * MiB  # and the history row itself
    ratio_row = {**row, "limit_kind": "min-available-ratio", "hard_limit": 0.05, "soft_limit": None}
    assert record_value(ratio_row)["softLimit"] == {"type": "MinFreePercentage", "level": 5.0}


def base_settings(**overrides: str):
    return load_settings(environ=overrides.pop("environ", {}), storage_per_volume_limit_min_available_bytes="100", kafka_admin_bootstrap_servers="k:9092", **overrides)


def test_history_defaults_under_the_data_dir_and_producer_properties_pass_through_from_the_environment(tmp_path):
    settings = base_settings(data_dir=str(tmp_path), environ={"THROTTLE_SERVICE_HISTORY_KAFKA_PRODUCER_LINGER_MS": "50"})
    assert settings.history_enabled and not settings.history_kafka_enabled
    assert settings.effective_history_dir == tmp_path / "history"
    assert settings.history_producer_config == {"linger.ms": "50", "bootstrap.servers": "k:9092"}


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("throttle.service.history.retention.days", "0", "an integer >= 1"),
        ("throttle.service.history.retention.bytes", "1000", "an integer >= 1048576"),
        ("throttle.service.history.kafka.topic", "no spaces", "a Kafka topic name"),
        ("throttle.service.history.kafka.producer.no.such.property", "1", "a property librdkafka accepts"),
    ],
)
def test_bad_history_settings_stop_start_up_naming_key_value_and_what_is_allowed(tmp_path, key, value, allowed):
    env = {key.upper().replace(".", "_"): value, "THROTTLE_SERVICE_HISTORY_KAFKA_ENABLED": "true"}
    with pytest.raises(ConfigurationError) as error:
        base_settings(environ=env)
    (problem,) = error.value.problems
    assert (problem.key, problem.value) == (key, value)
    assert problem.allowed.startswith(allowed), problem.allowed


def _rows_by_volume(decider: ThrottleDecider, round_: ObservationRound) -> dict[tuple[int, str], dict]:
    decider.apply_round(round_)
    decision = decider.decision(round_.finished_at)
    rows = round_rows(round_, decision, 60.0)
    assert round_lines(round_, decision, 60.0) == "".join(ROW_ENCODER.encode(row) + "\n" for row in rows)
    return {(row["broker_id"], row["log_dir"]): row for row in rows}


def _round(at: float, usable: dict[tuple[int, str], int], active: tuple[int, ...], fenced: tuple[int, ...] = (), **kwargs) -> ObservationRound:
    observations = tuple(VolumeObservation(b, d, 64 * MiB, u, at) for (b, d), u in usable.items())
    return ObservationRound(at - 0.1, at, active, observations, fenced_brokers=fenced, **kwargs)


@pytest.mark.parametrize("keep_fenced", [True, False])
def test_a_fenced_brokers_kept_observation_is_written_every_round_with_its_own_time_age_and_mark(keep_fenced):
    decider = ThrottleDecider(POLICY, 300.0, 1.0, started_at=T0 - 1, keep_fenced=keep_fenced)
    first = _rows_by_volume(decider, _round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 4 * MiB}, (1, 2)))
    assert first[(2, "/b")]["kept"] is None and first[(2, "/b")]["observed_at"] == "2026-11-21T23:59:30.000Z"
    assert first[(2, "/b")]["observation_age_seconds"] == 0.0
    # broker 2 halted by its full disk: registered but fenced, its last observation kept
    halted = _rows_by_volume(decider, _round(T0 + 60, {(1, "/a"): 40 * MiB}, (1,), fenced=(2,)))
    kept = halted[(2, "/b")]
    assert (kept["kept"], kept["observed_at"], kept["observation_age_seconds"]) == ("fenced", "2026-11-21T23:59:30.000Z", 60.0)
    assert (kept["volume_status"], kept["usable_bytes"], kept["state"], kept["source"]) == ("breaching", 4 * MiB, "PAUSE", "observed")
    assert halted[(1, "/a")]["kept"] is None and halted[(1, "/a")]["observed_at"] == "2026-11-22T00:00:30.000Z"
    # past the validity: kept for as long as it stays fenced under keep, gone under expire
    later = _rows_by_volume(decider, _round(T0 + 360, {(1, "/a"): 40 * MiB}, (1,), fenced=(2,)))
    if keep_fenced:
        assert later[(2, "/b")]["kept"] == "fenced" and later[(2, "/b")]["observation_age_seconds"] == 360.0
        assert later[(1, "/a")]["state"] == "PAUSE"
    else:
        assert set(later) == {(1, "/a")} and later[(1, "/a")]["state"] == "OPEN"


def test_an_observation_kept_for_a_broker_that_did_not_answer_left_or_was_not_reached_says_so():
    decider = ThrottleDecider(POLICY, 300.0, 1.0, started_at=T0 - 1)
    _rows_by_volume(decider, _round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 4 * MiB}, (1, 2)))
    missing = _rows_by_volume(decider, _round(T0 + 60, {(1, "/a"): 40 * MiB}, (1, 2), missing_brokers={2: "timed out"}))
    assert (missing[(2, "/b")]["kept"], missing[(2, "/b")]["observation_age_seconds"]) == ("missing", 60.0)
    unreached = _rows_by_volume(decider, ObservationRound(T0 + 119, T0 + 120, error="DescribeCluster failed"))
    assert {key: row["kept"] for key, row in unreached.items()} == {(1, "/a"): "last-valid", (2, "/b"): "last-valid"}
    assert unreached[(1, "/a")]["observation_age_seconds"] == 60.0 and unreached[(2, "/b")]["observation_age_seconds"] == 120.0
    assert {row["state"] for row in unreached.values()} == {"PAUSE"}
    unregistered = _rows_by_volume(decider, _round(T0 + 180, {(1, "/a"): 40 * MiB}, (1,)))
    assert unregistered[(2, "/b")]["kept"] == "unregistered" and unregistered[(1, "/a")]["kept"] is None
    # forgotten a validity after it was made
    assert set(_rows_by_volume(decider, _round(T0 + 301, {(1, "/a"): 40 * MiB}, (1,)))) == {(1, "/a")}


def test_the_topic_record_of_a_kept_observation_is_stamped_with_when_it_was_made():
    decider = ThrottleDecider(POLICY, 300.0, 1.0, started_at=T0 - 1)
    _rows_by_volume(decider, _round(T0, {(2, "/b"): 4 * MiB}, (2,)))
    kept = _rows_by_volume(decider, _round(T0 + 60, {}, (), fenced=(2,), error="DescribeCluster listed no active broker"))[(2, "/b")]
    value = record_value(kept)
    assert value["snapshotAt"] == "2026-11-21T23:59:30.000Z" != value["time"] and value["kept"] == "fenced"


def test_metadata_volumes_get_rows_of_their_own_named_by_holds_and_judged_by_the_metadata_limits():
    from app.observation.node_reports import NodeReport, NodeVolume

    metadata_policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 4 * MiB)
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 40 * MiB})
    decider = ThrottleDecider(POLICY, 300.0, 0.0, started_at=round_.started_at, metadata_policy=metadata_policy)
    decider.record_node_report(NodeReport(1000, frozenset({"controller"}), (NodeVolume("/meta", 16 * MiB, 2 * MiB, frozenset({"metadata"})),), T0 - 5))
    decider.record_node_report(NodeReport(2, frozenset({"broker", "controller"}), (NodeVolume("/b", 64 * MiB, 40 * MiB, frozenset({"data", "metadata"})),), T0 - 1))
    decider.apply_round(round_)
    decision = decider.decision(T0)
    rows = round_rows(round_, decision, 60.0)
    assert [(r["broker_id"], r["log_dir"], r["holds"]) for r in rows] == [
        (1, "/a", "data"), (2, "/b", "data"), (2, "/b", "data,metadata"), (1000, "/meta", "metadata"),
    ]
    meta = rows[-1]
    assert (meta["volume_status"], meta["volume_factor"], meta["hard_limit"], meta["soft_limit"]) == ("breaching", 0.0, 4 * MiB, None)
    assert meta["observed_at"] == "2026-11-21T23:59:25.000Z" and meta["observation_age_seconds"] == 5.0 and meta["kept"] is None
    assert {r["mutation_factor"] for r in rows} == {0.0} and {r["cluster_factor"] for r in rows} == {1.0}
    assert round_lines(round_, decision, 60.0) == "".join(ROW_ENCODER.encode(row) + "\n" for row in rows)
    assert [record_key(r) for r in rows[1:3]] == ["2:/b", "2:/b:metadata"]


def test_without_metadata_limits_rows_are_todays_with_holds_data_and_mutation_factor_1():
    from app.observation.node_reports import NodeReport, NodeVolume

    round_ = observed_round(T0, {(1, "/a"): 40 * MiB})
    decider = ThrottleDecider(POLICY, 300.0, 0.0, started_at=round_.started_at)
    decider.record_node_report(NodeReport(1000, frozenset({"controller"}), (NodeVolume("/meta", 16 * MiB, 0, frozenset({"metadata"})),), T0))
    decider.apply_round(round_)
    (row,) = round_rows(round_, decider.decision(T0), 60.0)
    assert (row["broker_id"], row["holds"], row["mutation_factor"], row["cluster_factor"]) == (1, "data", 1.0, 1.0)


class KeptFiles:
    """History files that keep every batch written, with when its round finished."""

    def __init__(self) -> None:
        self.batches: list[tuple[float, bytes]] = []

    def append(self, lines: bytes, at: float) -> None:
        self.batches.append((at, lines))

    def close(self) -> None:
        pass


def test_the_writer_writes_each_rounds_node_view_while_10000_node_ids_come_and_go_and_survives_a_failing_row(caplog):
    """The event loop (here, this thread) records node reports of 10,000 node ids, each valid
    for 10 s, and evicts expired ones while the writer thread writes the rows of the rounds
    before: every round's rows are written, with the metadata volumes in the view when the
    round finished, and a row that cannot be encoded is dropped and counted alone."""
    from app.observation.node_reports import NodeReport, NodeVolume

    caplog.set_level(logging.INFO, "app.history")
    validity, reports_per_round = 10.0, 250
    counters, counts = counting()
    files = KeptFiles()
    writer = HistoryWriter(files, 1.0, counters, queue_rounds=1000)  # type: ignore[arg-type]
    writer.start()
    decider = ThrottleDecider(POLICY, validity, 1.0, started_at=T0, metadata_policy=StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 4 * MiB))
    expected: dict[float, set[int]] = {}
    received: dict[int, float] = {}
    failing_round, unencodable = 13, 0
    for node_id in range(10_000):
        at = T0 + node_id * 0.01
        decider.record_node_report(NodeReport(node_id, frozenset({"controller"}), (NodeVolume("/meta", 16 * MiB, 8 * MiB, frozenset({"metadata"})),), at))
        received[node_id] = at
        if node_id % reports_per_round == reports_per_round - 1:
            number = node_id // reports_per_round
            usable = {(1, "/a"): 40 * MiB, (2, "/b"): 40 * MiB}
            round_ = observed_round(at, usable)
            if number == failing_round:  # a log dir that is not text: its row cannot be encoded
                round_ = ObservationRound(at - 0.1, at, (1, 2, 3), (*round_.observations, VolumeObservation(3, b"/c", 64 * MiB, 40 * MiB, at)))  # type: ignore[arg-type]
            decider.apply_round(round_)  # evicts the reports older than the validity
            decision = decider.decision(at)
            unencodable += sum(1 for volume in decision.volumes if volume.broker_id == 3)  # kept until it expires
            writer.submit(round_, decision)
            expected[at] = {n for n, t in received.items() if at - t <= validity}
    assert writer.alive
    writer.close()
    assert "history writer failed" not in caplog.text
    rounds = 10_000 // reports_per_round
    assert len(files.batches) == len(expected) == rounds
    for at, lines in files.batches:
        rows = [json.loads(line) for line in lines.splitlines()]
        assert {r["broker_id"] for r in rows if r["holds"] == "metadata"} == expected[at]
        assert {r["broker_id"] for r in rows if r["holds"] == "data"} == {1, 2}
    assert 1 <= counts["write_error"] == unencodable and "history row dropped" in caplog.text
    assert counts["written"] == sum(len(ids) + 2 for ids in expected.values())
    assert counts["queue_full"] == 0


def test_a_round_that_fails_as_a_whole_is_dropped_and_counted_and_the_writer_goes_on(caplog):
    counters, counts = counting()
    files = KeptFiles()
    writer = HistoryWriter(files, 1.0, counters)  # type: ignore[arg-type]
    writer.start()
    round_ = observed_round(T0, {(1, "/a"): 40 * MiB, (2, "/b"): 40 * MiB})
    decision = decided(round_)

    class Broken:
        def append(self, lines: bytes, at: float) -> None:
            writer.files = files  # the next round writes
            raise RuntimeError("a bug in the files")

        def close(self) -> None:
            pass

    writer.files = Broken()  # type: ignore[assignment]
    writer.submit(round_, decision)
    writer.submit(round_, decision)
    writer.close()
    assert (counts["write_error"], counts["written"], len(files.batches)) == (2, 2, 1)
    assert "history writer failed on a round: its 2 rows are dropped" in caplog.text
