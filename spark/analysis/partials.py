"""What the report keeps of each history file beside its parsed lines, so that a run where one
file changed computes again only that file's share (``reading.cache``), and how the shares of
every file make the report's inputs again, exactly.

Per file (``derive``), each table with the file's CHUNK:
- ``decisions``: ``states.decisions`` of its lines (rounds, line counts; sums and maxima, so
  the files' shares add up to the history's);
- ``skipped``: its skipped lines counted by reason;
- ``volumes``: per volume and what it holds (data / metadata), the volume summary's minima,
  maxima and counts, its first and last observation in the file, whether any observation of
  the file was in breach of a limit, and the last observation the forecast may fit;
- ``segments``: the episodes' segments (``episodes.segments``) of the rows they need of it:
  every row of a volume in a slice of the file (SLICE_SECONDS) where it was in breach of a
  limit, and of its other slices the first and last row;
- ``fenced``: the rounds in which a fenced broker's observation was kept;
- ``chart``: the chart's cells of its data volumes' rows (``chart_data.chart_cells``).

Why those rows give the episodes of every row: an episode is made of the rows in breach
and looks at the row before and the row after each of them (``episodes._with_neighbours``).
Within a slice of a file, a volume with a row in breach keeps all its rows; a row's neighbour
in another slice is that slice's first or last row of the volume, when the slices' times do not
interleave for that volume: those of one file never do (a slice is a span of time), nor do two
files' when the files' times do not interleave for that volume. They do not for the files the
service writes (one per hour, in time order); a volume whose files do interleave (files joined
or edited by hand), or with a segment whose gaps the run's --max-gap counts, is read whole
instead, a segment per row (``episode_segments``)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.decision.fill_rate import GAIN_CONTEXT
from spark.analysis.brokers import volume_aggregates
from spark.analysis.chart_data import CELL, chart_cells
from spark.analysis.episodes import (
    DATA,
    SEGMENT_FIELDS,
    VOLUME,
    as_segments,
    data_rows,
    metadata_rows,
    segments,
    volume_rows,
)
from spark.analysis.forecast import CONTEXT, fitted_rows, observed_seconds
from spark.analysis.gaps import HistoryEnd, gap_limit, still_present
from spark.analysis.states import blames, decisions
from spark.reading.cache import CHUNK, PACK, Pack
from spark.reading.frames import kept
from spark.reading.history import SKIP_REASON, LineCounts, epoch_seconds, most_first, valid

HOLDS = "volume_holds"  # data / metadata: the episodes of each are apart
METADATA = "metadata"
DECISIONS, SKIPPED, VOLUMES, SEGMENTS, FENCED, CHART = (
    "decisions",
    "skipped",
    "volumes",
    "segments",
    "fenced",
    "chart",
)
_SLICE = "slice"


def _with_holds(lines: DataFrame) -> DataFrame:
    holds = F.when(F.col("holds").isNull() | (F.col("holds") == F.lit(DATA)), F.lit(DATA)).when(
        F.col("holds").contains(METADATA), F.lit(METADATA)
    )
    return (
        lines.filter(valid())
        .transform(volume_rows)
        .withColumn(HOLDS, holds)
        .filter(F.col(HOLDS).isNotNull())
    )


# The rows the episodes need are chosen per slice of SLICE_SECONDS of a file (see the module's
# note: a slice stands for a file there, its times never interleave with another's): all rows
# of a volume's slice with a row in breach, two of every other (the first and last). An hour,
# the span of a file the service writes: outside its breaches, two of a volume's 60 rows at a
# round a minute (five-minute slices kept two of five: the episodes then sorted 40% of the
# rows, 460,000 segments for 2 days of 100 x 4); a breach keeps its volume's hour whole.
# Each file's share is exact for any slice (the module's note), so a cache made with another
# slice is still right.
SLICE_SECONDS = 3600
# A volume's ``holds`` (``app.history.schema``) aggregated as its index here, so that Spark
# aggregates in a hash table instead of sorting every row; in the order of the text, so that
# the greatest index is the greatest text.
_HOLDS_VALUES = ("data", "data,metadata", "metadata")


def derive(lines: DataFrame, persisted: list[DataFrame] | None = None) -> dict[str, DataFrame]:
    """The tables kept per file, from the lines (``History.lines``, with CHUNK) of some files.
    With ``persisted``, the slices two of the tables read are persisted and added to it (the
    caller unpersists them once the tables are written)."""
    volume_lines = _with_holds(lines).withColumn(
        _SLICE, F.floor(F.unix_micros("time") / F.lit(SLICE_SECONDS * 1_000_000))
    )
    per_volume = (CHUNK, HOLDS, *VOLUME)
    # One pass over the rows, per slice; the volumes' summaries are made of the slices'.
    slices = volume_lines.groupBy(*per_volume, _SLICE).agg(
        *volume_aggregates(),
        F.max("check_interval_seconds").alias("check_interval_seconds"),
        F.max(F.when(fitted_rows(), observed_seconds())).alias("last_fitted_t"),
        F.max(blames()).alias("in_breach"),
        F.max(F.array_position(_holds_values(), F.col("holds"))).cast("int").alias("holds"),
    )
    slices = kept(slices, persisted)
    volumes = _rolled_up(slices, *per_volume)
    keep = F.broadcast(
        slices.select(
            *per_volume,
            _SLICE,
            F.col("first_seen").alias("_first"),
            F.col("last_seen").alias("_last"),
            "in_breach",
        )
    )
    needed = (
        F.col("in_breach") | (F.col("time") == F.col("_first")) | (F.col("time") == F.col("_last"))
    )
    breach_rows = volume_lines.join(keep, [*per_volume, _SLICE]).filter(needed)
    fenced = (
        volume_lines.filter((F.col(HOLDS) == F.lit(DATA)) & (F.col("kept") == F.lit("fenced")))
        .select(CHUNK, "broker_id", "time")
        .distinct()
    )
    return {
        DECISIONS: decisions(lines, by=(CHUNK,)),
        SKIPPED: lines.filter(F.col(SKIP_REASON).isNotNull()).groupBy(CHUNK, SKIP_REASON).count(),
        VOLUMES: volumes,
        SEGMENTS: segments(breach_rows, (CHUNK, HOLDS)),
        FENCED: fenced,
        CHART: chart_cells(volume_lines.transform(_of(DATA)), CHUNK),
    }


def _packed(tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """The volume summaries and the segments of a day's files (with PACK) as one share each:
    - ``volumes``: rolled up per volume (CHUNK named after the pack). Exact for every use when
      no two files' times interleave (the files' shares then only add up: ``_ROLL_UP``);
    - ``segments``: of each volume, those in breach of either limit (ramping or breaching, the
      widest), the segment before and after each of them, and the day's first and last. An
      episode is made of the segments in breach and looks at the segment before and after each
      (``episodes._with_neighbours``): when the days' times do not interleave, these are the
      same segments as among every file's, and no other segment of the day is one of them. A
      --max-gap may count a gap inside a segment left out (``episode_segments``): such a run
      reads the files' own shares;
    - ``chart``: the cells as they are, in the order of volume and cell. The chart reads the
      cells of a few volumes (``chart_data.closest_volume_series``): in that order, the pack's
      row groups (``cache.PACK_ROW_GROUP_BYTES``) tell by their bounds which to skip."""
    volumes = _rolled_up(tables[VOLUMES], PACK, HOLDS, *VOLUME).withColumn(CHUNK, F.col(PACK))
    in_order = Window.partitionBy(PACK, HOLDS, *VOLUME).orderBy("time_first")
    breach = F.col("volume_status").isin("ramping", "breaching")
    near = (
        breach
        | F.coalesce(F.lag(breach).over(in_order), F.lit(True))  # after a breach, or the first
        | F.coalesce(F.lead(breach).over(in_order), F.lit(True))  # before one, or the last
    )
    segments = tables[SEGMENTS].withColumn("_near", near).filter(F.col("_near")).drop("_near")
    chart = tables[CHART].repartition(PACK).sortWithinPartitions(PACK, *VOLUME, CELL)
    return {VOLUMES: volumes, SEGMENTS: segments, CHART: chart}


# The tables packed per closed day in the cache (``reading.cache.Pack``).
PACKING = Pack((VOLUMES, SEGMENTS, CHART), _packed)


def units_interleave(spans: dict[str, tuple[int, int]], units: dict[str, str]) -> bool:
    """Whether the times of two units interleave: a unit is a pack (``units``: each packed
    file's pack, by CHUNK) or a file in none, its span from the first valid line of its files to
    the last (``FileLines.spans``)."""
    joined: dict[str, tuple[int, int]] = {}
    for chunk, (first, last) in spans.items():
        unit = units.get(chunk, chunk)
        before = joined.get(unit)
        joined[unit] = (
            (first, last) if before is None else (min(before[0], first), max(before[1], last))
        )
    return _overlap(joined.values())


def round_decisions(derived: dict[str, DataFrame]) -> DataFrame:
    """``states.decisions`` of every line, from the files' shares."""
    return (
        derived[DECISIONS]
        .groupBy("time", "state", "source")
        .agg(
            F.sum("lines").alias("lines"),
            F.max("check_interval_seconds").alias("check_interval_seconds"),
            F.max("round_complete").alias("round_complete"),
            F.sum("blamed_volumes").alias("blamed_volumes"),
            F.sum("breaching_volumes").alias("breaching_volumes"),
        )
    )


def skipped_by_reason(derived: dict[str, DataFrame]) -> dict[str, int]:
    """The skipped lines counted by reason, most first."""
    return most_first(derived[SKIPPED].groupBy(SKIP_REASON).agg(F.sum("count").alias("count")))


# How the summaries of parts of a volume's rows (slices, files) make the summary of all of them.
_ROLL_UP = {
    "first_seen": F.min,
    "last_seen": F.max,
    "observations": F.sum,
    "node_report_observations": F.sum,
    "min_usable_bytes": F.min,
    "min_available_ratio": F.min,
    "headroom": F.min,
    "last_fitted": F.max,
    "last_fitted_t": F.max,
    "check_interval_seconds": F.max,
    "in_breach": F.max,
    "holds": F.max,
}


def _rolled_up(parts: DataFrame, *by: str) -> DataFrame:
    return parts.groupBy(*by).agg(
        *[combine(name).alias(name) for name, combine in _ROLL_UP.items()]
    )


def _holds_values() -> Column:
    return F.array(*[F.lit(v) for v in _HOLDS_VALUES])


def _of(holds: str):
    return lambda table: table.filter(F.col(HOLDS) == F.lit(holds))


def volume_summary(
    derived: dict[str, DataFrame], holds: str = DATA, max_gap_seconds: float | None = None
) -> DataFrame:
    """``brokers.volume_summary`` of the volumes that hold ``holds``, from the files' shares,
    with ``holds`` (the greatest text its rows had), ``last_fitted_t`` (the time the
    last observation the forecast may fit was made) and ``in_breach`` (whether any of its rows
    was in breach of a limit: only such a volume has episodes)."""
    return _summary_columns(
        _rolled_up(derived[VOLUMES].transform(_of(holds)), *VOLUME), max_gap_seconds
    )


def _summary_columns(combined: DataFrame, max_gap_seconds: float | None, *extra: str) -> DataFrame:
    """``volume_summary``'s columns (and ``extra``), of the shares rolled up per volume."""
    return combined.select(
        *extra,
        *VOLUME,
        *[name for name in _ROLL_UP if name not in ("check_interval_seconds", "holds")],
        gap_limit(max_gap_seconds).alias(
            "gap_limit"
        ),  # the gap limit grows with the check interval: the greatest's
        F.element_at(_holds_values(), F.col("holds")).alias("holds"),
    )


_TIMES = ("first_seen", "last_seen", "last_fitted")  # the summary's timestamps


@dataclass(frozen=True)
class Volumes:
    """The volume summaries of the data and the metadata volumes, collected once (a few rows
    per volume), with what the report works out from them in the driver."""

    data: DataFrame  # volume_summary(derived, DATA, ...), a relation of the rows collected
    metadata: DataFrame | None  # of the metadata volumes, or None without any
    data_times: list[VolumeTimes]
    metadata_times: list[VolumeTimes]
    # Per what a volume holds (DATA, METADATA): the volumes whose files interleave in time.
    interleaved: dict[str, list[tuple]]


def collected_volumes(
    derived: dict[str, DataFrame],
    max_gap_seconds: float | None = None,
    files_interleave: bool = True,
) -> Volumes:
    """``volume_summary`` of the data and of the metadata volumes, ``volume_times`` of each and
    the volumes whose files interleave (``_interleaved``), from one query over the files'
    shares collected once: each later table reads the summary as the rows collected, and
    none of these is a query of its own. ``files_interleave`` False (``FileLines.interleave``):
    no two files' times interleave, so no volume's do, and the files' shares are not sorted
    per volume to find out (at 7 days of 1,000 x 12, most of this query's time)."""
    per_file = derived[VOLUMES].withColumn("interleaves", F.lit(False))
    if files_interleave:
        earlier = (
            Window.partitionBy(HOLDS, *VOLUME)
            .orderBy("first_seen", "last_seen")
            .rowsBetween(Window.unboundedPreceding, -1)
        )
        per_file = per_file.withColumn(
            "interleaves", F.col("first_seen") <= F.max("last_seen").over(earlier)
        )
    combined = per_file.groupBy(HOLDS, *VOLUME).agg(
        *[combine(name).alias(name) for name, combine in _ROLL_UP.items()],
        F.max("interleaves").alias("interleaves"),
    )
    summary = _summary_columns(combined, max_gap_seconds, HOLDS, "interleaves")
    fields = summary.schema.fields[2:]
    collected = summary.select(
        HOLDS,
        *[
            F.unix_micros(f.name).alias(f.name) if f.name in _TIMES else F.col(f.name)
            for f in fields
        ],
        "interleaves",
    ).collect()
    spark = derived[VOLUMES].sparkSession
    as_collected = T.StructType(
        [T.StructField(f.name, T.LongType() if f.name in _TIMES else f.dataType) for f in fields]
    )

    def relation(holds: str) -> DataFrame:
        rows = [tuple(row[1 : len(fields) + 1]) for row in collected if row[HOLDS] == holds]
        return spark.createDataFrame(rows, as_collected).select(
            *[
                F.timestamp_micros(f.name).alias(f.name) if f.name in _TIMES else F.col(f.name)
                for f in fields
            ]
        )

    def times(holds: str) -> list[VolumeTimes]:
        return [
            VolumeTimes(
                row["last_seen"],
                row["last_fitted_t"],
                row["gap_limit"],
                (row["broker_id"], row["log_dir"]),
                bool(row["in_breach"]),
            )
            for row in collected
            if row[HOLDS] == holds
        ]

    has_metadata = any(row[HOLDS] == METADATA for row in collected)
    return Volumes(
        relation(DATA),
        relation(METADATA) if has_metadata else None,
        times(DATA),
        times(METADATA),
        {
            holds: sorted(
                (row["broker_id"], row["log_dir"])
                for row in collected
                if row[HOLDS] == holds and row["interleaves"]
            )
            for holds in (DATA, METADATA)
        },
    )


@dataclass(frozen=True)
class FileLines:
    """The lines read (``reading.line_counts`` of every line) and each file's last round (epoch
    seconds; of the files with a valid line), from one pass over the files' ``decisions``."""

    read: LineCounts
    # Each file's first and last valid line (microseconds since the epoch), by CHUNK.
    spans: dict[str, tuple[int, int]]

    @property
    def ends(self) -> dict[str, float]:
        """Each file's last valid line, in epoch seconds."""
        return {chunk: last / 1_000_000.0 for chunk, (_, last) in self.spans.items()}

    @property
    def interleave(self) -> bool:
        """Whether the times of two files interleave (one's first valid line at or before the
        last of one that starts before it): then a volume's rows in them may, and else none
        can (a volume's rows in a file lie within the file's span). The files the service
        writes never do: one per hour, in time order."""
        return _overlap(self.spans.values())


def _overlap(spans) -> bool:
    """Whether two of the ``spans`` ((first, last) pairs) interleave: one's first at or before
    the last of one that starts before it."""
    reached = None
    for first, last in sorted(spans):
        if reached is not None and first <= reached:
            return True
        reached = last if reached is None else max(reached, last)
    return False


def file_lines(derived: dict[str, DataFrame]) -> FileLines:
    """``FileLines`` of the history: one small aggregate per file (a row each), combined here
    (the counts add up; times as microseconds, so the first and last are exactly those of
    ``line_counts``)."""
    ok = valid()
    per_file = (
        derived[DECISIONS]
        .groupBy(CHUNK)
        .agg(
            F.sum(F.when(ok, F.col("lines"))).alias("valid"),
            F.sum(F.when(~ok, F.col("lines"))).alias("skipped"),
            F.min(F.when(ok, F.unix_micros("time"))).alias("first"),
            F.max(F.when(ok, F.unix_micros("time"))).alias("last"),
        )
        .collect()
    )
    # a file's first and last valid lines are both there or both not
    spans = {
        row[CHUNK]: (row["first"], row["last"]) for row in per_file if row["first"] is not None
    }
    read = LineCounts(
        sum(row["valid"] or 0 for row in per_file),
        sum(row["skipped"] or 0 for row in per_file),
        min(first for first, _ in spans.values()) / 1_000_000.0 if spans else None,
        max(last for _, last in spans.values()) / 1_000_000.0 if spans else None,
    )
    return FileLines(read, spans)


def chunk_ends(derived: dict[str, DataFrame]) -> dict[str, float]:
    """Each file's last round (epoch seconds), of the files with a valid line."""
    return file_lines(derived).ends


def _interleaved(derived: dict[str, DataFrame], holds: str) -> list[tuple]:
    """The volumes with a file whose times reach into an earlier file's (by first observation)."""
    earlier = (
        Window.partitionBy(*VOLUME)
        .orderBy("first_seen", "last_seen")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    spans = (
        derived[VOLUMES]
        .transform(_of(holds))
        .withColumn("reached", F.max("last_seen").over(earlier))
    )
    return [
        tuple(row)
        for row in spans.filter(F.col("first_seen") <= F.col("reached"))
        .select(*VOLUME)
        .distinct()
        .collect()
    ]


def _among(table: DataFrame, volumes: list[tuple], among: bool = True) -> DataFrame:
    """The rows of ``table`` of the ``volumes`` listed (``among``), or of the others."""
    listed = table.sparkSession.createDataFrame(
        volumes, T.StructType([table.schema[name] for name in VOLUME])
    )
    return table.join(F.broadcast(listed), list(VOLUME), "left_semi" if among else "left_anti")


def episode_segments(
    derived: dict[str, DataFrame],
    rows: DataFrame,
    holds: str = DATA,
    max_gap_seconds: float | None = None,
    only: list[tuple] | None = None,
    interleaved: list[tuple] | None = None,
) -> DataFrame:
    """The segments (SEGMENT_FIELDS) the episodes of the volumes that hold ``holds`` need (see
    the module's note), from ``segments``; a volume whose files interleave in time, or with a
    segment whose gaps the gap limit counts, a segment per row of all its ``rows``
    (``History.rows``). ``interleaved``: the volumes whose files interleave, where the caller
    has them (``collected_volumes``). With ``only`` (volumes), the segments of those volumes alone: the
    episodes need only the volumes with a row in breach (``breached``), every other volume's
    segments are all outside every episode."""
    from_files = derived[SEGMENTS].transform(_of(holds)).select(*SEGMENT_FIELDS)
    if only is not None:
        from_files = _among(from_files, only)
    # Under the default rule the gap limit (GAP_INTERVALS check intervals) is above every gap
    # inside a segment (episodes.JOIN_INTERVALS): only a --max-gap can count one.
    inside = from_files.filter(F.col("inner_gap_seconds") > gap_limit(max_gap_seconds))
    counted = [] if max_gap_seconds is None else inside.select(*VOLUME).distinct().collect()
    if interleaved is None:
        interleaved = _interleaved(derived, holds)
    whole = sorted(set(interleaved) | {tuple(row) for row in counted})
    if not whole:
        return from_files
    if only is not None:
        whole = sorted(set(whole) & set(only))
        if not whole:
            return from_files
    read_whole = _among(
        rows.transform(data_rows if holds == DATA else metadata_rows), whole
    ).transform(as_segments)
    return _among(from_files, whole, among=False).unionByName(read_whole)


def fenced_rounds(derived: dict[str, DataFrame]) -> DataFrame:
    """(broker_id, time) of every round that kept a fenced broker's observation."""
    return derived[FENCED].select("broker_id", "time").distinct()


def has_metadata(derived: dict[str, DataFrame]) -> bool:
    return not derived[VOLUMES].transform(_of(METADATA)).isEmpty()


@dataclass(frozen=True)
class VolumeTimes:
    """Of one volume of ``volume_summary``: when it was last seen (microseconds since the
    epoch), the time its last observation the forecast may fit was made (epoch seconds) and
    its gap limit: what the end of the history and the forecast's reach are worked out from."""

    last_seen_micros: int | None
    last_fitted_t: float | None
    gap_limit: float | None
    volume: tuple = ()  # (broker_id, log_dir)
    in_breach: bool = False  # a row of it was in breach of a limit


def volume_times(volumes: DataFrame) -> list[VolumeTimes]:
    """``VolumeTimes`` of every volume of ``volumes`` (``volume_summary(...)``: a row per
    volume), collected."""
    return [
        VolumeTimes(
            row["last_seen"],
            row["last_fitted_t"],
            row["gap_limit"],
            tuple(row[:2]),
            bool(row["in_breach"]),
        )
        for row in volumes.select(
            *VOLUME,
            F.unix_micros("last_seen").alias("last_seen"),
            "last_fitted_t",
            "gap_limit",
            "in_breach",
        ).collect()
    ]


def breached(times: list[VolumeTimes]) -> list[tuple]:
    """The volumes (``volume_times``) with a row in breach of a limit: the only ones with episodes."""
    return sorted(v.volume for v in times if v.in_breach)


def last_seen(times: list[VolumeTimes]) -> float | None:
    """When the last of the volumes was seen (epoch seconds)."""
    seen = [v.last_seen_micros for v in times if v.last_seen_micros is not None]
    return max(seen) / 1_000_000.0 if seen else None


def _present(volume: VolumeTimes, end: HistoryEnd) -> bool:
    """``gaps.still_present`` with a fitted observation, as Spark evaluates it (doubles)."""
    if volume.last_seen_micros is None or volume.gap_limit is None:
        return False
    seen = volume.last_seen_micros / 1_000_000.0
    return seen >= end.last_observing_round - volume.gap_limit and volume.last_fitted_t is not None


def forecast_rows(
    derived: dict[str, DataFrame],
    rows: DataFrame,
    volumes: DataFrame,
    end: HistoryEnd,
    window_seconds: float,
    times: list[VolumeTimes] | None = None,
    ends: dict[str, float] | None = None,
) -> DataFrame:
    """Of the data volumes' ``rows``, those ``forecast.fill_forecast`` needs: every observation
    made from a little before the earliest window of a present volume (``volumes``:
    ``volume_summary(...)``), read from the files that reach that far only. Exact when each
    present volume has GAIN_CONTEXT observations between that start and its own window (the
    ones the fit looks back on, which are then the latest before its window, as from every
    row): checked, and all rows are given when one has not. ``times`` (``volume_times(volumes)``)
    and ``ends`` (``chunk_ends(derived)``): where the caller has them already."""
    times = volume_times(volumes) if times is None else times
    near = near_forecast_rows(derived, rows, end, window_seconds, times, ends)
    if near is None:  # no volume to forecast
        return rows
    present = (
        still_present(epoch_seconds("last_seen"), end, F.col("gap_limit"))
        & F.col("last_fitted_t").isNotNull()
    )
    cut = F.col("last_fitted_t") - F.lit(window_seconds)
    cuts = volumes.filter(present).select(*VOLUME, cut.alias("cut"))
    before_window = (
        near.filter(fitted_rows())
        .join(F.broadcast(cuts), list(VOLUME))
        .filter(observed_seconds() < F.col("cut"))
        .groupBy(*VOLUME)
        .agg(F.count_distinct(observed_seconds()).alias("n"))
    )
    short = cuts.join(before_window, list(VOLUME), "left").filter(
        F.coalesce(F.col("n"), F.lit(0)) < F.lit(GAIN_CONTEXT)
    )
    return rows if not short.isEmpty() else near


def near_forecast_rows(
    derived: dict[str, DataFrame],
    rows: DataFrame,
    end: HistoryEnd,
    window_seconds: float,
    times: list[VolumeTimes],
    ends: dict[str, float] | None = None,
) -> DataFrame | None:
    """``forecast_rows`` without its check (none when no volume is to be forecast): the rows
    near the end, whose forecast is exact unless ``short_of_context`` says otherwise of it."""
    present_cuts = [v.last_fitted_t - window_seconds for v in times if _present(v, end)]  # type: ignore[operator]
    if not present_cuts:
        return None
    gaps = [v.gap_limit for v in times if v.gap_limit is not None]
    start = min(present_cuts) - max(_LEAD_SECONDS, _LEAD_GAPS * (max(gaps) if gaps else 0.0))
    ends = chunk_ends(derived) if ends is None else ends
    reaching = [chunk for chunk, last in ends.items() if last >= start]
    return rows.filter(F.col(CHUNK).isin(reaching)).filter(observed_seconds() >= F.lit(start))


def short_of_context(forecast: list[dict], times: list[VolumeTimes], end: HistoryEnd) -> bool:
    """Whether a forecast made with ``context`` (its rows collected) of ``near_forecast_rows``
    lacks a present volume or one of GAIN_CONTEXT observations before its window: the check of
    ``forecast_rows``, then the forecast is made again of every row."""
    context = {(row["broker_id"], row["log_dir"]): row[CONTEXT] for row in forecast}
    return any(context.get(v.volume, 0) < GAIN_CONTEXT for v in times if _present(v, end))


# How far before the earliest window the forecast's rows are read: enough for GAIN_CONTEXT
# observations of a volume observed every round, gaps of the gap limit included (checked; all
# rows otherwise).
_LEAD_SECONDS = 600.0
_LEAD_GAPS = 4
