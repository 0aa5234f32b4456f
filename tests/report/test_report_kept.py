"""The report on histories the service's own decider and writer made, with observations it kept:
a broker halted by a full disk (fenced) under ``keep`` and under ``expire``, a broker that
was unregistered, and a round that reached no one. The report's episodes last as long as the
decisions rested on the kept observation, end with what happened to it, and every round in
THROTTLE or PAUSE blames the volumes /throttle-factor named in that round.

Rounds every 60 s (i = 0..29), validity 300 s (5 rounds), limits hard 10 MiB, soft 20 MiB,
volumes of 100 MiB; brokers 1, 2 and 3:
- broker 1 (/data/a) always answers, 50 MiB;
- broker 2 (/data/b): 50 MiB, then 5 MiB at rounds 3-4 (a hard breach); halted (fenced) at
  rounds 5-14; back at round 15 with 60 MiB;
- broker 3 (/data/c): 15 MiB (under the soft limit) until round 17; fenced at rounds 18-20,
  then no longer listed (unregistered);
- round 8 reaches no one (DescribeCluster failed).
"""

from __future__ import annotations

import csv
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from app.decision.decider import ThrottleDecider
from app.decision.policy import LimitKind, StoragePolicy
from app.history.files import HistoryFiles, Retention
from app.history.rows import round_lines
from app.observation.model import ObservationRound, VolumeObservation
from app.server.api.schemas.decision import decision_response
from spark.analysis.chart_data import CHART_BUCKETS, _bucket, timeline
from spark.analysis.gaps import gap_limit
from spark.analysis.states import (
    collected_rounds,
    collected_time_in_states,
    decisions,
    round_blame,
    rounds,
    time_in_states,
    unexplained_rounds,
)
from spark.analysis.states import unexplained as unexplained_of
from spark.job import run_report
from spark.page.html_report import render_page
from spark.reading.history import epoch_seconds, read_history

from .synthetic import HARD, SOFT, TOTAL, MiB, at

START = at(2026, 6, 2, 10, 0, 0)
INTERVAL = 60.0
VALIDITY = 300.0
ROUNDS = 30
UNREACHED = {8}
UTC_TEXT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"  # as the history writes an instant


def t(i: int) -> str:
    return (START + timedelta(seconds=INTERVAL * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def broker_2(i: int) -> tuple[str, int | None]:
    """What broker 2 is in round i (active or fenced), and its usable bytes when it answers."""
    if 5 <= i <= 14:
        return "fenced", None
    return "active", 5 * MiB if 3 <= i <= 4 else 60 * MiB if i >= 15 else 50 * MiB


def broker_3(i: int) -> tuple[str, int | None]:
    if i <= 17:
        return "active", 15 * MiB
    return ("fenced", None) if i <= 20 else ("gone", None)


def observation_round(i: int) -> ObservationRound:
    moment = (START + timedelta(seconds=INTERVAL * i)).timestamp()
    if i in UNREACHED:
        return ObservationRound(moment - 1, moment, error="DescribeCluster failed: timed out")
    active, fenced, observations = [1], [], [VolumeObservation(1, "/data/a", TOTAL, 50 * MiB, moment)]
    for broker, (log_dir, (kind, usable)) in {2: ("/data/b", broker_2(i)), 3: ("/data/c", broker_3(i))}.items():
        if kind == "active":
            active.append(broker)
            observations.append(VolumeObservation(broker, log_dir, TOTAL, usable, moment))
        elif kind == "fenced":
            fenced.append(broker)
    return ObservationRound(moment - 0.5, moment, tuple(active), tuple(observations), fenced_brokers=tuple(fenced))


def record_run(directory: Path, keep_fenced: bool) -> dict[str, dict]:
    """Run the rounds through the service's decider and history writer's encoding; return
    what /throttle-factor said after each round, by the round's time."""
    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(HARD), float(SOFT))
    decider = ThrottleDecider(policy, VALIDITY, 1.0, started_at=START.timestamp() - 1, keep_fenced=keep_fenced)
    files = HistoryFiles(directory, Retention(max_age_days=100000, max_total_bytes=1 << 50))
    said = {}
    for i in range(ROUNDS):
        round_ = observation_round(i)
        decider.apply_round(round_)
        decision = decider.decision(round_.finished_at)
        files.append(round_lines(round_, decision, INTERVAL).encode(), round_.finished_at)
        body = decision_response(decision)
        said[t(i)] = {
            "state": body.state.value,
            "breaching": sorted((v.broker_id, v.log_dir) for v in body.breaching),
            "ramping": sorted((v.broker_id, v.log_dir) for v in body.ramping),
        }
    files.close()
    return said


@pytest.fixture(scope="module", params=["keep", "expire"])
def run(request, spark, tmp_path_factory):
    history = tmp_path_factory.mktemp(f"history-{request.param}")
    said = record_run(history, keep_fenced=request.param == "keep")
    output = tmp_path_factory.mktemp(f"report-{request.param}")
    report = run_report(spark, str(history), str(output))
    return request.param, history, said, report, output


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def episodes(output: Path) -> set[tuple]:
    return {(e["broker_id"], e["limit"], e["start"], e["end"], e["end_reason"]) for e in read_csv(output, "episodes")}


def test_an_episode_lasts_while_the_decision_keeps_its_observation_and_ends_with_what_happened(run):
    policy, _, _, _, output = run
    if policy == "keep":
        # broker 2 held the cluster paused while halted, past the validity, until it was back with room
        expected_b = {("2", "hard", t(3), t(15), "back-with-room"), ("2", "soft", t(3), t(15), "back-with-room")}
        # broker 3 kept while fenced; once unregistered, forgotten a validity after it was last confirmed (round 20)
        expected_c = {("3", "soft", t(0), t(25), "unregistered")}
    else:
        # under expire, broker 2's observation left the view a validity after it was made (round 4)
        expected_b = {("2", "hard", t(3), t(9), "expired"), ("2", "soft", t(3), t(9), "expired")}
        expected_c = {("3", "soft", t(0), t(22), "unregistered")}
    assert episodes(output) == expected_b | expected_c


def test_the_broker_table_shows_the_time_a_broker_was_fenced(run):
    policy, _, _, _, output = run
    fenced = {row["broker_id"]: float(row["fenced_seconds"]) for row in read_csv(output, "brokers")}
    # round 8 reached no one: what it kept, it kept as last-valid, not as fenced
    held_b = 9 if policy == "keep" else 4  # rounds 5-14 (keep), 5-9 (expire), less round 8
    assert fenced == {"1": 0.0, "2": held_b * INTERVAL, "3": 3 * INTERVAL}


def test_every_round_in_throttle_or_pause_has_an_open_episode(run):
    _, _, said, report, _ = run
    assert any(answer["state"] == "PAUSE" for answer in said.values())
    assert report.unexplained_rounds == 0 and report.unexplained_examples == []


def test_the_reports_rounds_state_and_blamed_volumes_equal_what_throttle_factor_said(run, spark, tmp_path):
    _, history, said, _, _ = run
    rows = read_history(spark, str(history), str(tmp_path / "parsed")).rows
    blamed = round_blame(rows).select(F.date_format("time", UTC_TEXT).alias("time"), "state", "breaching", "ramping")
    offline = {
        row["time"]: {
            "state": row["state"],
            "breaching": [(v["broker_id"], v["log_dir"]) for v in row["breaching"]],
            "ramping": [(v["broker_id"], v["log_dir"]) for v in row["ramping"]],
        }
        for row in blamed.collect()
    }
    assert offline == said


def test_a_history_without_the_kept_observations_has_paused_rounds_that_nothing_explains(run, spark, tmp_path):
    """The check on a history as it was written before the rows carried kept observations."""
    policy, history, said, _, _ = run
    lines = read_history(spark, str(history), str(tmp_path / "parsed")).lines.filter(F.col("kept").isNull())
    found = unexplained_rounds(rounds(decisions(lines))).select(F.date_format("time", UTC_TEXT).alias("time"))
    unexplained = {row["time"] for row in found.collect()}
    # broker 2 halted with a full disk: PAUSE from round 5, its rows gone (round 8 kept everything)
    paused = {t(i) for i in range(5, 15 if policy == "keep" else 10) if i not in UNREACHED}
    assert paused <= unexplained and all(said[time]["state"] in ("PAUSE", "THROTTLE") for time in unexplained)
    # The report counts them from the rounds it collected: the same rounds, in time order.
    round_rows = rounds(decisions(lines))
    in_spark = [row[0] for row in unexplained_rounds(round_rows).select(F.unix_micros("time")).orderBy(1).collect()]
    assert [r.micros for r in unexplained_of(collected_rounds(round_rows))] == in_spark and len(in_spark) >= len(paused)


@pytest.mark.parametrize("max_gap", [None, 30.0])
def test_the_state_timeline_from_the_rounds_collected_is_spark_s_aggregate_of_the_rounds(run, spark, tmp_path, max_gap):
    """The timeline's buckets, worked out in the driver, are those Spark's aggregate of the same
    rounds gives (worst state, fallback, rounds, first and last time, gap limit)."""
    _, history, _, report, _ = run
    round_rows = rounds(decisions(read_history(spark, str(history), str(tmp_path / "parsed")).lines))
    first, last = report.first, report.last
    rank = F.create_map(*[F.lit(x) for pair in {"OPEN": 0, "THROTTLE": 1, "PAUSE": 2}.items() for x in pair])
    buckets = (
        round_rows.groupBy(_bucket(first, last).alias("bucket"))
        .agg(
            F.max(rank[F.col("state")]).alias("rank"),
            F.max(F.col("source").isin("fallback", "last-valid")).alias("fallback"),
            F.count(F.lit(1)).alias("rounds"),
            F.min(epoch_seconds("time")).alias("first_t"),
            F.max(epoch_seconds("time")).alias("last_t"),
            F.max(gap_limit(max_gap)).alias("gap_limit"),
        )
        .orderBy("bucket")
        .collect()
    )
    width = (last - first) / CHART_BUCKETS
    found = timeline(collected_rounds(round_rows), first, last, max_gap)
    names = ("OPEN", "THROTTLE", "PAUSE")
    assert [(b.start, b.state, b.fallback, b.rounds) for b in found] == [
        (first + row["bucket"] * width, names[row["rank"]], bool(row["fallback"]), row["rounds"]) for row in buckets
    ]
    ends = []
    for row, following in zip(buckets, [*buckets[1:], None]):  # as the page's buckets were made in Spark's days
        start = first + row["bucket"] * width
        end = max(start + width, row["last_t"]) if following is None else start + width
        if following is not None and following["first_t"] - row["last_t"] <= row["gap_limit"]:
            end = first + following["bucket"] * width
        ends.append(end)
    assert [b.end for b in found] == [min(end, last) for end in ends]
    assert any(b.state == "PAUSE" for b in found) and any(b.fallback for b in found)


def test_the_page_names_unexplained_rounds_only_when_there_are_some(run):
    _, _, _, report, _ = run
    label = "rounds in THROTTLE or PAUSE that no episode explains"
    assert label not in render_page(report)
    assert f"<b>2</b><span>{label}</span>" in render_page(replace(report, unexplained_rounds=2))


@pytest.mark.parametrize("max_gap", [None, 30.0])
def test_the_time_in_states_from_the_rounds_collected_is_spark_s(run, spark, tmp_path, max_gap):
    """The time in states, worked out in the driver from the rounds collected, is the table
    Spark's aggregate of the same rounds gives, value for value."""
    _, history, _, _, _ = run
    round_rows = rounds(decisions(read_history(spark, str(history), str(tmp_path / "parsed")).lines))
    in_spark = [tuple(row) for row in time_in_states(round_rows, max_gap).collect()]
    assert collected_time_in_states(collected_rounds(round_rows), max_gap) == in_spark
    assert in_spark and (max_gap is not None or any(row[5] for row in in_spark))  # time in THROTTLE


@pytest.mark.parametrize("max_gap", [None, 90.0, 3600.0])
def test_the_time_in_states_from_the_rounds_collected_across_midnights_and_gaps_is_spark_s(spark, max_gap):
    """Rounds crossing midnight, a gap of days, a round without a check interval, incomplete
    rounds and times to the microsecond: the driver's table is Spark's."""
    start = datetime(2026, 3, 1, 23, 58, 30, 123457, tzinfo=UTC)
    times = [start + timedelta(seconds=37.000013 * i) for i in range(8)]
    times += [times[-1] + timedelta(days=2, seconds=11.5), times[-1] + timedelta(days=2, seconds=71.25)]
    times += [times[-1] + timedelta(seconds=60 * i + 0.000001) for i in range(1, 4)]
    states = ["OPEN", "THROTTLE", "PAUSE"]
    sources = ["observed", "last-valid", "fallback", "initial"]
    data = [
        (t, states[i % 3], sources[i % 4], None if i == 5 else 30.0 + i, i % 4 != 1, i, i % 2)
        for i, t in enumerate(times)
    ]
    schema = "time timestamp, state string, source string, check_interval_seconds double, round_complete boolean, blamed_volumes long, breaching_volumes long"
    round_rows = spark.createDataFrame(data, schema)
    in_spark = [tuple(row) for row in time_in_states(round_rows, max_gap).collect()]
    assert collected_time_in_states(collected_rounds(round_rows), max_gap) == in_spark
    assert len(in_spark) >= 3 and any(row[2] for row in in_spark)
