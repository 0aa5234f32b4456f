"""Reading the history: declared schema, corrupt and truncated lines skipped and counted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.history.schema import PARTITION_PREFIX
from spark.reading.cache import history_days, read_cached
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
# The parsed copy is written once and read a few times, whole, by this job: plain pages (no
# dictionaries), and no min/max statistics or page checksums, which nothing here reads.
_SCRATCH_PARQUET = {
    "parquet.enable.dictionary": "false",
    "parquet.column.statistics.enabled": "false",
    "parquet.size.statistics.enabled": "false",
    "parquet.page.write-checksum.enabled": "false",
}


@dataclass(frozen=True)
class History:
    rows: DataFrame  # valid rows only, the fields of REPORT_SCHEMA, read from the parsed copy
    lines: DataFrame  # every line read, valid or not (``valid()`` tells): the fields of REPORT_SCHEMA
    parsed_days: tuple[str, ...] = ()  # with a cache: the days parsed in this run (YYYY-MM-DD)
    reused_days: tuple[str, ...] = ()  # and the days read from the cache


@dataclass(frozen=True)
class LineCounts:
    rows: int  # valid rows
    skipped_lines: int  # lines that did not parse (a truncated last line, corruption, a value of the wrong type) or lack time/state
    first_time: float | None  # epoch seconds of the first and last valid row
    last_time: float | None


def _json(spark: SparkSession, base: str, *paths: str) -> DataFrame:
    """The JSON lines under ``paths`` (folders of ``base``, the history folder), as READ_SCHEMA.

    PERMISSIVE: a line that does not convert whole (not JSON, a number or boolean field of
    another type) keeps its text in UNPARSED_LINE; the checks then skip it as UNREADABLE.
    Non-numeric numbers (NaN, "Infinity") are refused as JSON does. The text of a skipped
    line goes no further than ``checked_lines``."""
    return (
        spark.read.schema(READ_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", UNPARSED_LINE)
        .option("allowNonNumericNumbers", "false")
        .option("basePath", base)
        .json(list(paths))
    )


def read_history(
    spark: SparkSession, path: str, parsed: str, since: datetime | None = None, until: datetime | None = None, cache: str | None = None
) -> History:
    """Read ``path`` (the history folder: date=YYYY-MM-DD/ partitions, or plain JSON lines).

    The JSON is parsed once, into Parquet, and every table is computed from that copy: writing
    it costs less than building Spark's in-memory cache of the same rows, and each report then
    reads only the columns it needs. Without ``cache``, the copy is at ``parsed`` (a scratch
    folder the caller deletes when the report is done); with it, each day is kept in the
    cache folder and parsed again only when its files change (``cache.read_cached``).

    Only the rows with ``since <= time < until`` are kept; the date partitions outside that
    range are not read at all."""
    if cache is not None and history_days(path):
        cached = read_cached(spark, path, cache, lambda folders: checked_lines(_json(spark, path, *folders), keep=(PARTITION_COLUMN,)), since, until)
        lines = cached.lines if cached.lines is not None else spark.createDataFrame([], LINES_SCHEMA)
        lines = _within(lines, since, until)
        return History(lines.filter(valid()), lines, cached.parsed_days, cached.reused_days)
    raw = _json(spark, path, path)
    if PARTITION_COLUMN in raw.columns:  # prune whole days before parsing them
        if since is not None:
            raw = raw.filter(F.col(PARTITION_COLUMN) >= F.lit(since.date()))
        if until is not None:
            raw = raw.filter(F.col(PARTITION_COLUMN) <= F.lit(until.date()))
    # Read and parse once: every report below starts from this copy.
    _within(checked_lines(raw), since, until).write.mode("overwrite").options(**_SCRATCH_PARQUET).parquet(parsed)
    lines = spark.read.parquet(parsed)
    return History(lines.filter(valid()), lines)


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


def _problem(name: str) -> Column:
    """Why the field fails its check (``schema.RULES`` and its kind), or null."""
    value, rule_ = F.col(name), rule(name)
    present = value.isNotNull() & ~F.is_variant_null(value) if free_text(name) else value.isNotNull()
    checks: list[tuple[Column, str]] = []
    if rule_.required:
        checks.append((~present, MISSING))
    if name in TIMESTAMP_FIELDS:
        checks.append((present & ~(value.rlike(INSTANT_PATTERN) & _typed(name).isNotNull()), NOT_INSTANT))
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
    """Why a line of ``raw`` (read with READ_SCHEMA) is skipped, or null when it is kept."""
    broker, log_dir = (F.col(name).isNotNull() & (~F.is_variant_null(F.col(name)) if free_text(name) else F.lit(True)) for name in VOLUME_FIELDS)
    return F.coalesce(
        F.when(F.col(UNPARSED_LINE).isNotNull(), F.lit(UNREADABLE)),
        *[_problem(name) for name in HISTORY_SCHEMA.fieldNames() if name in raw.columns],
        F.when(broker != log_dir, F.lit(VOLUME_INCOMPLETE)),
    )


def checked_lines(raw: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
    """Every line read, with the fields of REPORT_SCHEMA and SKIP_REASON (and the columns of
    ``raw`` named in ``keep``); a skipped line keeps no time (so ``valid()`` is false for it)
    and none of its values are used."""
    with_reason = raw.withColumn(SKIP_REASON, skip_reason(raw))
    kept = F.col(SKIP_REASON).isNull()
    columns = [(F.when(kept, _typed(name)) if name == "time" else _typed(name)).alias(name) for name in REPORT_SCHEMA.fieldNames()]
    typed = with_reason.select(*columns, SKIP_REASON, *keep)
    assert typed.schema.fields[: len(REPORT_SCHEMA.fields)] == REPORT_SCHEMA.fields, typed.schema
    return typed


def skipped_by_reason(lines: DataFrame) -> dict[str, int]:
    """The skipped lines of ``History.lines``, counted by reason."""
    counts = lines.filter(F.col(SKIP_REASON).isNotNull()).groupBy(SKIP_REASON).count().collect()
    return {row[SKIP_REASON]: row["count"] for row in sorted(counts, key=lambda row: (-row["count"], row[SKIP_REASON]))}


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
