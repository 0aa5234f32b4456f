"""The chart series of a long history (more than CHART_BUCKETS cells of CELL_SECONDS): made of
each file's cells, in buckets of whole cells, and equal to what an independent reading of the
rows gives in the same buckets: every point (the lowest usable bytes of a bucket, at the
bucket's first row), every limit step, the largest total. With and without the cache, with a
file whose rows fall in cells of other files (the cells of two files combined), limits changed
mid-way, unjudged rows left out, and a one-round dip kept. A short history keeps buckets of
rows: those start at its first row, not on a cell."""

from __future__ import annotations

import json
import math
from datetime import timedelta
from pathlib import Path

import pytest

from spark.analysis.chart_data import CELL_SECONDS, CHART_BUCKETS, cell_buckets
from spark.job import run_report
from spark.report import Report

from .synthetic import HARD, SOFT, TOTAL, MiB, at, status_of, volume_row

START = at(2026, 6, 1, 0, 3, 17)
INTERVAL = 300.0  # few rows for a long history: two rounds a cell
ROUNDS = 73 * 12  # 73 hours: 438 cells, so buckets of 2 cells
VOLUMES = [(1, "/data/a"), (1, "/data/b"), (2, "/data/a"), (2, "/data/b"), (3, "/data/a")]
# Volume (1, /data/a)'s rows of these rounds are written to a file of their own beside the day's
# file: a cell of rows of both files is combined.
# Rounds 300 and 301 share a cell, and so do 304 and 305: each of those cells has rows of both
# files, the first of one and the lowest of the other.
ASIDE = range(301, 305)
DIP = 441  # a single round far below the rest, inside a bucket


def limits(i: int) -> tuple[int, int | None]:
    if i < 360:
        return HARD, SOFT
    if i < 620:
        return HARD, 25 * MiB
    return 8 * MiB, None


BASE = {(1, "/data/a"): 30 * MiB, (2, "/data/a"): 35 * MiB, (2, "/data/b"): 50 * MiB, (3, "/data/a"): 55 * MiB}


def usable(volume: tuple[int, str], i: int) -> int:
    """(1, /data/b) fills steadily (forecast to reach its hard limit: charted first); the others
    free space with a wiggle (no forecast), charted by their lowest headroom: (1, /data/a) with
    its dip, then (2, /data/a), (2, /data/b); (3, /data/a) is not charted."""
    if volume == (1, "/data/b"):
        return 90 * MiB - i * 75 * 1024
    if volume == (2, "/data/a") and i % 7 == 0:
        return -1  # the broker did not report the volume's bytes: not charted
    if volume == (1, "/data/a") and i == DIP:
        return 3 * MiB
    if volume == (1, "/data/a") and i in ASIDE:
        return BASE[volume] - MiB - i
    return BASE[volume] + i * 10 * 1024 - (i * 37 % 7) * 5 * 1024


def moment(i: int):
    return START + timedelta(seconds=INTERVAL * i)


def round_lines(i: int, volumes: list[tuple[int, str]]) -> str:
    hard, soft = limits(i)
    observed = {volume: usable(volume, i) for volume in volumes}
    statuses = {status_of(u, hard, soft) for u in observed.values() if u >= 0}
    state = "PAUSE" if "breaching" in statuses else "THROTTLE" if "ramping" in statuses else "OPEN"
    rows = [volume_row(moment(i), b, d, u, state, hard=hard, soft=soft) for (b, d), u in observed.items()]
    return "".join(json.dumps({**row, "check_interval_seconds": INTERVAL}) + "\n" for row in rows)


def write_days(folder: Path, rounds: int, volumes: list[tuple[int, str]], aside: range = range(0)) -> None:
    """A file per day (the reader takes any file, not only the service's hourly ones), and the
    rounds ``aside`` of (1, /data/a) in a file of their own."""
    days: dict[str, list[str]] = {}
    for i in range(rounds):
        days.setdefault(f"{moment(i):%Y-%m-%d}", []).append(round_lines(i, [v for v in volumes if not (i in aside and v == (1, "/data/a"))]))
    for day, lines in days.items():
        (folder / f"date={day}").mkdir(parents=True)
        (folder / f"date={day}" / "day.jsonl").write_text("".join(lines))
    if aside:
        (folder / f"date={moment(aside[0]):%Y-%m-%d}" / "aside.jsonl").write_text("".join(round_lines(i, [(1, "/data/a")]) for i in aside))


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("chart-cells") / "history"
    write_days(folder, ROUNDS, VOLUMES, ASIDE)
    return folder


def steps(levels: list[tuple[float, float | None, float, float | None]]) -> list[tuple[float, float | None]]:
    found: list[tuple[float, float | None]] = []
    for first_t, first, last_t, last in levels:
        for t, value in ((first_t, first), (last_t, last)):
            if not found or found[-1][1] != value:
                found.append((t, value))
    return found


def expected_series(volume: tuple[int, str]) -> dict:
    """The series of ``volume`` read from the rows as generated, in buckets of whole cells."""
    first, last = moment(0).timestamp(), moment(ROUNDS - 1).timestamp()
    first_cell = math.floor(first / CELL_SECONDS)
    width = math.ceil((math.floor(last / CELL_SECONDS) + 1 - first_cell) / CHART_BUCKETS)
    buckets: dict[int, list[tuple[float, int, float, float | None]]] = {}
    for i in range(ROUNDS):
        u = usable(volume, i)
        if u < 0:
            continue
        t = moment(i).timestamp()
        bucket = min((math.floor(t / CELL_SECONDS) - first_cell) // width, CHART_BUCKETS - 1)
        hard, soft = limits(i)
        buckets.setdefault(bucket, []).append((t, u, float(hard), None if soft is None else float(soft)))
    rows = [sorted(buckets[b]) for b in sorted(buckets)]
    return {
        "points": [(r[0][0], min(u for _, u, _, _ in r)) for r in rows],
        "hard": steps([(r[0][0], r[0][2], r[-1][0], r[-1][2]) for r in rows]),
        "soft": steps([(r[0][0], r[0][3], r[-1][0], r[-1][3]) for r in rows]),
        "buckets": len(rows),
    }


@pytest.fixture(scope="module")
def reports(spark, history, tmp_path_factory) -> dict[bool, Report]:
    """The report of the history, from the cache (True) and without one (False)."""
    root = tmp_path_factory.mktemp("chart-cells-reports")
    return {
        use_cache: run_report(spark, str(history), str(root / f"out-{use_cache}"), cache=str(root / "cache") if use_cache else None)
        for use_cache in (True, False)
    }


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_a_long_historys_series_are_its_rows_in_buckets_of_whole_cells(reports, use_cache):
    report = reports[use_cache]
    grid = cell_buckets(report.first, report.last)
    assert grid is not None and grid.cells == 2
    assert [(s.broker_id, s.log_dir) for s in report.series] == [(1, "/data/b"), (1, "/data/a"), (2, "/data/a"), (2, "/data/b")]
    for series in report.series:
        volume = (series.broker_id, series.log_dir)
        want = expected_series(volume)
        assert series.points == want["points"], volume
        assert series.hard == want["hard"] and series.soft == want["soft"], volume
        assert series.total_bytes == TOTAL
        assert len(series.points) == want["buckets"] <= CHART_BUCKETS
    assert report.series[0].projected is not None and all(s.projected is None for s in report.series[1:])


def test_the_dip_and_the_aside_file_are_charted(reports):
    """The dip is the lowest point of its bucket (drawn at the bucket's first row); a bucket of
    cells with rows of both files starts at the first row of either and is as low as the lowest."""
    (series,) = [s for s in reports[True].series if (s.broker_id, s.log_dir) == (1, "/data/a")]
    (dip,) = [t for t, u in series.points if u == 3 * MiB]  # at its bucket's first row
    assert 0 <= moment(DIP).timestamp() - dip < 2 * CELL_SECONDS
    shared = [(moment(300).timestamp(), usable((1, "/data/a"), 303)), (moment(304).timestamp(), usable((1, "/data/a"), 304))]
    assert all(p in series.points for p in shared)


def test_a_short_historys_buckets_start_at_its_first_row(spark, tmp_path):
    """Under CHART_BUCKETS cells (here 6 hours), a bucket is a 360th of the history from its
    first row (59 s here), so every round (5 minutes apart) is a point of its own."""
    folder = tmp_path / "history"
    write_days(folder, 72, VOLUMES[:2])
    report = run_report(spark, str(folder), str(tmp_path / "out"))
    assert cell_buckets(report.first, report.last) is None
    (filling,) = [s for s in report.series if (s.broker_id, s.log_dir) == (1, "/data/b")]
    assert filling.points == [(moment(i).timestamp(), usable((1, "/data/b"), i)) for i in range(72)]
