"""Limits tried on the past (throttle-report --limits), on local Spark.

- The Spark judgement of a volume equals app/decision/policy.py's, to the bit, on generated
  values (hysteresis included, remembered round to round as the service remembers it).
- On a history written by the test with known fills, each candidate set yields the episodes,
  the time in THROTTLE and PAUSE and the first firing that a plain computation here expects.
- The live set is the plain report exactly; a candidate equal to the recorded limits is too.
- Limit files are checked by the service's rules; episodes begun in shadow mode read "would have".

Rounds every 60 s from 2026-07-01 08:00 UTC (i = 0..39), volumes of 100 MiB:
- A (1, /a) fills 2 MiB per round from 81 MiB down to 3 MiB (round 39);
- B (2, /b) sits at 25 MiB, dips to 5 MiB at rounds 10-12, sits at 12 MiB at rounds 13-17 (in
  the band of a hysteresis above a 10 MiB hard limit), is back at 60 MiB from round 18;
- C (3, /c) sits at 30 MiB throughout.
"""

from __future__ import annotations

import csv
import random
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from app.decision.policy import LimitKind, StoragePolicy, evaluate
from app.observation.model import VolumeObservation
from spark.analysis.backtest import LimitSet, LimitSetError, judged_rows, read_limit_set
from spark.cli import _limit_sets, summary_table
from spark.analysis.enforcement import with_enforcement
from spark.analysis.episodes import violation_episodes
from spark.analysis.gaps import HistoryEnd
from spark.job import run_report
from spark.page.tables import table_html

from .synthetic import CHECK_INTERVAL, TOTAL, MiB, at, write_rounds

START = at(2026, 7, 1, 8, 0, 0)
ROUNDS = 40
PREFIX = "client.quota.callback.static.storage.per.volume."


def a(i: int) -> int:
    return 81 * MiB - 2 * MiB * i


def b(i: int) -> int:
    return 5 * MiB if 10 <= i <= 12 else 12 * MiB if 13 <= i <= 17 else 25 * MiB if i < 10 else 60 * MiB


def c(i: int) -> int:
    return 30 * MiB


VOLUMES = {(1, "/a"): a, (2, "/b"): b, (3, "/c"): c}

# Candidate sets, as files would hold them, and the same as policies for the plain computation.
CANDIDATES = {
    "ratio-soft": (
        {"limit.min.available.ratio": "0.29", "soft.limit.min.available.ratio": "0.35"},
        StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.29, 0.35),
    ),
    "hysteresis": (
        {"limit.min.available.bytes": str(10 * MiB), "limit.hysteresis.bytes": str(5 * MiB)},
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 10.0 * MiB, None, 5.0 * MiB),
    ),
    # the limits the history records (hard 10 MiB, soft 20 MiB): must give the live column
    "as-recorded": (
        {"limit.min.available.bytes": str(10 * MiB), "soft.limit.min.available.bytes": str(20 * MiB)},
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 10.0 * MiB, 20.0 * MiB),
    ),
}


def t(i: int) -> str:
    return (START + timedelta(seconds=CHECK_INTERVAL * i)).strftime("%Y-%m-%d %H:%M:%S")


def write_limits(directory: Path, name: str, settings: dict[str, str]) -> Path:
    path = directory / f"{name}.properties"
    path.write_text("".join(f"{PREFIX}{key}={value}\n" for key, value in settings.items()))
    return path


@pytest.fixture(scope="module")
def backtest(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    write_rounds(history, START, ROUNDS, VOLUMES, outage=set())
    files = tmp_path_factory.mktemp("limits")
    sets = [read_limit_set(write_limits(files, name, settings)) for name, (settings, _) in CANDIDATES.items()]
    output = tmp_path_factory.mktemp("report")
    return run_report(spark, str(history), str(output), limit_sets=sets), output


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


# --- the plain computation the backtest must agree with ---


@dataclass(frozen=True)
class Expected:
    episodes: list[tuple]  # (broker, log dir, limit, start, end, end reason)
    throttle_seconds: float
    pause_seconds: float
    first_fired: str | None


def expected(policy: StoragePolicy) -> Expected:
    """Each round judged by hand: the measure, the latch of the hysteresis, the ramp."""

    def measure(usable: int) -> float:
        return usable if policy.kind is LimitKind.MIN_AVAILABLE_BYTES else usable / TOTAL

    in_breach: dict[tuple, bool] = {}
    statuses: list[dict[tuple, str]] = []
    states: list[str] = []
    hard, soft = policy.hard_level, policy.soft_level
    for i in range(ROUNDS):
        round_status, factors = {}, []
        for key, usable in VOLUMES.items():
            m = measure(usable(i))
            held = in_breach.get(key, False) and m <= hard + policy.hysteresis
            in_breach[key] = m <= hard or held
            if in_breach[key]:
                round_status[key], factor = "breaching", 0.0
            elif soft is not None and m <= soft:
                round_status[key], factor = "ramping", min(1.0, (m - hard) / (soft - hard))
            else:
                round_status[key], factor = "ok", 1.0
            factors.append(factor)
        statuses.append(round_status)
        states.append("OPEN" if min(factors) >= 1 else "PAUSE" if min(factors) <= 0 else "THROTTLE")
    episodes = []
    for key in VOLUMES:
        for limit, inside in (("hard", {"breaching"}), ("soft", {"breaching", "ramping"})):
            if limit == "soft" and policy.soft_level is None:
                continue
            start = None
            for i in range(ROUNDS):
                now_in = statuses[i][key] in inside
                if now_in and start is None:
                    start = i
                if not now_in and start is not None:
                    episodes.append((*key, limit, t(start), t(i), "recovered"))
                    start = None
            if start is not None:
                episodes.append((*key, limit, t(start), t(ROUNDS - 1), "ongoing"))
    held = states[:-1]  # each round's state holds until the next; the last one's for no time
    fired = [i for i, state in enumerate(states) if state != "OPEN"]
    return Expected(
        sorted(episodes),
        held.count("THROTTLE") * CHECK_INTERVAL,
        held.count("PAUSE") * CHECK_INTERVAL,
        t(fired[0]) if fired else None,
    )


def episodes_of(output: Path, limit_set: str) -> list[tuple]:
    return sorted(
        (int(e["broker_id"]), e["log_dir"], e["limit"], e["start"].replace("T", " ")[:19], e["end"].replace("T", " ")[:19], e["end_reason"])
        for e in read_csv(output, "backtest_episodes")
        if e["limit_set"] == limit_set
    )


@pytest.mark.parametrize("name", CANDIDATES)
def test_each_candidate_set_yields_the_episodes_and_times_a_plain_computation_expects(backtest, name):
    report, output = backtest
    want = expected(CANDIDATES[name][1])
    assert episodes_of(output, name) == want.episodes
    (summary,) = [row for row in read_csv(output, "backtest") if row["limit_set"] == name]
    assert float(summary["throttle_seconds"]) == want.throttle_seconds
    assert float(summary["pause_seconds"]) == want.pause_seconds
    assert (summary["first_fired_at"][:19].replace("T", " ") or None) == want.first_fired
    assert int(summary["hard_episodes"]) == sum(1 for e in want.episodes if e[2] == "hard")


def test_the_candidates_differ_where_their_limits_do(backtest):
    _, output = backtest
    # the hysteresis holds B in breach through its 12 MiB rounds (13-17): one episode to round 18
    assert [e for e in episodes_of(output, "hysteresis") if e[1] == "/b"] == [(2, "/b", "hard", t(10), t(18), "recovered")]
    assert [e for e in episodes_of(output, "as-recorded") if e[1] == "/b" and e[2] == "hard"] == [(2, "/b", "hard", t(10), t(13), "recovered")]
    # a ratio of 0.35 is 35 MiB: C (30 MiB) is under that soft limit from the first round on
    assert (3, "/c", "soft", t(0), t(ROUNDS - 1), "ongoing") in episodes_of(output, "ratio-soft")


def test_the_live_set_is_the_plain_report_exactly(backtest):
    report, output = backtest
    plain = read_csv(output, "episodes")
    live = [{k: v for k, v in row.items() if k != "limit_set"} for row in read_csv(output, "backtest_episodes") if row["limit_set"] == "live"]
    assert live == plain and plain
    (summary,) = [row for row in read_csv(output, "backtest") if row["limit_set"] == "live"]
    days = read_csv(output, "time_in_states")
    assert float(summary["throttle_seconds"]) == sum(float(d["throttle_seconds"]) for d in days)
    assert float(summary["pause_seconds"]) == sum(float(d["pause_seconds"]) for d in days)
    assert int(summary["hard_episodes"]) == report.episode_counts["hard"]
    assert (summary["limit_kind"], float(summary["hard_limit"]), float(summary["soft_limit"]), summary["hysteresis"]) == (
        "min-available-bytes", 10.0 * MiB, 20.0 * MiB, ""
    )
    # judged again under the limits it records, the history gives its own episodes back
    again = [{k: v for k, v in row.items() if k != "limit_set"} for row in read_csv(output, "backtest_episodes") if row["limit_set"] == "as-recorded"]
    assert again == plain


def test_the_page_and_the_terminal_show_the_sets_side_by_side(backtest):
    report, output = backtest
    page = (output / "report.html").read_text()
    assert "Limits tried on the history" in page
    header = page.split('<table data-table="backtest">', 1)[1].split("</thead>", 1)[0]
    assert [name for name in ["live", *CANDIDATES] if f"<th>{name}</th>" in header] == ["live", *CANDIDATES]
    assert '<table data-table="backtest_volumes">' in page
    printed = summary_table(report).splitlines()
    assert [line.split(":")[0] for line in printed if line.startswith("limits ")] == [f"limits {name}" for name in ["live", *CANDIDATES]]


# --- the Spark judgement is the policy's, on generated values ---


def _generated(rng: random.Random, policy: StoragePolicy, rounds: int, volumes: int) -> list[list[VolumeObservation]]:
    """Observations around the policy's levels (exactly at them too), and far from them."""
    history = []
    for r in range(rounds):
        observed = []
        for v in range(volumes):
            kind = rng.random()
            total = rng.choice([0, 1, 1000, 2**40, 2**53 - 1, rng.randrange(1, 2**53)])
            if kind < 0.05:
                observed.append(VolumeObservation(v, "/d", total, 0, r, error="KAFKA_STORAGE_ERROR"))
                continue
            if kind < 0.1:
                observed.append(VolumeObservation(v, "/d", -1, -1, r))
                continue
            levels = [policy.hard_level, policy.hard_level + policy.hysteresis, policy.soft_level or policy.hard_level]
            if policy.kind is LimitKind.MIN_AVAILABLE_BYTES:
                usable = min(total, max(0, int(rng.choice(levels)) + rng.choice([-1, 0, 0, 1, rng.randrange(-(2**30), 2**30)])))
            else:
                usable = min(total, max(0, round(rng.choice(levels) * total) + rng.choice([-1, 0, 1])))
            if rng.random() < 0.2:
                usable = rng.randrange(0, total + 1)
            observed.append(VolumeObservation(v, "/d", total, usable, r))
        history.append(observed)
    return history


def _policies(rng: random.Random) -> list[StoragePolicy]:
    policies = [
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 1000.0, 5000.0, 700.0),
        StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.1, 0.3, 0.05),
        StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.0, None, 0.0),
        StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 1 / 3, 2 / 3),
    ]
    for _ in range(4):
        hard = rng.random() * 0.5
        policies.append(StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard, rng.choice([None, hard + rng.random() * 0.4 + 1e-9]), rng.choice([0.0, rng.random() * 0.2])))
        hard_bytes = float(rng.randrange(0, 2**45))
        policies.append(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_bytes, rng.choice([None, hard_bytes + rng.randrange(1, 2**45)]), float(rng.choice([0, rng.randrange(0, 2**40)]))))
    return policies


def test_the_spark_judgement_equals_the_policy_on_generated_values_bit_for_bit(spark):
    rng = random.Random(26)
    for policy in _policies(rng):
        history = _generated(rng, policy, rounds=12, volumes=25)
        rows = [
            (f"2026-07-01T08:{r:02d}:00.000Z", o.broker_id, o.log_dir, o.total_bytes, o.usable_bytes, o.error, CHECK_INTERVAL)
            for r, observed in enumerate(history)
            for o in observed
        ]
        frame = spark.createDataFrame(
            rows, "time string, broker_id int, log_dir string, total_bytes long, usable_bytes long, log_dir_error string, check_interval_seconds double"
        ).withColumn("time", F.col("time").cast("timestamp"))
        judged = {
            (row["time"].minute, row["broker_id"]): (row["volume_status"], row["volume_factor"])
            for row in frame.transform(judged_rows(policy)).collect()
        }
        breaching: frozenset = frozenset()  # the service's memory: last round's breaching volumes
        for r, observed in enumerate(history):
            evaluation = evaluate(policy, observed, breaching)
            breaching = evaluation.breaching_keys
            listed = {v.volume.broker_id: v for v in (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged)}
            for o in observed:
                verdict = listed.get(o.broker_id)
                want = (verdict.status.value, verdict.factor) if verdict else ("ok", 1.0)
                got = judged[(r, o.broker_id)]
                assert got[0] == want[0] and got[1].hex() == float(want[1]).hex(), (policy, o, got, want)


# --- limit files ---


def test_limit_files_are_checked_by_the_services_rules_and_named_after_the_file(tmp_path, capsys):
    good = write_limits(tmp_path, "tighter", {"limit.min.available.ratio": "0.2", "soft.limit.min.available.ratio": "0.4"})
    assert _limit_sets([good]) == [LimitSet("tighter", StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.2, 0.4))]
    # a whole service configuration may be given: its other settings are passed over
    whole = tmp_path / "service.properties"
    whole.write_text(good.read_text() + "client.quota.callback.static.kafka.admin.bootstrap.servers=kafka:9092\nlog.dirs=/data\n")
    assert _limit_sets([whole])[0].policy == StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.2, 0.4)

    looser_hard = write_limits(tmp_path, "wrong", {"limit.min.available.ratio": "0.4", "soft.limit.min.available.ratio": "0.2"})
    with pytest.raises(SystemExit) as stopped:
        _limit_sets([looser_hard])
    assert stopped.value.code == 2
    message = capsys.readouterr().err
    assert f"{PREFIX}soft.limit.min.available.ratio='0.2' (from {looser_hard}): allowed: a value strictly greater than the hard limit" in message

    misspelt = write_limits(tmp_path, "typo", {"limit.min.availabel.ratio": "0.1"})
    with pytest.raises(SystemExit):
        _limit_sets([misspelt])
    assert f"did you mean {PREFIX}limit.min.available.ratio?" in capsys.readouterr().err


def test_every_problem_of_the_limit_files_is_reported_one_line_each(tmp_path, capsys):
    """A file with a misspelt key and a soft limit below its hard one, a second file with a
    value that is not a number, and a set named live: each problem is a line of its own."""
    two = write_limits(tmp_path, "two", {"limit.min.availabel.ratio": "0.1", "limit.min.available.ratio": "0.4", "soft.limit.min.available.ratio": "0.2"})
    other = write_limits(tmp_path, "other", {"limit.min.available.ratio": "abc"})
    live = write_limits(tmp_path, "live", {"limit.min.available.ratio": "0.2"})
    with pytest.raises(SystemExit) as stopped:
        _limit_sets([two, other, live])
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 4, lines
    assert all(line.startswith("throttle-report: ") for line in lines)
    assert any(f"{PREFIX}limit.min.availabel.ratio='0.1' (from {two})" in line and "did you mean" in line for line in lines)
    assert any(f"{PREFIX}soft.limit.min.available.ratio='0.2' (from {two}): allowed: a value strictly greater than the hard limit" in line for line in lines)
    assert any(f"{PREFIX}limit.min.available.ratio='abc' (from {other})" in line for line in lines)
    assert any("the recorded limits' column" in line for line in lines)


def test_a_limit_set_named_live_or_two_of_one_name_are_refused(tmp_path, capsys):
    live = write_limits(tmp_path, "live", {"limit.min.available.ratio": "0.2"})
    with pytest.raises(SystemExit):
        _limit_sets([live])
    assert "the recorded limits' column" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    twice = [write_limits(tmp_path, "x", {"limit.min.available.ratio": "0.2"}), write_limits(other, "x", {"limit.min.available.ratio": "0.3"})]
    with pytest.raises(SystemExit):
        _limit_sets(twice)
    assert "two files named 'x'" in capsys.readouterr().err
    with pytest.raises(LimitSetError):
        read_limit_set(tmp_path / "missing.properties")


# --- shadow mode ---


def test_episodes_begun_in_rows_not_enforced_are_labelled_would_have(spark, tmp_path):
    from spark.analysis.brokers import volume_summary
    from spark.reading.history import read_history

    history = tmp_path / "history"
    write_rounds(history, START, ROUNDS, VOLUMES, outage=set())
    rows = read_history(spark, str(history), str(tmp_path / "parsed")).rows
    # shadow mode until round 12, enforced after; a missing value counts as enforced
    shadow = rows.withColumn("enforced", F.when(F.col("time") < F.lit(t(12)).cast("timestamp"), F.lit(False)))
    volumes = volume_summary(shadow)
    end = HistoryEnd(START.timestamp() + CHECK_INTERVAL * (ROUNDS - 1), START.timestamp() + CHECK_INTERVAL * (ROUNDS - 1))
    episodes = [row.asDict() for row in violation_episodes(shadow, volumes, end).transform(with_enforcement(shadow)).collect()]
    enforced = {(e["log_dir"], e["limit"]): e["enforced"] for e in episodes}
    assert enforced == {("/a", "hard"): True, ("/a", "soft"): True, ("/b", "hard"): False, ("/b", "soft"): False}
    without = [row.asDict() for row in violation_episodes(rows, volumes, end).transform(with_enforcement(rows)).collect()]
    assert {e["enforced"] for e in without} == {True}

    shown = [{**e, "start": str(e["start"]), "end": str(e["end"])} for e in episodes]
    page = table_html("episodes", shown, len(shown))
    assert page.count("(would have)") == 2
