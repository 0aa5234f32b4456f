"""The report job: read the history once, derive every table, write them and the HTML page."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from pyspark import inheritable_thread_target
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spark.analysis import partials
from spark.analysis.backtest import TABLES as BACKTEST_TABLES
from spark.analysis.backtest import LimitSet, Outcome, backtest, page_view
from spark.analysis.brokers import broker_summary, fenced_time
from spark.analysis.chart_data import closest_volume_series, timeline
from spark.analysis.enforcement import with_enforcement
from spark.analysis.episodes import DATA, VOLUME, data_rows, segment_episodes, segment_starts
from spark.analysis.forecast import CONTEXT, FORECAST_WINDOW_SECONDS, fill_forecast
from spark.analysis.gaps import HistoryEnd
from spark.analysis.states import (
    Round,
    collected_rounds,
    collected_time_in_states,
    held_rounds,
    rounds,
    time_in_states,
    unexplained,
)
from spark.output import ReportOutput
from spark.page.html_report import render_page
from spark.reading.cache import HistoryFile, check_folders, history_files, lock, make_folder
from spark.reading.frames import kept, release
from spark.reading.history import read_history
from spark.reading.reuse import copy_kept_tables, keep_report, kept_report, report_key
from spark.reading.topic import TopicInput, copy_topic
from spark.report import PAGE_ROWS, Report

TABLES = ("episodes", "time_in_states", "brokers", "forecast")
# Scratch folder in the output: the history parsed once, as Parquet; deleted at the end.
# (Not "_..." : Spark treats a folder named so as hidden and warns that it ignored it.)
PARSED = "tmp-parsed-history"
# Scratch folder in the output: the records of a --input topic as history lines; deleted at the end.
TOPIC_COPY = "tmp-topic-history"


# The tables are collected and written by this many threads side by side: each table is a few
# small jobs (its rows collected, its Parquet and its CSV written), whose planning in the driver
# and whose tasks on the cores then overlap instead of waiting for each other.
_WRITERS = 3


class EmptyHistory(Exception):
    pass


Progress = Callable[[str], None]


def _rows_of(table: DataFrame, limit: int | None = None) -> list[dict]:
    """The first rows (all of them without a limit), times as UTC text (collected timestamps
    would take the driver's zone)."""
    shown = [
        F.date_format(f.name, "yyyy-MM-dd HH:mm:ss'Z'").alias(f.name)
        if isinstance(f.dataType, T.TimestampType)
        else F.col(f.name)
        for f in table.schema.fields
    ]
    selected = table.select(*shown)
    return [
        row.asDict() for row in (selected if limit is None else selected.limit(limit)).collect()
    ]


def _page_rows(name: str, rows: list[dict]) -> list[dict]:
    """What the page shows of a table (all its ``rows``, in order): the first PAGE_ROWS rows of
    what it shows (``page_view``); of the episodes, every ongoing one first (what is still wrong
    is never left out), then the first ended ones."""
    shown = page_view(name, rows)
    if name != "episodes":
        return shown[:PAGE_ROWS]
    return [row for row in shown if row["ongoing"]] + [row for row in shown if not row["ongoing"]][
        :PAGE_ROWS
    ]


def _episode_counts(episodes: list[dict]) -> dict[str, int]:
    return {
        "hard": sum(1 for e in episodes if e["limit"] == "hard"),
        "soft": sum(1 for e in episodes if e["limit"] == "soft"),
        "ongoing": sum(1 for e in episodes if e["ongoing"]),
    }


def _reasons(counts: dict[str, int]) -> str:
    return (
        " (" + "; ".join(f"{reason} {count:,}" for reason, count in counts.items()) + ")"
        if counts
        else ""
    )


def _history_end(times: list[partials.VolumeTimes], last_round: float) -> HistoryEnd:
    """The last round, and the last one that observed volumes (from the per-volume summary's
    ``partials.volume_times``)."""
    last_seen = partials.last_seen(times)
    return HistoryEnd(last_round, last_seen if last_seen is not None else last_round)


def _check_every_limit_is_explained(
    report: Report, collected: list[Round], progress: Progress
) -> None:
    """Count and print the rounds in THROTTLE or PAUSE that no open episode explains (none in
    a history the service writes), from the rounds collected."""
    found = unexplained(collected)
    report.unexplained_rounds = len(found)
    report.unexplained_examples = [
        {"time": _utc_text(r.micros), "state": r.state, "source": r.source} for r in found[:10]
    ]
    progress(
        f"rounds in THROTTLE or PAUSE that no open episode explains: {report.unexplained_rounds:,}"
    )
    for example in report.unexplained_examples:
        progress(f"  unexplained: {example['time']} {example['state']} ({example['source']})")


def _utc_text(micros: int) -> str:
    """A time (microseconds since the epoch) as the tables show it: yyyy-MM-dd HH:mm:ss'Z'."""
    return (_EPOCH + timedelta(microseconds=micros)).strftime("%Y-%m-%d %H:%M:%SZ")


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _with_metadata_episodes(
    data_episodes: DataFrame,
    derived: dict[str, DataFrame],
    summaries: partials.Volumes,
    rows: DataFrame,
    last_round: float,
    max_gap_seconds: float | None,
    persisted: list[DataFrame],
) -> DataFrame:
    """The data volumes' episodes and the metadata log volumes' (judged by the metadata limits
    the service had), each named by what its volume holds, in the episodes' order."""
    episodes = data_episodes
    volumes = summaries.metadata
    if volumes is None:  # a service without metadata limits: nothing more to compute
        return episodes
    times = summaries.metadata_times
    metadata = partials.episode_segments(
        derived,
        rows,
        partials.METADATA,
        max_gap_seconds,
        partials.breached(times),
        summaries.interleaved[partials.METADATA],
    )
    found = (
        segment_episodes(metadata, volumes, _history_end(times, last_round), max_gap_seconds)
        .transform(with_enforcement(segment_starts(metadata), persisted))
        .join(F.broadcast(volumes.select(*VOLUME, "holds")), list(VOLUME))
    )
    return (
        episodes.unionByName(found).repartition(1).sortWithinPartitions(*VOLUME, "limit", "start")
    )


_ADAPTIVE = "spark.sql.adaptive.enabled"


def _plain_execution(spark: SparkSession) -> str | None:
    """On a local master, the queries after the parse run without adaptive execution (the
    setting before is returned, for the caller to restore; none when it was left alone). Each
    of them carries few rows (rounds, volume summaries, the segments of volumes in breach)
    through shuffles of one partition per core (``session``): adaptive execution makes each
    shuffle stage a job of its own, planned again after the one before, which costs a query
    more than its rows (from the cache: 49 Spark jobs instead of 26, the same tables). On a
    cluster, where the shuffle partitions are not the cores', it stays as configured."""
    if not (spark.sparkContext.master or "").startswith("local"):
        return None
    before = spark.conf.get(_ADAPTIVE, "true") or "true"
    spark.conf.set(_ADAPTIVE, "false")
    return before


def _options(
    since: datetime | None,
    until: datetime | None,
    max_gap_seconds: float | None,
    forecast_window_seconds: float,
    limit_sets: Sequence[LimitSet],
) -> list[str]:
    """The options that decide a report's tables, as text (``reuse.report_key``)."""
    return [
        f"since {since.isoformat() if since else '-'}",
        f"until {until.isoformat() if until else '-'}",
        f"max gap {max_gap_seconds!r}",
        f"forecast window {forecast_window_seconds!r}",
        *[f"limits {limit_set!r}" for limit_set in limit_sets],
    ]


def _reused(
    spark: SparkSession,
    kept_one: Report,
    cache: str,
    key: str,
    output: ReportOutput,
    location: str,
    files: list[HistoryFile],
) -> Report:
    """The report kept in the cache under ``key``, its tables copied into ``output`` and its page
    written there, as a run over ``files`` at ``location``."""
    names = list(kept_one.table_sizes)
    copy_kept_tables(spark, cache, key, names, output.directory)
    output.remove_tables([name for name in (*TABLES, *BACKTEST_TABLES) if name not in names])
    report = replace(
        kept_one,
        input=location,
        output=output.directory,
        parsed_days=(),
        reused_days=tuple(sorted({f.date for f in files if f.date is not None})),
        seconds={},
    )
    output.write_text("report.html", render_page(report))
    return report


def run_report(
    spark: SparkSession,
    input_path: str | TopicInput,
    output_path: str,
    since: datetime | None = None,
    until: datetime | None = None,
    max_gap_seconds: float | None = None,
    forecast_window_seconds: float = FORECAST_WINDOW_SECONDS,
    progress: Progress = lambda message: None,
    limit_sets: Sequence[LimitSet] = (),
    cache: str | None = None,
) -> Report:
    """The report of the history at ``input_path`` (a folder or file, or a topic), written to
    ``output_path``. With ``cache`` (a folder), each day of the history is parsed once and kept
    there (``reading.cache``), and so is the last report: a run over the same files with the same
    options hands it back (``reading.reuse``). A topic's records are copied into the output and
    read from there."""
    started = time.perf_counter()
    step_started = started

    def done(step: str, message: str) -> None:
        nonlocal step_started
        spark.sparkContext.setJobDescription(
            f"after {step}"
        )  # Spark's UI and event log: which step a job is of
        now = time.perf_counter()
        report.seconds[step] = now - step_started
        step_started = now
        progress(f"{message} ({report.seconds[step]:.1f} s)")

    topic = input_path if isinstance(input_path, TopicInput) else None
    location = input_path.url if isinstance(input_path, TopicInput) else input_path
    progress(f"reading {location}")
    if topic is None:
        check_folders(spark, location, output_path, cache)
    for folder, what in ((output_path, "the output"), (cache, "the cache")):
        if folder is not None:
            make_folder(spark, folder, what)
    output = ReportOutput(spark, output_path)
    cached: list[DataFrame] = []  # every frame persisted for this report, unpersisted at its end

    def keep(frame: DataFrame) -> DataFrame:
        return kept(frame, cached)

    adaptive: str | None = None
    unlock = (
        lock(spark, cache, "the cache")
        if cache is not None
        else lock(spark, output.path(PARSED), "the output's scratch folder")
    )
    try:
        history_path = location
        if topic is not None:
            history_path = output.path(TOPIC_COPY)
            copy_topic(spark, topic, history_path, since, until)
        listed = history_files(spark, history_path, since, until)
        key = None
        if cache is not None:
            key = report_key(
                listed,
                _options(since, until, max_gap_seconds, forecast_window_seconds, limit_sets),
            )
            kept_one = kept_report(spark, cache, key)
            if kept_one is not None:
                report = _reused(spark, kept_one, cache, key, output, location, listed)
                report.seconds["total"] = time.perf_counter() - started
                progress(
                    f"the history's {len(listed):,} files, the options and the code are those of the "
                    f"last report from the cache: its tables and page reused ({report.seconds['total']:.1f} s)"
                )
                return report
        history = read_history(
            spark,
            history_path,
            output.path(PARSED),
            since,
            until,
            cache,
            partials.derive,
            listed,
            partials.PACKING,
        )
        adaptive = _plain_execution(spark)
        if cache is not None:
            progress(
                f"cache {cache}: parsed {len(history.parsed_days)} days, reused {len(history.reused_days)} "
                f"(files: parsed {history.parsed_files}, reused {history.reused_files})"
            )
        derived = history.derived
        # One row per round and decision, counting the lines read: the rounds for the states
        # and the timeline come from it, and so do the counts of rows and skipped lines.
        # The lines read and each file's last round, from a row per file.
        files = partials.file_lines(derived)
        read = files.read
        if read.rows == 0:
            raise EmptyHistory(
                f"no history rows in {location} ({read.skipped_lines} lines skipped)"
            )
        assert read.first_time is not None and read.last_time is not None
        report = Report(
            location,
            output.directory,
            read.rows,
            read.skipped_lines,
            read.first_time,
            read.last_time,
            max_gap_seconds,
            forecast_window_seconds,
        )
        report.parsed_days, report.reused_days = history.parsed_days, history.reused_days
        if read.skipped_lines:
            report.skipped_by_reason = partials.skipped_by_reason(derived)
        done(
            "read",
            f"read {read.rows:,} rows, skipped {read.skipped_lines:,} lines{_reasons(report.skipped_by_reason)}",
        )
        # The closed days' packs stand for their files' shares where that is exact: without a
        # --max-gap, and when no two files' times interleave, nor two days' (``partials.PACKING``).
        if (
            history.packed is not None
            and history.units is not None
            and max_gap_seconds is None
            and not files.interleave
            and not partials.units_interleave(files.spans, history.units)
        ):
            derived = {**derived, **history.packed}
        # The metadata log volumes' rows give episodes of their own; every other table is the
        # data volumes'. The episodes and the per-volume summary come from each file's share
        # (``partials``); the forecast, the charts and the backtest read the rows they need.
        rows = history.rows.transform(data_rows)

        round_rows = keep(rounds(partials.round_decisions(derived)))  # one row per round
        # The volume summaries (a row per volume), collected once: the end of the history, the
        # forecast's reach, the volumes with episodes and those read whole come from the rows.
        summaries = partials.collected_volumes(derived, max_gap_seconds, files.interleave)
        volumes, times = summaries.data, summaries.data_times
        end = _history_end(times, read.last_time)
        # The episodes' segments: of the volumes with a row in breach only (the others have none).
        segments = keep(
            partials.episode_segments(
                derived,
                history.rows,
                DATA,
                max_gap_seconds,
                partials.breached(times),
                summaries.interleaved[DATA],
            )
        )

        # Small tables, each computed once: written twice and shown, and the broker summary
        # builds on the episodes and the forecast.
        # Every data episode's steps (whether enforced, from the rows they started in).
        def data_steps(of: DataFrame):
            return lambda episodes: episodes.transform(with_enforcement(of, cached)).withColumn(
                "holds", F.lit(DATA)
            )

        data_episodes = keep(
            segment_episodes(segments, volumes, end, max_gap_seconds).transform(
                data_steps(segment_starts(segments))
            )
        )
        episodes = keep(
            _with_metadata_episodes(
                data_episodes,
                derived,
                summaries,
                history.rows,
                read.last_time,
                max_gap_seconds,
                cached,
            )
        )
        # The forecast of the rows near the end, with what tells whether they reached far
        # enough back (``partials.short_of_context``): collected now, which computes it into its
        # persisted copy; made again of every row when they did not.
        near = partials.near_forecast_rows(
            derived, rows, end, forecast_window_seconds, times, files.ends
        )
        fitted = keep(
            fill_forecast(
                rows if near is None else near,
                volumes,
                end,
                forecast_window_seconds,
                context=True,
            )
        )
        forecast_collected = _rows_of(fitted)
        if near is not None and partials.short_of_context(forecast_collected, times, end):
            fitted = keep(fill_forecast(rows, volumes, end, forecast_window_seconds, context=True))
            forecast_collected = _rows_of(fitted)
        forecast = fitted.drop(CONTEXT)
        for row in forecast_collected:
            del row[CONTEXT]
        fenced = fenced_time(
            partials.fenced_rounds(derived), held_rounds(round_rows, max_gap_seconds)
        )
        # The rounds collected (a row per round): the time in states, the timeline and the
        # unexplained rounds are worked out from them in the driver.
        every_round = collected_rounds(round_rows)
        tables = {
            "episodes": episodes,
            "time_in_states": spark.createDataFrame(
                collected_time_in_states(every_round, max_gap_seconds),
                time_in_states(round_rows, max_gap_seconds).schema,
            ),
            "brokers": keep(broker_summary(volumes, data_episodes, forecast, end, fenced)),
            "forecast": forecast,
        }
        names = list(TABLES)
        if limit_sets:  # the history judged again under each candidate set, beside the live one
            live = Outcome(data_episodes, round_rows)
            # The candidate sets' episodes start in rows of their own: looked up among all rows.
            tried = backtest(
                rows,
                volumes,
                end,
                live,
                list(limit_sets),
                max_gap_seconds,
                data_steps(rows),
                cached,
            )
            tables.update({name: keep(table) for name, table in tried.items()})
            names += tried
        # Each table is small (episodes, days, brokers, volumes): collected once, which computes
        # it into its persisted copy; its size, the page's rows and the figures come from the
        # rows collected, and both files are written from the persisted copy.
        collected: dict[str, list[dict]] = {"forecast": forecast_collected}

        def produce(name: str) -> list[dict]:
            rows = collected[name] if name in collected else _rows_of(tables[name])
            output.write_table(name, tables[name])
            return rows

        # Side by side (``_WRITERS``); each table's rows and message in the tables' order.
        with ThreadPoolExecutor(_WRITERS) as writers:
            produced = {
                name: writers.submit(inheritable_thread_target(produce), name) for name in names
            }
            for name in names:
                collected[name] = produced[name].result()
                report.table_sizes[name] = len(collected[name])
                report.tables[name] = _page_rows(name, collected[name])
                done(name, f"wrote {name}: {report.table_sizes[name]:,} rows")

        report.episode_counts = _episode_counts(collected["episodes"])
        _check_every_limit_is_explained(report, every_round, progress)
        report.volumes = sum(broker["log_dirs"] for broker in collected["brokers"])
        report.series = closest_volume_series(
            rows, derived[partials.CHART], volumes, forecast, read.first_time, read.last_time
        )
        report.timeline = timeline(every_round, read.first_time, read.last_time, max_gap_seconds)
        done("charts", "reduced the chart series")

        output.remove_tables(
            [name for name in (*TABLES, *BACKTEST_TABLES) if name not in names]
        )  # an earlier run's, in the same output
        output.write_text("report.html", render_page(report))
        done("html", f"wrote {output.path('report.html')}")
        if key is not None and cache is not None:
            keep_report(spark, cache, key, report, output.directory)
            done("kept", f"kept the report in {cache} for a run over the same files")
        report.seconds["total"] = time.perf_counter() - started
    finally:
        if adaptive is not None:
            spark.conf.set(_ADAPTIVE, adaptive)
        release(cached)
        unlock()
        output.delete(PARSED)  # the parsed copy of the history
        if topic is not None:
            output.delete(TOPIC_COPY)
    return report
