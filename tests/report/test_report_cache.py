"""The parsed-history cache (``--cache``): a day is parsed once and read again only when its
files change, and a report from the cache is the report from the files, to the byte."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from spark.analysis import partials
from spark.job import run_report
from spark.reading import cache as cache_module
from spark.reading.cache import BATCH_BYTES, BATCH_FILES, HistoryFile, batches
from spark.reading.history import read_history

from .synthetic import MiB, at, write_rounds

DAYS = [at(2026, 8, 1, 10, 0), at(2026, 8, 2, 10, 0), at(2026, 8, 3, 10, 0)]
TABLES = ("episodes", "time_in_states", "brokers", "forecast")


def volumes() -> dict:
    return {
        (1, "/data/a"): lambda i: 90 * MiB - i * MiB,  # filling, into the soft then the hard limit
        (2, "/data/b"): lambda i: 5 * MiB if i % 7 < 2 else 40 * MiB,
    }


def csvs(output: Path) -> dict[str, bytes]:
    return {name: (output / f"{name}.csv").read_bytes() for name in TABLES}


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """Four reports: from an empty cache, again with nothing changed, again after rounds were
    appended to the last day, and that last history without a cache."""
    history, cache = tmp_path_factory.mktemp("history"), tmp_path_factory.mktemp("cache")
    for day in DAYS:
        write_rounds(history, day, 40, volumes(), outage=set())

    def report(name: str, use_cache: bool = True):
        output = tmp_path_factory.mktemp(name)
        result = run_report(spark, str(history), str(output), cache=str(cache) if use_cache else None)
        return result, csvs(output)

    cold = report("cold")
    unchanged = report("unchanged")
    write_rounds(history, DAYS[-1].replace(hour=11), 30, volumes(), outage=set())  # today goes on
    one_day = report("one-day")
    uncached = report("uncached", use_cache=False)

    def between(name: str, use_cache: bool):  # the second and third days only
        output = tmp_path_factory.mktemp(name)
        result = run_report(spark, str(history), str(output), since=DAYS[1], until=DAYS[2].replace(hour=10, minute=30), cache=str(cache) if use_cache else None)
        return result, csvs(output)

    ranged = between("ranged", True), between("ranged-uncached", False)
    after_range = report("after-range")
    return {"cold": cold, "unchanged": unchanged, "one_day": one_day, "uncached": uncached, "ranged": ranged, "after_range": after_range}


def test_a_cold_run_parses_every_day(runs):
    result, _ = runs["cold"]
    assert result.parsed_days == ("2026-08-01", "2026-08-02", "2026-08-03") and result.reused_days == ()


def test_a_second_run_parses_nothing_when_nothing_changed_and_writes_the_same_tables(runs):
    result, tables = runs["unchanged"]
    assert result.parsed_days == () and result.reused_days == ("2026-08-01", "2026-08-02", "2026-08-03")
    assert tables == runs["cold"][1]


def test_a_run_after_one_day_changed_parses_that_day_only_and_equals_a_run_without_the_cache(runs):
    result, tables = runs["one_day"]
    assert result.parsed_days == ("2026-08-03",) and result.reused_days == ("2026-08-01", "2026-08-02")
    assert result.rows == runs["uncached"][0].rows == (3 * 40 + 30) * 2
    assert tables == runs["uncached"][1]
    assert tables != runs["cold"][1]  # the appended rounds are in it


def test_a_run_with_since_and_until_from_the_cache_equals_one_without_and_leaves_the_other_days_cached(runs):
    (cached, cached_tables), (uncached, uncached_tables) = runs["ranged"]
    assert cached.rows == uncached.rows == (40 + 30) * 2 and cached_tables == uncached_tables
    assert cached.parsed_days == () and cached.reused_days == ("2026-08-02", "2026-08-03")
    after, tables = runs["after_range"]
    assert after.parsed_days == () and tables == runs["one_day"][1]


def test_files_named_with_spaces_and_escapes_are_read_and_cached(spark, tmp_path):
    """Spark names a line's file by its escaped URI; the cache maps it back to the file."""
    history, cache = tmp_path / "history", tmp_path / "cache"
    write_rounds(history, DAYS[0], 5, volumes(), outage=set())
    (file,) = history.rglob("*.jsonl")
    file.rename(file.with_name("hour 10+a%25b#c é.jsonl"))
    result = run_report(spark, str(history), str(tmp_path / "out"), cache=str(cache))
    assert result.rows == 5 * 2 and result.parsed_days == ("2026-08-01",)


def test_files_first_parsed_by_a_run_with_since_give_a_later_whole_run_every_table(spark, tmp_path):
    """A run with --since parses the files it reads into the cache: with what is derived from
    them, so that a later run over the whole history finds every file's share."""
    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS[:2]:
        write_rounds(history, day, 20, volumes(), outage=set())
    run_report(spark, str(history), str(tmp_path / "ranged"), since=DAYS[1], cache=str(cache))
    whole = run_report(spark, str(history), str(tmp_path / "whole"), cache=str(cache))
    run_report(spark, str(history), str(tmp_path / "uncached"))
    assert whole.parsed_days == ("2026-08-01",) and whole.reused_days == ("2026-08-02",)
    assert csvs(tmp_path / "whole") == csvs(tmp_path / "uncached")


def test_batches_hold_at_most_batch_files_files_and_batch_bytes_bytes_in_the_historys_order():
    def file(date: str | None, name: str, size: int) -> HistoryFile:
        return HistoryFile(f"/h/{date}/{name}", f"file:/h/{date}/{name}", date, f"k{date}{name}", size)

    week = [file(f"2026-08-0{d}", f"hour-{h:02d}.jsonl", 1000) for d in range(1, 9) for h in range(24)]
    found = batches(list(reversed(week)))
    assert [len(b) for b in found] == [BATCH_FILES, 8 * 24 - BATCH_FILES] and [f for b in found for f in b] == week
    big = BATCH_BYTES // 3 + 1
    heavy = [file("2026-08-01", f"hour-{h:02d}.jsonl", big) for h in range(5)] + [file("2026-08-02", "huge.jsonl", 2 * BATCH_BYTES)]
    assert [[f.path.rsplit("/", 1)[1] for f in b] for b in batches(heavy)] == [
        ["hour-00.jsonl", "hour-01.jsonl"],
        ["hour-02.jsonl", "hour-03.jsonl"],
        ["hour-04.jsonl"],
        ["huge.jsonl"],  # over BATCH_BYTES alone: a batch of its own
    ]
    assert batches([]) == []


def test_a_cold_run_parses_in_batches_and_a_run_stopped_half_way_keeps_the_batches_it_finished(spark, tmp_path, monkeypatch):
    """What one parse holds grows with its files (30 days of 1,000 x 12 in one parse ran the
    driver out of memory): the files are parsed, derived and put in the cache a batch at a time
    (here a file, a day, each). A run stopped in the third batch's parse (here its derive fails)
    leaves the first two days cached, and the next run parses the third only."""
    monkeypatch.setattr(cache_module, "BATCH_FILES", 1)
    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS:
        write_rounds(history, day, 5, volumes(), outage=set())
    parses: list[set[str]] = []

    def failing_on_the_third(lines, persisted):
        if persisted is not None:  # a parse (the schemas are worked out without a list)
            parses.append({row["time"].date().isoformat() for row in lines.select("time").distinct().collect()})
            if len(parses) == 3:
                raise RuntimeError("stopped")
        return partials.derive(lines, persisted)

    with pytest.raises(RuntimeError, match="stopped"):
        read_history(spark, str(history), str(tmp_path / "scratch"), cache=str(cache), derive=failing_on_the_third)
    assert parses == [{"2026-08-01"}, {"2026-08-02"}, {"2026-08-03"}]
    assert len(list((cache / "done").iterdir())) == 2
    again = run_report(spark, str(history), str(tmp_path / "again"), cache=str(cache))
    assert again.parsed_days == ("2026-08-03",) and again.reused_days == ("2026-08-01", "2026-08-02")
    run_report(spark, str(history), str(tmp_path / "uncached"))
    assert csvs(tmp_path / "again") == csvs(tmp_path / "uncached")


def test_a_run_with_since_derives_the_tables_of_the_rows_in_range_in_batches(spark, tmp_path, monkeypatch):
    """With --since or --until the per-file tables are derived again from the rows in range:
    in the same batches (here a file, a day, each), each table the union of the batches', equal
    to a run over the same range without the cache."""
    monkeypatch.setattr(cache_module, "BATCH_FILES", 1)
    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS:
        write_rounds(history, day, 5, volumes(), outage=set())
    run_report(spark, str(history), str(tmp_path / "whole"), cache=str(cache))  # every day cached
    derived: list[set[str]] = []

    def recording(lines, persisted):
        derived.append({row["time"].date().isoformat() for row in lines.select("time").distinct().collect() if row["time"]})
        return partials.derive(lines, persisted)

    since = DAYS[0].replace(minute=2)
    read_history(spark, str(history), str(tmp_path / "scratch"), since=since, cache=str(cache), derive=recording)
    assert derived == [{"2026-08-01"}, {"2026-08-02"}, {"2026-08-03"}]
    ranged = run_report(spark, str(history), str(tmp_path / "ranged"), since=since, cache=str(cache))
    run_report(spark, str(history), str(tmp_path / "ranged-uncached"), since=since)
    assert ranged.parsed_days == () and csvs(tmp_path / "ranged") == csvs(tmp_path / "ranged-uncached")


def test_a_report_leaves_nothing_persisted_in_the_session(spark, tmp_path):
    """A long-lived session (a notebook, a scheduler's driver, these tests) runs report after
    report: every frame a run persists is unpersisted at its end, also when the run fails."""
    from app.decision.policy import LimitKind, StoragePolicy
    from spark.analysis.backtest import LimitSet
    from spark.job import EmptyHistory

    def persisted() -> bool:
        return not spark._jsparkSession.sharedState().cacheManager().isEmpty()

    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS[:2]:
        write_rounds(history, day, 20, volumes(), outage=set())
    spark.catalog.clearCache()
    tighter = LimitSet("tighter", StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.2, 0.4))
    run_report(spark, str(history), str(tmp_path / "cold"), cache=str(cache), limit_sets=[tighter])
    assert not persisted()
    run_report(spark, str(history), str(tmp_path / "ranged"), since=DAYS[1], cache=str(cache))
    assert not persisted()
    run_report(spark, str(history), str(tmp_path / "uncached"))
    assert not persisted()
    with pytest.raises(EmptyHistory):
        run_report(spark, str(history), str(tmp_path / "empty"), since=at(2027, 1, 1, 0, 0))
    assert not persisted()


def test_the_tables_schemas_are_kept_in_the_cache_and_worked_out_again_when_unreadable_or_of_other_code(spark, tmp_path):
    """The schemas the cached tables are read back with are worked out by planning every derived
    table (seconds of the driver's time): kept in the cache under a key over the code, read back
    as they were worked out, and worked out again when the file is not readable. A file of
    another key (code since changed) is removed."""
    from pyspark.sql import types as T

    from spark.analysis import partials
    from spark.reading.cache import CHUNK, FileSystem, _table_schemas, empty
    from spark.reading.history import LINES_SCHEMA

    lines = T.StructType([*LINES_SCHEMA.fields, T.StructField(CHUNK, T.StringType())])
    expected = {"lines": lines, **{name: frame.schema for name, frame in partials.derive(empty(spark, lines), None).items()}}
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "schemas-0123.json").write_text("{}")  # an earlier version's
    fs = FileSystem(spark, str(cache))
    assert _table_schemas(spark, fs, str(cache), partials.derive, lines) == expected
    kept = list(cache.glob("schemas-*.json"))
    assert [p.name for p in kept] != ["schemas-0123.json"] and len(kept) == 1

    def derive_never(lines, persisted):
        raise AssertionError("the schemas were worked out again although the cache holds them")

    assert _table_schemas(spark, fs, str(cache), derive_never, lines) == expected
    kept[0].write_bytes(kept[0].read_bytes()[:40])  # a file cut short
    assert _table_schemas(spark, fs, str(cache), partials.derive, lines) == expected
    assert _table_schemas(spark, fs, str(cache), derive_never, lines) == expected


def _jobs(spark, run):
    """What ``run()`` gives, and the Spark jobs it ran."""
    context, group = spark.sparkContext, f"counted-{uuid.uuid4().hex}"
    context.setJobGroup(group, "the jobs of one call")
    try:
        result = run()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(group))


def _shown(report):
    """What the page and the terminal show of a report, beside where it ran and for how long."""
    return {name: value for name, value in vars(report).items() if name not in ("output", "seconds", "parsed_days", "reused_days")}


def _parquet(spark, output: Path, names) -> dict[str, list]:
    return {name: sorted(map(tuple, spark.read.parquet(str(output / "parquet" / name)).collect()), key=repr) for name in names}


def test_a_run_over_the_files_of_the_last_report_hands_it_back_without_a_spark_job(spark, tmp_path):
    """The cache keeps the last report made from it: a run over the same files with the same
    options (here a --limits set too) copies its tables and writes its page, with no Spark job,
    and they equal the ones computed, byte for byte; so does what the run hands back."""
    from app.decision.policy import LimitKind, StoragePolicy
    from spark.analysis.backtest import LimitSet

    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS[:2]:
        write_rounds(history, day, 20, volumes(), outage=set())
    tighter = [LimitSet("tighter", StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.2, 0.4))]
    first, computed = _jobs(spark, lambda: run_report(spark, str(history), str(tmp_path / "first"), cache=str(cache), limit_sets=tighter))
    again, reused = _jobs(spark, lambda: run_report(spark, str(history), str(tmp_path / "again"), cache=str(cache), limit_sets=tighter))
    assert computed > 10 and reused == 0
    names = list(first.table_sizes)
    assert "backtest" in names and len(names) > len(TABLES)
    for name in names:
        assert (tmp_path / "again" / f"{name}.csv").read_bytes() == (tmp_path / "first" / f"{name}.csv").read_bytes()
    assert _parquet(spark, tmp_path / "again", names) == _parquet(spark, tmp_path / "first", names)
    assert (tmp_path / "again" / "report.html").read_bytes() == (tmp_path / "first" / "report.html").read_bytes()
    assert _shown(again) == _shown(first) and again.output == str(tmp_path / "again")
    assert again.parsed_days == () and again.reused_days == ("2026-08-01", "2026-08-02")
    # Without the limits the tables differ: made again, and the backtest's leave the output.
    plain, jobs = _jobs(spark, lambda: run_report(spark, str(history), str(tmp_path / "again"), cache=str(cache)))
    assert jobs > 0 and set(plain.table_sizes) == set(TABLES)
    assert not (tmp_path / "again" / "backtest.csv").exists()
    assert len(list((cache / "reports").iterdir())) == 1  # the last report only


def test_a_changed_file_another_option_or_an_unreadable_kept_report_makes_the_report_again(spark, tmp_path):
    history, cache = tmp_path / "history", tmp_path / "cache"
    for day in DAYS[:2]:
        write_rounds(history, day, 20, volumes(), outage=set())
    options: dict = {}

    def report(name: str, compare: bool = False) -> tuple:
        result, jobs = _jobs(spark, lambda: run_report(spark, str(history), str(tmp_path / name), cache=str(cache), **options))
        if compare:  # equal to the report made without the cache
            uncached = run_report(spark, str(history), str(tmp_path / f"{name}-uncached"), **options)
            assert csvs(tmp_path / name) == csvs(tmp_path / f"{name}-uncached") and _shown(result) == _shown(uncached)
        return result, jobs

    assert report("first")[1] > 0
    for option, value in (("max_gap_seconds", 45.0), ("forecast_window_seconds", 1800.0), ("since", DAYS[0].replace(minute=5))):
        options[option] = value
        assert report(option)[1] > 0, option
    assert report("again")[1] == 0
    (last,) = history.glob("date=2026-08-02/*")
    os.utime(last, ns=(last.stat().st_atime_ns, last.stat().st_mtime_ns + 1))  # the same bytes, touched
    touched, jobs = report("touched", compare=True)
    assert jobs > 0 and touched.parsed_days == ("2026-08-02",)
    (kept,) = (cache / "reports").glob("*/report.json")
    kept.write_bytes(kept.read_bytes()[:100])  # cut short
    assert report("cut", compare=True)[1] > 0
    assert report("after-cut")[1] == 0
    (kept_csv,) = (cache / "reports").glob("*/brokers.csv")
    kept_csv.unlink()  # a table of the kept report removed by hand
    assert report("table-removed", compare=True)[1] > 0
    assert report("after-removed")[1] == 0


def test_a_report_kept_as_json_comes_back_as_it_was():
    from datetime import date

    from spark.report import Report, StateBucket, VolumeSeries, report_from_json, report_json

    report = Report("in", "out", 10, 1, 1.5, 99.25, None, 3600.0, volumes=2, episode_counts={"hard": 1, "soft": 0, "ongoing": 1})
    report.tables = {"time_in_states": [{"day": date(2026, 8, 1), "throttle_seconds": 0.1}], "episodes": [{"start": "2026-08-01 10:00:00Z", "ongoing": True, "peak": None}]}
    report.table_sizes = {"time_in_states": 1, "episodes": 1}
    report.series = [
        VolumeSeries(1, "/data/a", 100, [(1.5, 10.0), (50.0, None)], [], [(1.5, 90), (99.25, 5)], (120.0, 10.0)),
        VolumeSeries(2, "/data/b", 100, [(1.5, 10.0)], [(1.5, 20.0)], [(1.5, 50)], None),
    ]
    report.timeline = [StateBucket(1.5, 60.0, "THROTTLE", True, 3)]
    report.skipped_by_reason = {"unreadable": 1}
    report.reused_days = ("2026-08-01",)
    report.seconds = {"total": 2.5}
    assert report_from_json(report_json(report)) == report


def _midnights(history: Path) -> None:
    """Five days: a burst of 80 rounds across each midnight from 1 to 5 August (23:20-00:39),
    and one on the first morning. Days 2-4 are closed days (packed); their episodes cross
    midnight, start at a day's first round or end at its last, swing between the soft and the
    hard limit, and meet rounds that did not judge or see their volume."""

    def burst(n: int):
        return {
            (1, "/data/a"): lambda i: 5 * MiB if n == 2 and 30 <= i <= 60 else 60 * MiB,
            (2, "/data/b"): lambda i: (5 * MiB if i == 40 else 15 * MiB) if n == 3 and 35 <= i <= 45 else 50 * MiB,
            (3, "/data/c"): lambda i: 5 * MiB if (n == 1 and i == 79) or (n == 2 and i < 3) else 70 * MiB,
            (4, "/data/d"): lambda i: (-1 if i == 20 else 5 * MiB) if n == 3 and i < 25 else None if n == 3 and i < 28 else 40 * MiB,
            (5, "/data/e"): lambda i: 80 * MiB - (i % 5) * MiB,
        }

    write_rounds(history, at(2026, 8, 1, 10, 0), 20, burst(0), outage=set())
    for n in range(1, 5):
        write_rounds(history, at(2026, 8, n, 23, 20), 80, burst(n), outage={10} if n == 2 else set())


def test_closed_days_are_packed_and_stand_for_their_files_shares_exactly(spark, tmp_path):
    """The cache packs each closed day (not the first, not the last) of the volume summaries, the
    episodes' segments and the chart's cells: a report from the packs equals one without the
    cache (its chart drawn from cells: 86 hours); with the
    packed files' own shares removed, it still does (the packs carry them); a --max-gap run reads
    the files' own shares, and equals one without the cache too."""
    history, cache = tmp_path / "history", tmp_path / "cache"
    _midnights(history)

    def both(name: str, **options) -> dict:
        cached = run_report(spark, str(history), str(tmp_path / name), cache=str(cache), **options)
        uncached = run_report(spark, str(history), str(tmp_path / f"{name}-uncached"), **options)
        assert csvs(tmp_path / name) == csvs(tmp_path / f"{name}-uncached"), name
        assert _shown(cached) == _shown(uncached), name
        return csvs(tmp_path / name)

    tables = both("packed")
    episodes = tables["episodes"].decode().splitlines()
    assert len(episodes) > 5 and any(",gap," in line for line in episodes)
    packs = sorted(p.name for p in (cache / "packs" / "done").iterdir())
    assert [p[:10] for p in packs] == ["2026-08-02", "2026-08-03", "2026-08-04"]
    both("gap", max_gap_seconds=90.0)
    (cache / "packs" / "volumes" / "pack=left-by-a-stopped-run").mkdir()
    touched = sorted((history / "date=2026-08-04").iterdir())[0]
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 1))
    both("touched")  # its day packed again, under another key; the old pack leaves the cache
    again = sorted(p.name for p in (cache / "packs" / "done").iterdir())
    assert again[:2] == packs[:2] and again[2] != packs[2] and again[2][:10] == "2026-08-04"
    assert sorted(p.name for p in (cache / "packs" / "volumes").iterdir()) == [f"pack={name}" for name in again]
    packed_files = [p for p in (history / "date=2026-08-03").iterdir()] + [p for p in (history / "date=2026-08-02").iterdir()]
    assert packed_files
    # The packed days' own shares of the packed tables removed: the packs stand for them.
    keys = _keys(spark, history, packed_files)
    removed = [chunk for table in ("volumes", "segments", "chart") for chunk in (cache / table).iterdir() if chunk.name.removeprefix("chunk=") in keys]
    assert len(removed) == 3 * len(packed_files)
    for chunk in removed:
        shutil.rmtree(chunk)
    assert both("from-packs", forecast_window_seconds=1800.0) != tables  # the other window's forecast


def _keys(spark, history: Path, files: list[Path]) -> set[str]:
    from spark.reading.cache import history_files

    names = {f.name for f in files}
    return {f.key for f in history_files(spark, str(history)) if f.path.rsplit("/", 1)[1] in names and f.date in ("2026-08-02", "2026-08-03")}


def test_units_interleave_when_two_days_or_files_overlap_in_time():
    from spark.analysis.partials import units_interleave

    spans = {"a": (0, 10), "b": (20, 30), "c": (40, 50), "d": (60, 70)}
    assert not units_interleave(spans, {})
    assert not units_interleave(spans, {"b": "day1", "c": "day1"})
    assert units_interleave(spans, {"a": "day1", "c": "day1", "b": "day2"})  # day2 inside day1
    assert units_interleave({**spans, "e": (30, 35)}, {})  # a file starting where one ends
