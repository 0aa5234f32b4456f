"""Reading the history: declared schema, corrupt and truncated lines skipped and counted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from app.history.schema import PARTITION_PREFIX
from spark.reading.schema import READ_SCHEMA, REPORT_SCHEMA, TIMESTAMP_FIELDS, UNPARSED_LINE

PARTITION_COLUMN = PARTITION_PREFIX.rstrip("=")
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


@dataclass(frozen=True)
class LineCounts:
    rows: int  # valid rows
    skipped_lines: int  # lines that did not parse (a truncated last line, corruption, a value of the wrong type) or lack time/state
    first_time: float | None  # epoch seconds of the first and last valid row
    last_time: float | None


def read_history(spark: SparkSession, path: str, parsed: str, since: datetime | None = None, until: datetime | None = None) -> History:
    """Read ``path`` (the history folder: date=YYYY-MM-DD/ partitions, or plain JSON lines).

    The JSON is parsed once, into a Parquet copy at ``parsed`` (a scratch folder the caller
    deletes when the report is done), and every table is computed from that copy: writing it
    costs less than building Spark's in-memory cache of the same rows, and each report then
    reads only the columns it needs.

    Only the rows with ``since <= time < until`` are kept; the date partitions outside that
    range are not read at all."""
    # PERMISSIVE: a line that does not convert whole (truncated, corrupt, a value of the wrong
    # type) keeps its text in UNPARSED_LINE, and whatever Spark made of its fields. Such a line
    # gets no time, so it is not valid (``valid()``) and is counted by ``line_counts``. Its text
    # goes no further than this select.
    raw = (
        spark.read.schema(READ_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", UNPARSED_LINE)
        .option("basePath", path)
        .json(path)
    )
    if PARTITION_COLUMN in raw.columns:  # prune whole days before parsing them
        if since is not None:
            raw = raw.filter(F.col(PARTITION_COLUMN) >= F.lit(since.date()))
        if until is not None:
            raw = raw.filter(F.col(PARTITION_COLUMN) <= F.lit(until.date()))
    converted = F.col(UNPARSED_LINE).isNull()

    def typed_column(name: str) -> Column:
        if name == "time":
            return F.when(converted, F.col(name).try_cast("timestamp")).alias(name)
        if name in TIMESTAMP_FIELDS:
            return F.col(name).try_cast("timestamp").alias(name)
        return F.col(name)

    typed = raw.select(*[typed_column(name) for name in REPORT_SCHEMA.fieldNames()])
    assert typed.schema == REPORT_SCHEMA
    if since is not None:
        typed = typed.filter(F.col("time").isNull() | (F.col("time") >= F.lit(since)))
    if until is not None:
        typed = typed.filter(F.col("time").isNull() | (F.col("time") < F.lit(until)))
    # Read and parse once: every report below starts from this copy.
    typed.write.mode("overwrite").options(**_SCRATCH_PARQUET).parquet(parsed)
    lines = spark.read.parquet(parsed)
    return History(lines.filter(valid()), lines)


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
