"""The report on history format 2 (compact, closed hours compressed) against the report on format 1
(a full row per volume per round) of the same rounds, both written by the service's own writer
from rounds its own decider judged (``synthetic.service_rounds``).

The reader gives every row of the full history, round by round, from the compact one, from one
that mixes both formats (a restart mid-hour) and from one a crash left with a truncated last line
(skipped and counted). The report is equal in every value: the episodes, the time in states, the brokers' table but for two columns,
and the backtest's tables under the live limits and under looser ones. Between two rows of an
``ok`` volume format 2 keeps the first row's usable bytes (the decision saw nothing worth a
row), so what reads those bytes of ok volumes is equal within the usable-bytes share (1% of the
volume): the brokers' lowest usable bytes and ratio, the forecast (fill rate within 10%, its
projection within 10% of the time to the limit), and a backtest under limits tighter than live
(its hard breaches are those of rows live judged not ok, which format 2 keeps every round;
its soft ones may start a few rounds apart)."""

from __future__ import annotations

import csv
import bz2
import shutil
from pathlib import Path

import pytest

from app.decision.policy import LimitKind, StoragePolicy
from app.history.compact import Compaction
from app.history.schema import Codec
from spark.analysis.backtest import LimitSet
from spark.job import run_report
from spark.reading.history import read_history, skipped_by_reason

from .synthetic import HARD, TOTAL, MiB, append_raw, at, write_service_history

START = at(2026, 6, 1, 9, 40)
ROUNDS = 200
SHARE = 0.01
LOOSER = LimitSet("looser", StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 6 * MiB, 12 * MiB))
TIGHTER = LimitSet("tighter", StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, HARD, 40 * MiB))
TABLES = ("episodes", "time_in_states", "brokers", "forecast", "backtest", "backtest_episodes", "backtest_volumes")
# The brokers' columns read from the usable bytes of ok volumes, and from the forecast.
NEAR = {"min_usable_bytes": SHARE * TOTAL, "min_available_ratio": SHARE}
FORECAST = ("soonest_hard_limit_at", "fastest_fill_rate_bytes_per_second")
# What a row between two of an ok volume's rows repeats from the first: its observation.
OBSERVATION = ("usable_bytes", "available_ratio", "observed_at", "observation_age_seconds")


def tables(output: Path) -> dict[str, list[dict]]:
    result = {}
    for name in TABLES:
        with (output / f"{name}.csv").open() as handle:
            result[name] = list(csv.DictReader(handle))
    return result


@pytest.fixture(scope="module")
def histories(tmp_path_factory):
    root = tmp_path_factory.mktemp("compact")
    write_service_history(root / "full", START, ROUNDS, codec=Codec.GZIP)  # both codecs are read
    write_service_history(root / "compact", START, ROUNDS, Compaction(300, SHARE))
    # the service's format 1 for the first 110 rounds, then a restart writing format 2 mid-hour
    write_service_history(root / "mixed", START, ROUNDS, only=range(110))
    write_service_history(root / "mixed", START, ROUNDS, Compaction(300, SHARE), only=range(110, ROUNDS))
    # killed mid-write in the last hour: a truncated last line
    shutil.copytree(root / "compact", root / "crashed")
    append_raw(root / "crashed", at(2026, 6, 1, 12, 59), '{"time":"2026-06-01T12:59:30.000Z","row":"volume","broker_id":1,"log_d')
    return root


@pytest.fixture(scope="module")
def reports(spark, histories):
    reports = {}
    for name in ("full", "compact"):
        output = histories / f"{name}-report"
        report = run_report(spark, str(histories / name), str(output), limit_sets=[LOOSER, TIGHTER])
        reports[name] = (report, tables(output), histories / name)
    return reports


def rows_read(spark, histories: Path, name: str) -> tuple[list[dict], dict[str, int]]:
    history = read_history(spark, str(histories / name), str(histories / f"{name}-parsed"))
    rows = [row.asDict() for row in history.rows.drop("chunk").collect()]
    key = lambda r: (r["time"], r["broker_id"] or -1, r["log_dir"] or "", r["holds"] or "")  # noqa: E731
    return sorted(rows, key=key), skipped_by_reason(history.lines)


@pytest.mark.parametrize("history", ["compact", "mixed", "crashed"])
def test_the_reader_gives_the_rows_of_the_full_history_round_by_round(spark, histories, history):
    want, skipped_full = rows_read(spark, histories, "full")
    got, skipped = rows_read(spark, histories, history)
    assert skipped_full == {} and skipped == ({"unreadable": 1} if history == "crashed" else {})
    assert len(got) == len(want) > 1000
    for expected, actual in zip(want, got):
        same = [name for name in expected if name not in OBSERVATION]
        assert {n: actual[n] for n in same} == {n: expected[n] for n in same}
        if expected["volume_status"] != "ok" or expected["kept"] is not None:
            assert actual == expected
        elif actual["usable_bytes"] != expected["usable_bytes"]:
            assert abs(actual["usable_bytes"] - expected["usable_bytes"]) <= SHARE * TOTAL


def assert_equal_rows(want: list[dict], got: list[dict], near: dict[str, float] = {}, skip: tuple = ()) -> None:
    assert len(got) == len(want)
    for expected, actual in zip(want, got):
        assert actual.keys() == expected.keys()
        for column, value in expected.items():
            if column in skip:
                continue
            if column in near and value and actual[column]:
                assert abs(float(actual[column]) - float(value)) <= near[column], (column, expected, actual)
            else:
                assert actual[column] == value, (column, expected, actual)


def test_episodes_time_in_states_brokers_and_backtest_equal_those_of_the_full_history(reports):
    _, full, _ = reports["full"]
    _, other, _ = reports["compact"]
    assert full["episodes"] and any(e["limit"] == "hard" for e in full["episodes"])
    assert_equal_rows(full["episodes"], other["episodes"])
    assert_equal_rows(full["time_in_states"], other["time_in_states"])
    assert_equal_rows(full["brokers"], other["brokers"], near=NEAR, skip=FORECAST)
    for name in ("backtest", "backtest_episodes", "backtest_volumes"):
        exact = [row for row in full[name] if row["limit_set"] in ("live", "looser")]
        assert exact and assert_equal_rows(exact, [row for row in other[name] if row["limit_set"] in ("live", "looser")]) is None
    tighter = lambda rows: [r for r in rows if r["limit_set"] == "tighter"]  # noqa: E731
    want, got = tighter(full["backtest"])[0], tighter(other["backtest"])[0]
    assert (got["hard_episodes"], got["hard_breach_seconds"], got["pause_seconds"]) == (want["hard_episodes"], want["hard_breach_seconds"], want["pause_seconds"])


def test_the_forecast_is_within_its_tolerance(reports):
    _, full, _ = reports["full"]
    _, compact, _ = reports["compact"]
    assert [(r["broker_id"], r["log_dir"]) for r in compact["forecast"]] == [(r["broker_id"], r["log_dir"]) for r in full["forecast"]]
    for want, got in zip(full["forecast"], compact["forecast"]):
        if want["fill_rate_bytes_per_second"] and got["fill_rate_bytes_per_second"]:
            rate, expected = float(got["fill_rate_bytes_per_second"]), float(want["fill_rate_bytes_per_second"])
            assert abs(rate - expected) <= 0.1 * abs(expected), (want, got)


def test_the_closed_hours_are_compressed_and_read_and_the_compact_history_is_a_fraction_of_the_full(reports):
    (full_report, _, full), (compact_report, _, compact) = reports["full"], reports["compact"]
    names = sorted(p.name for p in compact.rglob("history-*"))
    assert names == ["history-09.jsonl.bz2", "history-10.jsonl.bz2", "history-11.jsonl.bz2", "history-12.jsonl"]
    assert all(bz2.decompress(p.read_bytes()) for p in compact.rglob("*.bz2"))
    assert sorted(p.name for p in full.rglob("history-*"))[0] == "history-09.jsonl.gz"
    size = lambda folder: sum(p.stat().st_size for p in folder.rglob("history-*"))  # noqa: E731
    # both compress their closed hours (the full one with gzip, the compact one bzip2); this simulation's saw-tooths move 0.5% of a volume a round,
    # so an ok volume gets a row every few rounds here (bench/bench_history.py has a realistic mix)
    assert size(compact) < size(full) / 4
    assert compact_report.rows == full_report.rows  # expanded: a row per volume per round
    assert compact_report.skipped_lines == 0 == full_report.skipped_lines
    assert compact_report.unexplained_rounds == 0 == full_report.unexplained_rounds
