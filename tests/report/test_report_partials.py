"""The report's inputs made from each file's share (spark/analysis/partials.py) are the ones
made from every row: the per-volume summary, the rounds, the episodes and the forecast, on
histories where the shares are small (hourly files, volumes in breach for a while), where
a volume's files interleave in time (read whole instead), and where a volume is observed too
seldom for the forecast's short read (all rows instead)."""

from __future__ import annotations

import bz2
import gzip
import json
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from app.decision.fill_rate import GAIN_CONTEXT
from app.history.files import file_bytes
from spark.analysis import partials
from spark.analysis.brokers import volume_summary
from spark.analysis.episodes import (
    data_rows,
    metadata_rows,
    segment_episodes,
    violation_episodes,
    volume_rows,
)
from spark.analysis.forecast import CONTEXT, fill_forecast
from spark.analysis.gaps import HistoryEnd
from spark.analysis.states import decisions
from spark.reading.history import LineCounts, line_counts, read_history

from .synthetic import MiB, at, instant, write_rounds

START = at(2026, 9, 1, 9, 0)
ROUNDS = 200  # a round a minute: four hourly files
WINDOW = 1800.0  # the forecast's window: half an hour, so most of the history is before it


def regular() -> dict:
    return {
        (1, "/data/a"): lambda i: max(95 * MiB - i * MiB // 2, 2 * MiB),  # fills into the soft, then the hard limit
        (1, "/data/b"): lambda i: 50 * MiB,  # never near
        (2, "/data/a"): lambda i: 8 * MiB if 60 <= i < 75 or 130 <= i < 190 else 60 * MiB,  # two hard episodes
        (2, "/data/b"): lambda i: None if 100 <= i < 110 else 70 * MiB - i * 10_000,  # a gap, filling slowly
        (3, "/data/a"): lambda i: 15 * MiB if i % 50 < 3 else 30 * MiB,  # short soft breaches
        (3, "/data/g"): lambda i: None if 100 <= i < 110 else 5 * MiB if i < 120 else 40 * MiB,  # in breach across a gap
    }


def sparse() -> dict:
    """A volume observed every 40 minutes, up to the last round: fewer observations than the
    forecast's short read needs."""
    return {**regular(), (4, "/data/s"): lambda i: 60 * MiB - i * 100_000 if i % 40 == 39 else None}


def with_log_dir_errors(history: Path) -> None:
    """Broker 3's /data/a offline for six rounds (breaching, with the error), twice."""
    offline = {instant(START + timedelta(minutes=i)) for i in (*range(20, 26), *range(80, 86))}
    for file in history.rglob("*.jsonl*"):  # closed hours compressed, as the service leaves them
        rows = [json.loads(line) for line in _text(file).splitlines()]
        for row in rows:
            if (row["broker_id"], row["log_dir"]) == (3, "/data/a") and row["time"] in offline:
                row.update(log_dir_error="KAFKA_STORAGE_ERROR" if row["time"] < instant(START + timedelta(minutes=50)) else "OFFLINE", volume_status="breaching")
        text = "".join(json.dumps(row) + "\n" for row in rows).encode()
        file.write_bytes(bz2.compress(text) if file.suffix == ".bz2" else gzip.compress(text) if file.suffix == ".gz" else text)


def _text(file: Path) -> str:
    return file_bytes(file).decode()


def interleave(source: Path, target: Path) -> None:
    """The history's lines in two files of one folder, alternate rounds in each: every
    volume's two files overlap in time."""
    lines = sorted(line for file in source.rglob("*.jsonl*") for line in _text(file).splitlines())
    target.mkdir()
    times = sorted({json.loads(line)["time"] for line in lines})
    odd = {t for n, t in enumerate(times) if n % 2}
    (target / "a.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["time"] in odd))
    (target / "b.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["time"] not in odd))


def _sorted(table: DataFrame, columns: list[str] | None = None) -> list[tuple]:
    return sorted((tuple(row) for row in table.select(*(columns or table.columns)).collect()), key=repr)


@pytest.fixture(scope="module")
def histories(spark, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("histories")
    write_rounds(root / "regular", START, ROUNDS, regular(), outage={150, 151})
    with_log_dir_errors(root / "regular")
    write_rounds(root / "sparse", START, ROUNDS, sparse(), outage=set())
    interleave(root / "regular", root / "interleaved")
    read = {}
    for name in ("regular", "sparse", "interleaved"):
        history = read_history(spark, str(root / name), str(root / f"{name}-parsed"), derive=partials.derive)
        counts = line_counts(decisions(history.lines))
        volumes = volume_summary(history.rows.transform(data_rows))
        last_seen = volumes.agg({"last_seen": "max"}).first()[0].timestamp()
        read[name] = (history, HistoryEnd(counts.last_time, last_seen))
    return read


NAMES = ("regular", "sparse", "interleaved")


@pytest.mark.parametrize("name", NAMES)
def test_the_rounds_and_line_counts_from_the_shares_are_those_of_every_line(histories, name):
    history, _ = histories[name]
    every_line = decisions(history.lines)
    assert _sorted(partials.round_decisions(history.derived)) == _sorted(every_line)
    # The counts the report prints and its first and last round, from a row per file.
    assert partials.file_lines(history.derived).read == line_counts(every_line)


@pytest.mark.parametrize("name", NAMES)
def test_the_volume_summary_from_the_shares_is_that_of_every_row(histories, name):
    history, _ = histories[name]
    whole = volume_summary(history.rows.transform(data_rows))
    assert _sorted(partials.volume_summary(history.derived), whole.columns) == _sorted(whole)


@pytest.mark.parametrize("max_gap", [None, 150.0, 30.0])
@pytest.mark.parametrize("name", NAMES)
def test_the_episodes_from_the_segments_kept_per_file_are_those_of_every_row(histories, name, max_gap):
    """Also under a --max-gap: one that counts the outage's gaps only (150 s), and one under the
    round's minute (30 s), which counts every gap, those inside a segment too."""
    history, end = histories[name]
    rows = history.rows.transform(data_rows)
    volumes = partials.volume_summary(history.derived, max_gap_seconds=max_gap)
    kept = partials.episode_segments(history.derived, history.rows, max_gap_seconds=max_gap)
    whole = violation_episodes(rows, volume_summary(rows, max_gap), end, max_gap).collect()
    assert segment_episodes(kept, volumes, end, max_gap).collect() == whole
    if max_gap is None:
        assert {row["end_reason"] for row in whole} >= {"recovered", "gap", "ongoing"}  # the history has each kind of end
    if name != "sparse":
        assert {row["log_dir_error"] for row in whole} == {None, "KAFKA_STORAGE_ERROR", "OFFLINE"}


def test_the_episodes_start_from_segments_not_rows(histories):
    """A volume filling through its soft, then its hard limit over its last 48 rounds (the
    service's outage of two rounds among them) makes a handful of segments, not a row per
    round; their observations are the rows'."""
    history, _ = histories["regular"]
    filling = (F.col("broker_id") == 1) & (F.col("log_dir") == "/data/a")
    kept = partials.episode_segments(history.derived, history.rows).filter(filling)
    in_breach = kept.filter(F.col("volume_status") != "ok")
    rows = history.rows.filter(filling & (F.col("volume_status") != "ok")).count()
    assert in_breach.agg(F.sum("observations")).first()[0] == rows == 48
    assert in_breach.count() <= 4  # ramping; breaching before, and after, the outage


def test_of_a_volume_never_in_breach_only_each_slice_s_first_and_last_rows_are_kept(histories):
    history, _ = histories["regular"]
    never = (F.col("broker_id") == 1) & (F.col("log_dir") == "/data/b")
    rows = history.rows.filter(never).count()
    kept = partials.episode_segments(history.derived, history.rows).filter(never).agg(F.sum("observations")).first()[0]
    # A round a minute (two in an outage, without volumes) over four hourly files, slices of
    # an hour: two rows of each file.
    assert partials.SLICE_SECONDS == 3600 and (rows, kept) == (ROUNDS - 2, 4 * 2)


def test_volumes_whose_files_interleave_are_read_whole(histories):
    history, _ = histories["interleaved"]
    kept = partials.episode_segments(history.derived, history.rows)
    every_row = history.rows.transform(data_rows).transform(volume_rows).count()
    assert (kept.count(), kept.agg(F.sum("observations")).first()[0]) == (every_row, every_row)  # a segment per row
    regular_history, _ = histories["regular"]
    assert partials._interleaved(regular_history.derived, partials.DATA) == []


@pytest.mark.parametrize("name", NAMES)
def test_the_files_spans_tell_whether_volumes_may_interleave_and_the_summary_skips_the_sort_when_none_can(histories, name):
    history, _ = histories[name]
    files = partials.file_lines(history.derived)
    assert files.interleave == (name == "interleaved")
    interleaved = {partials.DATA: partials._interleaved(history.derived, partials.DATA), partials.METADATA: []}
    assert (interleaved[partials.DATA] != []) == files.interleave
    summaries = partials.collected_volumes(history.derived, files_interleave=files.interleave)
    sorted_per_volume = partials.collected_volumes(history.derived, files_interleave=True)
    assert summaries.interleaved == sorted_per_volume.interleaved == interleaved
    assert sorted(summaries.data_times, key=repr) == sorted(sorted_per_volume.data_times, key=repr)
    assert _sorted(summaries.data) == _sorted(sorted_per_volume.data)


def test_file_spans_interleave_when_one_starts_at_or_before_an_earlier_one_s_last_line():
    def lines(*spans):
        return partials.FileLines(LineCounts(1, 0, None, None), {f"k{n}": span for n, span in enumerate(spans)})

    assert not lines().interleave and not lines((5, 9)).interleave
    assert not lines((10, 19), (0, 9), (20, 20)).interleave  # in any order
    assert lines((0, 10), (10, 20)).interleave  # a shared instant
    assert lines((0, 100), (10, 20), (30, 40)).interleave  # inside an earlier one
    assert lines((30, 40), (0, 100)).interleave


@pytest.mark.parametrize("name", NAMES)
def test_the_forecast_from_the_rows_near_the_end_is_that_of_every_row(histories, name):
    history, end = histories[name]
    rows = history.rows.transform(data_rows)
    volumes = partials.volume_summary(history.derived)
    near = partials.forecast_rows(history.derived, rows, volumes, end, WINDOW)
    whole = fill_forecast(rows, volume_summary(rows), end, WINDOW).collect()
    assert fill_forecast(near, volumes, end, WINDOW).collect() == whole
    assert any(row["fill_rate_bytes_per_second"] for row in whole)


def test_the_forecast_reads_only_the_last_files_of_regular_volumes_and_every_row_of_a_sparse_one(histories):
    regular_history, regular_end = histories["regular"]
    rows = regular_history.rows.transform(data_rows)
    near = partials.forecast_rows(regular_history.derived, rows, partials.volume_summary(regular_history.derived), regular_end, WINDOW)
    assert near.count() < rows.count() / 2
    sparse_history, sparse_end = histories["sparse"]
    rows = sparse_history.rows.transform(data_rows)
    near = partials.forecast_rows(sparse_history.derived, rows, partials.volume_summary(sparse_history.derived), sparse_end, WINDOW)
    assert near.count() == rows.count()


def test_the_forecast_tells_itself_whether_the_rows_near_the_end_reached_far_enough_back(histories):
    """The forecast of the rows near the end, made with its context column, says of a regular
    history that they sufficed (and then it is the forecast of every row) and of a sparse one
    that they did not (as ``forecast_rows``' own check says)."""
    for name, sufficed in (("regular", True), ("sparse", False)):
        history, end = histories[name]
        rows = history.rows.transform(data_rows)
        volumes = partials.volume_summary(history.derived)
        times = partials.volume_times(volumes)
        near = partials.near_forecast_rows(history.derived, rows, end, WINDOW, times)
        assert near is not None
        fitted = fill_forecast(near, volumes, end, WINDOW, context=True)
        collected = [row.asDict() for row in fitted.collect()]
        assert partials.short_of_context(collected, times, end) is not sufficed
        if sufficed:
            whole = fill_forecast(rows, volume_summary(rows), end, WINDOW).collect()
            assert fitted.drop(CONTEXT).collect() == whole
            assert all(row[CONTEXT] == GAIN_CONTEXT for row in collected)


def test_no_metadata_rows_means_no_metadata_share(histories):
    history, _ = histories["regular"]
    assert not partials.has_metadata(history.derived)
    assert history.rows.transform(metadata_rows).isEmpty()

