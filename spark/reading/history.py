"""Reading the history: declared schema, corrupt and truncated lines skipped and counted."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.history.schema import PARTITION_PREFIX
from spark.reading.cache import CHUNK, LINES, Derive, history_files, read_cached
from spark.reading.schema import (
    HISTORY_SCHEMA,
    INSTANT_PATTERN,
    KINDS,
    MISSING,
    NOT_ALLOWED,
    NOT_INSTANT,
    NOT_TEXT,
    OUT_OF_RANGE,
    READ_SCHEMA,
    REPORT_SCHEMA,
    TIMESTAMP_FIELDS,
    UNPARSED_LINE,
    UNREADABLE,
    VOLUME_FIELDS,
    VOLUME_INCOMPLETE,
    free_text,
    rule,
)

PARTITION_COLUMN = PARTITION_PREFIX.rstrip("=")
# Why a line was skipped (schema.UNREADABLE or "<field>: <problem>"); null on a kept line.
SKIP_REASON = "skip_reason"
LINES_SCHEMA = T.StructType([*REPORT_SCHEMA.fields, T.StructField(SKIP_REASON, T.StringType(), nullable=True)])
_FILE_PATH = "file_path"  # the file a line came from, as Spark names it (cache.read_cached maps it to CHUNK)


@dataclass(frozen=True)
class History:
    rows: DataFrame  # valid rows only, the fields of REPORT_SCHEMA (and CHUNK), read from the parsed copy
    lines: DataFrame  # every line read, valid or not (``valid()`` tells): the fields of REPORT_SCHEMA (and CHUNK)
    # The tables ``derive`` made per file (``analysis.partials``), over the lines read; empty
    # without ``derive``.
    derived: dict[str, DataFrame] = field(default_factory=dict)
    parsed_days: tuple[str, ...] = ()  # with a cache: the days with a file parsed in this run (YYYY-MM-DD)
    reused_days: tuple[str, ...] = ()  # and the days read whole from the cache
    parsed_files: int = 0  # with a cache: the files parsed in this run
    reused_files: int = 0  # and those read from the cache


@dataclass(frozen=True)
class LineCounts:
    rows: int  # valid rows
    skipped_lines: int  # lines that did not parse (a truncated last line, corruption, a value of the wrong type) or lack time/state
    first_time: float | None  # epoch seconds of the first and last valid row
    last_time: float | None


def _json(spark: SparkSession, files: list[str]) -> DataFrame:
    """The JSON lines of ``files``, as READ_SCHEMA, with the FILE_PATH each came from.

    PERMISSIVE: a line that does not convert whole (not JSON, a number or boolean field of
    another type) keeps its text in UNPARSED_LINE; the checks then skip it as UNREADABLE.
    Non-numeric numbers (NaN, "Infinity") are refused as JSON does. The text of a skipped
    line goes no further than ``checked_lines``."""
    raw = (
        spark.read.schema(READ_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", UNPARSED_LINE)
        .option("allowNonNumericNumbers", "false")
        .json(files)
    )
    return raw.withColumn(_FILE_PATH, F.col("_metadata.file_path"))


def read_history(
    spark: SparkSession,
    path: str,
    parsed: str,
    since: datetime | None = None,
    until: datetime | None = None,
    cache: str | None = None,
    derive: Derive | None = None,
) -> History:
    """Read ``path`` (the history: a folder of date=YYYY-MM-DD partitions or of JSON lines
    files, or one file).

    Each file is parsed once, into Parquet, with the tables ``derive`` makes of its lines, and
    every table of the report is computed from those: writing them costs less than building
    Spark's in-memory cache of the same rows, and each report then reads only the columns it
    needs. With ``cache`` (a folder), the files stay there and are parsed again only when they
    change (``cache.read_cached``); without, the copy is at ``parsed`` (a scratch folder the
    caller deletes when the report is done).

    Only the rows with ``since <= time < until`` are kept; the date partitions outside that
    range are not read at all. With either bound, the derived tables are made again from the
    rows kept (a file's cached tables hold all its rows)."""
    derive = derive or (lambda lines, persisted: {})
    files = history_files(spark, path, since, until)
    whole = since is None and until is None
    schema = T.StructType([*LINES_SCHEMA.fields, T.StructField(CHUNK, T.StringType())])
    parse = lambda paths: checked_lines(_json(spark, paths), keep=(_FILE_PATH,))  # noqa: E731
    cached = read_cached(spark, files, cache or parsed, parse, derive, schema, prune=whole)
    derived = {name: table for name, table in cached.tables.items() if name != LINES}
    lines = cached.tables[LINES]
    if not whole:
        lines = _within(lines, since, until)
        derived = derive(lines, None)
    counts = (len(cached.parsed), len(cached.files) - len(cached.parsed)) if cache is not None else (0, 0)
    days = (cached.parsed_days, cached.reused_days) if cache is not None else ((), ())
    return History(lines.filter(valid()), lines, derived, *days, *counts)


def _within(lines: DataFrame, since: datetime | None, until: datetime | None) -> DataFrame:
    """The lines with ``since <= time < until``, and every skipped line (it has no time)."""
    if since is not None:
        lines = lines.filter(F.col("time").isNull() | (F.col("time") >= F.lit(since)))
    if until is not None:
        lines = lines.filter(F.col("time").isNull() | (F.col("time") < F.lit(until)))
    return lines


def _typed(name: str) -> Column:
    """The field as the report reads it: timestamps cast from their text, free texts taken
    out of their variant."""
    if name in TIMESTAMP_FIELDS:
        return F.col(name).try_cast("timestamp")
    if free_text(name):
        return F.try_variant_get(F.col(name), "$", "string")
    return F.col(name)


def _typed_column(name: str) -> str:
    """The working column of ``checked_lines`` that holds a timestamp field's ``_typed`` value."""
    return f"{name}__typed"


def _problem(name: str, typed: Column | None = None) -> Column:
    """Why the field fails its check (``schema.RULES`` and its kind), or null. ``typed``: the
    field's ``_typed`` value where the caller has it already (else the check casts again)."""
    value, rule_ = F.col(name), rule(name)
    present = value.isNotNull() & ~F.is_variant_null(value) if free_text(name) else value.isNotNull()
    checks: list[tuple[Column, str]] = []
    if rule_.required:
        checks.append((~present, MISSING))
    if name in TIMESTAMP_FIELDS:
        checks.append((present & ~(value.rlike(INSTANT_PATTERN) & (_typed(name) if typed is None else typed).isNotNull()), NOT_INSTANT))
    elif free_text(name):
        checks.append((present & (F.schema_of_variant(value) != F.lit("STRING")), NOT_TEXT))
    if rule_.allowed:
        checks.append((present & ~value.isin(*rule_.allowed), NOT_ALLOWED))
    if KINDS[name] == "double":
        checks.append((present & (F.isnan(value) | (F.abs(value) == F.lit(float("inf")))), OUT_OF_RANGE))
    if rule_.minimum is not None:
        checks.append((present & ((value <= rule_.minimum) if rule_.above_minimum else (value < rule_.minimum)), OUT_OF_RANGE))
    if rule_.maximum is not None:
        checks.append((present & (value > rule_.maximum), OUT_OF_RANGE))
    return F.coalesce(*[F.when(failed, F.lit(f"{name}: {problem}")) for failed, problem in checks], F.lit(None).cast("string"))


def skip_reason(raw: DataFrame) -> Column:
    """Why a line of ``raw`` (read with READ_SCHEMA) is skipped, or null when it is kept. A
    timestamp field's check reads its cast from ``raw`` where ``raw`` has it (``checked_lines``)."""
    casts = {name: F.col(_typed_column(name)) for name in TIMESTAMP_FIELDS if _typed_column(name) in raw.columns}
    broker, log_dir = (F.col(name).isNotNull() & (~F.is_variant_null(F.col(name)) if free_text(name) else F.lit(True)) for name in VOLUME_FIELDS)
    return F.coalesce(
        F.when(F.col(UNPARSED_LINE).isNotNull(), F.lit(UNREADABLE)),
        *[_problem(name, casts.get(name)) for name in HISTORY_SCHEMA.fieldNames() if name in raw.columns],
        F.when(broker != log_dir, F.lit(VOLUME_INCOMPLETE)),
    )


def checked_lines(raw: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
    """Every line read, with the fields of REPORT_SCHEMA and SKIP_REASON (and the columns of
    ``raw`` named in ``keep``); a skipped line keeps no time (so ``valid()`` is false for it)
    and none of its values are used."""
    # Each timestamp is cast once, into a column of its own that its check and the line's value
    # both read: written in both, Spark would cast it twice (5-7% of this step's CPU).
    cast = raw.withColumns({_typed_column(name): _typed(name) for name in TIMESTAMP_FIELDS if name in raw.columns})
    with_reason = cast.withColumn(SKIP_REASON, skip_reason(cast))
    kept = F.col(SKIP_REASON).isNull()

    def value(name: str) -> Column:
        return F.col(_typed_column(name)) if name in TIMESTAMP_FIELDS else _typed(name)

    columns = [(F.when(kept, value(name)) if name == "time" else value(name)).alias(name) for name in REPORT_SCHEMA.fieldNames()]
    typed = with_reason.select(*columns, SKIP_REASON, *keep)
    assert typed.schema.fields[: len(REPORT_SCHEMA.fields)] == REPORT_SCHEMA.fields, typed.schema
    return typed


def skipped_by_reason(lines: DataFrame) -> dict[str, int]:
    """The skipped lines of ``History.lines``, counted by reason."""
    return most_first(lines.filter(F.col(SKIP_REASON).isNotNull()).groupBy(SKIP_REASON).count())


def most_first(counts: DataFrame) -> dict[str, int]:
    """Counts by SKIP_REASON (a ``count`` per reason), the most first."""
    rows = counts.collect()
    return {row[SKIP_REASON]: row["count"] for row in sorted(rows, key=lambda row: (-row["count"], row[SKIP_REASON]))}


def valid() -> Column:
    """Whether a line (a row of ``History.lines``, or a group of them by time and state) is valid:
    it converted whole (else ``read_history`` left its time empty), its time is an instant and
    it has a state."""
    return F.col("time").isNotNull() & F.col("state").isNotNull()


def line_counts(decisions: DataFrame) -> LineCounts:
    """The lines read, valid and skipped, from ``states.decisions(history.lines)``: the pass
    that finds the rounds counts the lines too (a line is valid when its time and state are)."""
    ok = valid()
    counts = decisions.agg(
        F.sum(F.when(ok, F.col("lines"))).alias("valid"),
        F.sum(F.when(~ok, F.col("lines"))).alias("skipped"),
        F.min(F.when(ok, epoch_seconds("time"))).alias("first"),
        F.max(F.when(ok, epoch_seconds("time"))).alias("last"),
    ).first()
    return LineCounts(counts["valid"] or 0, counts["skipped"] or 0, counts["first"], counts["last"])


def epoch_seconds(column: str) -> Column:
    """A timestamp as seconds since the epoch, to the microsecond (collected values stay
    independent of the driver's time zone)."""
    return F.unix_micros(F.col(column)) / F.lit(1_000_000.0)
