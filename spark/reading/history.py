"""Reading the history: declared schema, corrupt and truncated lines skipped and counted.

Files of either format, plain or compressed (``.jsonl.bz2``, ``.jsonl.gz``: Spark reads both as they are), in any mix. Format 2's
rows (``app/history/compact.py``) are expanded here into the rows format 1 would have written
for the same rounds, so everything after the reader sees one full row per volume per round:
a volume row gives its volume's row for its own round and every later round of its hour until
that volume's next row, its gone row or the next keyframe; a round row gives every such row its
round's fields and the shared values in force (the latest round row of the hour giving them),
and is itself a row without a volume when its view was empty. A skipped line counts once: the
rounds a skipped volume row stood for get no row, nor does a skipped round (its volume rows
written in it are skipped with its reason; the round row counts when no volume row of it is
written)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.history.schema import (
    GONE,
    PARTITION_PREFIX,
    ROUND,
    ROUND_FIELDS,
    ROW_KIND,
    SHARED_FIELDS,
    VOLUME,
    VOLUME_ROW_FIELDS,
)
from spark.reading.cache import (
    CHUNK,
    LINES,
    Derive,
    HistoryFile,
    Pack,
    batches,
    history_files,
    read_cached,
)
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
    ROW_KINDS,
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
LINES_SCHEMA = T.StructType(
    [*REPORT_SCHEMA.fields, T.StructField(SKIP_REASON, T.StringType(), nullable=True)]
)
_FILE_PATH = (
    "file_path"  # the file a line came from, as Spark names it (cache.read_cached maps it to CHUNK)
)


@dataclass(frozen=True)
class History:
    rows: DataFrame  # valid rows only, the fields of REPORT_SCHEMA (and CHUNK), read from the parsed copy
    lines: DataFrame  # every line read, valid or not (``valid()`` tells): the fields of REPORT_SCHEMA (and CHUNK)
    # The tables ``derive`` made per file (``analysis.partials``), over the lines read; empty
    # without ``derive``.
    derived: dict[str, DataFrame] = field(default_factory=dict)
    parsed_days: tuple[
        str, ...
    ] = ()  # with a cache: the days with a file parsed in this run (YYYY-MM-DD)
    reused_days: tuple[str, ...] = ()  # and the days read whole from the cache
    parsed_files: int = 0  # with a cache: the files parsed in this run
    reused_files: int = 0  # and those read from the cache
    # With a cache and a ``Pack``, over the whole history: its tables with each closed day's
    # files packed as one share, and each packed file's pack by CHUNK (``cache.Cached``).
    packed: dict[str, DataFrame] | None = None
    units: dict[str, str] | None = None


@dataclass(frozen=True)
class LineCounts:
    rows: int  # valid rows
    skipped_lines: int  # lines that did not parse (a truncated last line, corruption, a value of the wrong type) or lack time/state
    first_time: float | None  # epoch seconds of the first and last valid row
    last_time: float | None


def _json(spark: SparkSession, files: list[str]) -> DataFrame:
    """The JSON lines of ``files``, as READ_SCHEMA, with the FILE_PATH each came from.

    Each line is read as text, then converted: a line that is not one JSON object (an array
    holding a row included, which Spark's JSON file reader would read as that row) or does not
    convert whole (a number or boolean field of another type) keeps its text in UNPARSED_LINE;
    the checks then skip it as UNREADABLE. Non-numeric numbers (NaN, "Infinity") are refused as
    JSON does. Blank lines are not lines. The text of a skipped line goes no further than
    ``checked_lines``."""
    text = spark.read.text(files).select("value", F.col("_metadata.file_path").alias(_FILE_PATH))
    options = {
        "mode": "PERMISSIVE",
        "columnNameOfCorruptRecord": UNPARSED_LINE,
        "allowNonNumericNumbers": "false",
    }
    parsed = text.filter(~F.col("value").rlike(r"^[ \t]*$")).select(
        F.from_json("value", READ_SCHEMA, options).alias("line"), _FILE_PATH
    )
    return parsed.select("line.*", _FILE_PATH)


_ROUND_ONLY = "round_only__"
_BUCKET, _AT, _INDEX, _SEGMENT, _SEGMENT_END, _SHARED = (
    "bucket__",
    "at__",
    "index__",
    "segment__",
    "segment_end__",
    "shared__",
)


def parse_lines(spark: SparkSession, files: list[str], scratch: str) -> DataFrame:
    """``checked_lines`` of ``files`` (with FILE_PATH), format 2's rows expanded (the module's
    docstring). The lines are read and converted once, into ``scratch`` (a folder): the
    expansion reads them in several places (round rows, volume rows, the rows they stand in
    for), and each would otherwise read the files again, decompressing and converting every
    line each time."""
    raw = _json(spark, files)
    spark.sparkContext.setJobDescription(f"read {len(files)} history files")
    raw.write.mode("overwrite").parquet(scratch)
    return expanded_lines(spark.read.schema(raw.schema).parquet(scratch))


def expanded_lines(raw: DataFrame) -> DataFrame:
    """``checked_lines`` of ``raw`` (READ_SCHEMA and FILE_PATH), format 2's rows expanded."""
    kind = F.col(ROW_KIND)
    compact = kind.isNotNull() & kind.isin(*ROW_KINDS) & F.col(UNPARSED_LINE).isNull()
    plain = raw.filter(~compact | compact.isNull())
    lines = raw.filter(compact).withColumns(
        {
            # a file's hour: the unit a format 2 volume row stands in (each begins with a keyframe)
            _BUCKET: F.concat_ws(
                "|", F.coalesce(F.col(_FILE_PATH), F.lit("")), F.substring(F.col("time"), 1, 13)
            ),
            _AT: F.col("time").try_cast("timestamp"),
        }
    )
    by_time = (
        Window.partitionBy(_BUCKET)
        .orderBy(_AT)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    shared = F.struct(*[F.col(name) for name in SHARED_FIELDS])
    placed = lines.filter((kind == ROUND) & F.col(_AT).isNotNull()).withColumn(
        _SHARED, F.last(F.when(F.col("shared"), shared), ignorenulls=True).over(by_time)
    )
    # The rounds volume rows stand in: those with a count of volumes (the others are skipped).
    rounds = (
        placed.filter(F.col("volumes") >= 0)
        .withColumns(
            {
                _INDEX: F.row_number().over(Window.partitionBy(_BUCKET).orderBy(_AT)),
                _SEGMENT: F.sum(F.when(F.col("keyframe"), 1).otherwise(0)).over(by_time),
            }
        )
        .withColumn(_SEGMENT_END, F.max(_INDEX).over(Window.partitionBy(_BUCKET, _SEGMENT)))
    )
    round_side = rounds.select(
        F.col(_BUCKET).alias(f"r__{_BUCKET}"),
        _INDEX,
        _SEGMENT,
        _SEGMENT_END,
        _SHARED,
        *[F.col(n).alias(f"r__{n}") for n in ("time", _AT, *ROUND_FIELDS)],
    )
    volumes = lines.filter(kind.isin(VOLUME, GONE))
    key = [F.col("broker_id"), F.try_variant_get(F.col("log_dir"), "$", "string"), F.col("holds")]
    own = (
        volumes.join(
            round_side,
            (F.col(_BUCKET) == F.col(f"r__{_BUCKET}")) & (F.col(_AT) == F.col(f"r__{_AT}")),
            "left",
        )
        .drop(f"r__{_BUCKET}")
        .withColumn("next__", F.lead(_INDEX).over(Window.partitionBy(_BUCKET, *key).orderBy(_AT)))
        .filter(kind == VOLUME)
    )

    metadata = F.coalesce(F.col("holds").contains("metadata"), F.lit(False))
    usable, total = F.col("usable_bytes"), F.col("total_bytes")
    # left out of format 2's volume rows: usable / total, as the service computes it
    ratio = F.when(
        (usable >= 0) & (total >= 0),
        F.when(total > 0, usable.cast("double") / total.cast("double")).otherwise(F.lit(0.0)),
    )
    filled_ratio = F.coalesce(F.col("available_ratio"), ratio)

    def full_row(time: Column, age: Column) -> list[Column]:
        """A volume row with its round's fields: READ_SCHEMA's columns."""
        columns = {
            "time": time,
            "observation_age_seconds": age,
            _ROUND_ONLY: F.lit(False),
            _FILE_PATH: F.col(_FILE_PATH),
        }
        columns |= {
            name: F.lit(None).cast(_RAW_TYPES[name])
            for name in ("volumes", "shared", "keyframe", UNPARSED_LINE)
        }
        columns[ROW_KIND] = F.lit(VOLUME)
        columns |= {name: F.col(f"r__{name}") for name in ROUND_FIELDS}
        columns |= {name: F.col(f"{_SHARED}.{name}") for name in SHARED_FIELDS}
        columns |= {
            name: F.when(metadata, F.col(name)).otherwise(F.col(f"{_SHARED}.{name}"))
            for name in _LIMITS
        }
        columns |= {name: F.col(name) for name in VOLUME_ROW_FIELDS if name not in columns}
        columns["available_ratio"] = filled_ratio
        return [columns[name].alias(name) for name in _OUTPUT_COLUMNS]

    own_rows = own.select(*full_row(F.col("time"), F.col("observation_age_seconds")))
    carried_rows = _carried_rows(own, rounds, metadata, filled_ratio)

    round_rows = placed.select(
        *[
            (
                F.col(name)
                if name
                in (
                    *ROUND_FIELDS,
                    "time",
                    UNPARSED_LINE,
                    ROW_KIND,
                    "volumes",
                    "shared",
                    "keyframe",
                    _FILE_PATH,
                )
                else F.col(f"{_SHARED}.{name}")
                if name in SHARED_FIELDS
                else F.lit(None).cast(_RAW_TYPES[name])
            ).alias(name)
            for name in _OUTPUT_COLUMNS
            if name != _ROUND_ONLY
        ],
        F.coalesce(F.col("volumes") != 0, F.lit(False)).alias(_ROUND_ONLY),
    )
    # A round row whose time does not read: checked as it is (it is skipped).
    unplaced = lines.filter((kind == ROUND) & F.col(_AT).isNull()).select(
        *[F.col(name) for name in _OUTPUT_COLUMNS if name != _ROUND_ONLY],
        F.lit(False).alias(_ROUND_ONLY),
    )
    written = (
        plain.withColumn(_ROUND_ONLY, F.lit(False))
        .select(*_OUTPUT_COLUMNS)
        .unionByName(own_rows)
        .unionByName(round_rows)
        .unionByName(unplaced)
    )
    checked = checked_lines(written, keep=(_FILE_PATH, _ROUND_ONLY))
    # A round row stands for itself only when its view was empty (it has no volume row).
    counted = ~(F.col(_ROUND_ONLY) & F.col(SKIP_REASON).isNull())
    return checked.filter(counted).drop(_ROUND_ONLY).unionByName(carried_rows)


_LIMITS = ("limit_kind", "hard_limit", "soft_limit")
# The fields a carried row (a round a volume row stands in) takes from that volume row, checked
# and typed once per volume row (the time and the age are the round's); the others are its
# round's (ROUND_FIELDS and the time) and the shared values in force then, checked and typed
# once per round. A metadata volume's row gives its own limits.
_VOLUME_SIDE = tuple(
    name
    for name in HISTORY_SCHEMA.fieldNames()
    if name not in (*ROUND_FIELDS, *SHARED_FIELDS, "time", "observation_age_seconds")
)
_ROUND_SIDE = ("time", *ROUND_FIELDS)
_SHARED_ALWAYS = tuple(name for name in SHARED_FIELDS if name not in _LIMITS)
_VOLUME_BAD, _ROUND_BAD, _SHARED_BAD, _LIMITS_BAD, _METADATA = (
    "volume_bad__",
    "round_bad__",
    "shared_bad__",
    "limits_bad__",
    "metadata__",
)


def _failing(names: tuple[str, ...]) -> Column:
    """Whether any of the fields fails its check (``_problem``)."""
    return F.coalesce(*[_problem(name) for name in names]).isNotNull()


def _carried_rows(own: DataFrame, rounds: DataFrame, metadata: Column, ratio: Column) -> DataFrame:
    """The rows format 1 would have written for the later rounds each volume row of ``own``
    stands in, as ``checked_lines`` gives them, the valid ones only (a carried row that fails a
    check is not a line of the history: nothing counts it). Checking and typing happen before
    the rows are multiplied: the volume row's fields once per volume row, the round's once per
    round; a carried row fails a check exactly when one of its values does, so it is kept when
    neither side fails (and its age, the one value made per carried row, is in range)."""
    stands_until = F.least(
        F.coalesce(F.col("next__") - 1, F.col(_SEGMENT_END)), F.col(_SEGMENT_END)
    )
    volume_values = [
        name
        for name in REPORT_SCHEMA.fieldNames()
        if name in _VOLUME_SIDE or name in _LIMITS or name == "observation_age_seconds"
    ]
    volumes = (
        own.filter(F.col(_INDEX).isNotNull() & (stands_until > F.col(_INDEX)))
        .withColumn("available_ratio", ratio)
        .select(
            *[_report_value(name).alias(f"v__{name}") for name in volume_values],
            metadata.alias(_METADATA),
            (_failing(_VOLUME_SIDE) | (metadata & _failing(_LIMITS)) | _volume_incomplete()).alias(
                _VOLUME_BAD
            ),
            _FILE_PATH,
            _BUCKET,
            F.col(_INDEX).alias("from__"),
            stands_until.alias("until__"),
        )
    )
    spans = volumes.select(
        *[name for name in volumes.columns if name not in ("from__", "until__")],
        F.explode(F.sequence(F.col("from__") + 1, F.col("until__"))).alias(_INDEX),
    )
    round_values = [
        name for name in REPORT_SCHEMA.fieldNames() if name in (*_ROUND_SIDE, *SHARED_FIELDS)
    ]
    in_force = rounds.withColumns({name: F.col(f"{_SHARED}.{name}") for name in SHARED_FIELDS})
    round_side = in_force.select(
        _BUCKET,
        _INDEX,
        F.col(_AT).alias("r__at"),
        *[_report_value(name).alias(f"r__{name}") for name in round_values],
        _failing(_ROUND_SIDE).alias(_ROUND_BAD),
        _failing(_SHARED_ALWAYS).alias(_SHARED_BAD),
        _failing(_LIMITS).alias(_LIMITS_BAD),
    )
    # The observation aged by the round (without an observed_at, the row's own age stands, as
    # the reference reader gives it: Spark's greatest would take the 0 for a missing difference).
    observed = F.col("v__observed_at")
    aged = F.when(
        observed.isNotNull(),
        F.round(
            F.greatest(
                F.lit(0.0),
                (F.unix_micros(F.col("r__at")) - F.unix_micros(observed)) / F.lit(1_000_000.0),
            ),
            3,
        ),
    )
    carried = (
        spans.join(F.broadcast(round_side), [_BUCKET, _INDEX])
        .withColumn(
            "observation_age_seconds", F.coalesce(aged, F.col("v__observation_age_seconds"))
        )
        .filter(
            ~F.col(_VOLUME_BAD)
            & ~F.col(_ROUND_BAD)
            & ~F.col(_SHARED_BAD)
            & (F.col(_METADATA) | ~F.col(_LIMITS_BAD))
            & ~_failing(("observation_age_seconds",))
        )
    )

    def value(name: str) -> Column:
        if name == "observation_age_seconds":
            return F.col(name)
        if name in _LIMITS:
            return F.when(F.col(_METADATA), F.col(f"v__{name}")).otherwise(F.col(f"r__{name}"))
        return F.col(f"r__{name}" if name in round_values else f"v__{name}")

    return carried.select(
        *[value(name).alias(name) for name in REPORT_SCHEMA.fieldNames()],
        F.lit(None).cast("string").alias(SKIP_REASON),
        _FILE_PATH,
    )


_RAW_TYPES = {f.name: f.dataType for f in READ_SCHEMA.fields}
_OUTPUT_COLUMNS = (*READ_SCHEMA.fieldNames(), _FILE_PATH, _ROUND_ONLY)


def read_history(
    spark: SparkSession,
    path: str,
    parsed: str,
    since: datetime | None = None,
    until: datetime | None = None,
    cache: str | None = None,
    derive: Derive | None = None,
    files: list[HistoryFile] | None = None,
    pack: Pack | None = None,
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
    rows kept (a file's cached tables hold all its rows). ``files``: ``history_files`` of
    ``path``, ``since`` and ``until``, where the caller has listed them already. ``pack``:
    with ``cache`` and neither bound, the tables it makes are also given packed per closed day
    (``History.packed``)."""
    derive = derive or (lambda lines, persisted: {})
    if files is None:
        files = history_files(spark, path, since, until)
    whole = since is None and until is None
    schema = T.StructType([*LINES_SCHEMA.fields, T.StructField(CHUNK, T.StringType())])
    parse = lambda paths, scratch: parse_lines(spark, paths, scratch)  # noqa: E731
    cached = read_cached(
        spark,
        files,
        cache or parsed,
        parse,
        derive,
        schema,
        prune=whole,
        pack=pack if cache is not None else None,
    )
    derived = {name: table for name, table in cached.tables.items() if name != LINES}
    lines = cached.tables[LINES]
    if not whole:
        lines = _within(lines, since, until)
        derived = _derived_in_batches(lines, cached.files, derive)
    counts = (
        (len(cached.parsed), len(cached.files) - len(cached.parsed))
        if cache is not None
        else (0, 0)
    )
    days = (cached.parsed_days, cached.reused_days) if cache is not None else ((), ())
    return History(
        lines.filter(valid()), lines, derived, *days, *counts, cached.packed, cached.units
    )


def _derived_in_batches(
    lines: DataFrame, files: tuple[HistoryFile, ...], derive: Derive
) -> dict[str, DataFrame]:
    """``derive`` of ``lines`` (of ``files``) a batch of files at a time (``cache.batches``),
    each table the union of the batches': a derived table is per file, and what one derive
    holds grows with its files, as in the cache's parse."""
    parts = [
        derive(lines.filter(F.col(CHUNK).isin([f.key for f in batch])), None)
        for batch in batches(list(files))
    ]
    if not parts:
        return derive(lines, None)
    return {
        name: reduce(DataFrame.unionByName, [part[name] for part in parts]) for name in parts[0]
    }


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


OBSERVED_BY = "observed_by"


def node_reported() -> Column:
    """1 for a volume row whose observation came from its node's report, else 0: summed, the
    observations each table says came from node reports."""
    return F.when(F.col(OBSERVED_BY) == F.lit("node-report"), F.lit(1)).otherwise(F.lit(0))


def _observed_by() -> Column:
    """Where a volume row's observation came from; on a row written before the field existed
    (or a format 2 row leaving it out), admin-api, node-report on a metadata volume's row. Null
    on a row without a volume."""
    metadata = F.coalesce(F.col("holds").contains("metadata"), F.lit(False))
    default = F.when(metadata, F.lit("node-report")).otherwise(F.lit("admin-api"))
    return F.when(F.col("broker_id").isNotNull(), F.coalesce(F.col(OBSERVED_BY), default))


def _report_value(name: str) -> Column:
    """A field's value in the lines the report reads (``checked_lines``), of its raw column."""
    return _observed_by() if name == OBSERVED_BY else _typed(name)


def _typed_column(name: str) -> str:
    """The working column of ``checked_lines`` that holds a timestamp field's ``_typed`` value."""
    return f"{name}__typed"


def _problem(name: str, typed: Column | None = None) -> Column:
    """Why the field fails its check (``schema.RULES`` and its kind), or null. ``typed``: the
    field's ``_typed`` value where the caller has it already (else the check casts again)."""
    value, rule_ = F.col(name), rule(name)
    present = (
        value.isNotNull() & ~F.is_variant_null(value) if free_text(name) else value.isNotNull()
    )
    checks: list[tuple[Column, str]] = []
    if rule_.required:
        checks.append((~present, MISSING))
    if name in TIMESTAMP_FIELDS:
        checks.append(
            (
                present
                & ~(
                    value.rlike(INSTANT_PATTERN)
                    & (_typed(name) if typed is None else typed).isNotNull()
                ),
                NOT_INSTANT,
            )
        )
    elif free_text(name):
        checks.append((present & (F.schema_of_variant(value) != F.lit("STRING")), NOT_TEXT))
    if rule_.allowed:
        checks.append((present & ~value.isin(*rule_.allowed), NOT_ALLOWED))
    if KINDS[name] == "double":
        checks.append(
            (present & (F.isnan(value) | (F.abs(value) == F.lit(float("inf")))), OUT_OF_RANGE)
        )
    if rule_.minimum is not None:
        checks.append(
            (
                present
                & ((value <= rule_.minimum) if rule_.above_minimum else (value < rule_.minimum)),
                OUT_OF_RANGE,
            )
        )
    if rule_.maximum is not None:
        checks.append((present & (value > rule_.maximum), OUT_OF_RANGE))
    return F.coalesce(
        *[F.when(failed, F.lit(f"{name}: {problem}")) for failed, problem in checks],
        F.lit(None).cast("string"),
    )


def _volume_incomplete() -> Column:
    """Whether a line gives one of broker_id and log_dir without the other (VOLUME_INCOMPLETE)."""
    broker, log_dir = (
        F.col(name).isNotNull()
        & (~F.is_variant_null(F.col(name)) if free_text(name) else F.lit(True))
        for name in VOLUME_FIELDS
    )
    return broker != log_dir


def skip_reason(raw: DataFrame) -> Column:
    """Why a line of ``raw`` (read with READ_SCHEMA) is skipped, or null when it is kept. A
    timestamp field's check reads its cast from ``raw`` where ``raw`` has it (``checked_lines``)."""
    casts = {
        name: F.col(_typed_column(name))
        for name in TIMESTAMP_FIELDS
        if _typed_column(name) in raw.columns
    }
    compact = []
    if ROW_KIND in raw.columns:  # format 2's own fields
        kind, count = F.col(ROW_KIND), F.col("volumes")
        compact = [
            F.when(kind.isNotNull() & ~kind.isin(*ROW_KINDS), F.lit(f"{ROW_KIND}: {NOT_ALLOWED}")),
            F.when((kind == ROUND) & count.isNull(), F.lit(f"volumes: {MISSING}")),
            F.when(count < 0, F.lit(f"volumes: {OUT_OF_RANGE}")),
        ]
    return F.coalesce(
        F.when(F.col(UNPARSED_LINE).isNotNull(), F.lit(UNREADABLE)),
        *compact,
        *[
            _problem(name, casts.get(name))
            for name in HISTORY_SCHEMA.fieldNames()
            if name in raw.columns
        ],
        F.when(_volume_incomplete(), F.lit(VOLUME_INCOMPLETE)),
    )


def checked_lines(raw: DataFrame, keep: tuple[str, ...] = ()) -> DataFrame:
    """Every line read, with the fields of REPORT_SCHEMA and SKIP_REASON (and the columns of
    ``raw`` named in ``keep``); a skipped line keeps no time (so ``valid()`` is false for it)
    and none of its values are used."""
    # Each timestamp is cast once, into a column of its own that its check and the line's value
    # both read: written in both, Spark would cast it twice (5-7% of this step's CPU).
    cast = raw.withColumns(
        {_typed_column(name): _typed(name) for name in TIMESTAMP_FIELDS if name in raw.columns}
    )
    with_reason = cast.withColumn(SKIP_REASON, skip_reason(cast))
    kept = F.col(SKIP_REASON).isNull()

    def value(name: str) -> Column:
        return F.col(_typed_column(name)) if name in TIMESTAMP_FIELDS else _report_value(name)

    columns = [
        (F.when(kept, value(name)) if name == "time" else value(name)).alias(name)
        for name in REPORT_SCHEMA.fieldNames()
    ]
    typed = with_reason.select(*columns, SKIP_REASON, *keep)
    assert typed.schema.fields[: len(REPORT_SCHEMA.fields)] == REPORT_SCHEMA.fields, typed.schema
    return typed


def skipped_by_reason(lines: DataFrame) -> dict[str, int]:
    """The skipped lines of ``History.lines``, counted by reason."""
    return most_first(lines.filter(F.col(SKIP_REASON).isNotNull()).groupBy(SKIP_REASON).count())


def most_first(counts: DataFrame) -> dict[str, int]:
    """Counts by SKIP_REASON (a ``count`` per reason), the most first."""
    rows = counts.collect()
    return {
        row[SKIP_REASON]: row["count"]
        for row in sorted(rows, key=lambda row: (-row["count"], row[SKIP_REASON]))
    }


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
    ).collect()[0]  # one row: a global aggregate
    return LineCounts(counts["valid"] or 0, counts["skipped"] or 0, counts["first"], counts["last"])


def epoch_seconds(column: str) -> Column:
    """A timestamp as seconds since the epoch, to the microsecond (collected values stay
    independent of the driver's time zone)."""
    return F.unix_micros(F.col(column)) / F.lit(1_000_000.0)
