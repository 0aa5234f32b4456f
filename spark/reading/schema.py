"""What a history line must hold to be read: every field's JSON type and allowed values,
declared once, from the field list the writer uses (``app.history.schema.HISTORY_FIELDS``).

A field the writer declares is checked by its kind without more ado (a "timestamp" must be a
full ISO-8601 instant with a zone, a number finite, a text a JSON string); ``RULES`` adds what
else a field must hold (required, allowed values, a range). A field added to the writer's list
is thus checked by its kind as soon as it is declared; give it a rule here when it has allowed
values. Fields a line holds that the list does not declare are stepped over, unread."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import types as T

from app.decision.policy import FACTOR_RULES
from app.history.schema import COMPACT_FIELDS, GONE, HISTORY_FIELDS, ROUND, VOLUME


@dataclass(frozen=True)
class Rule:
    required: bool = False
    allowed: tuple[str, ...] = ()  # the values a text may take; empty: any text
    minimum: float | None = None  # numbers: the least value allowed
    maximum: float | None = None
    above_minimum: bool = False  # numbers: the minimum itself is not allowed


RULES: dict[str, Rule] = {
    "time": Rule(required=True),
    "broker_id": Rule(minimum=0),
    "total_bytes": Rule(minimum=-1),  # -1: not reported
    "usable_bytes": Rule(minimum=-1),
    "available_ratio": Rule(minimum=0),
    "limit_kind": Rule(allowed=("min-available-bytes", "min-available-ratio")),
    "hard_limit": Rule(minimum=0),
    "soft_limit": Rule(minimum=0),
    "volume_status": Rule(allowed=("ok", "ramping", "breaching", "unjudged")),
    "volume_factor": Rule(minimum=0, maximum=1),
    "cluster_factor": Rule(minimum=0, maximum=1),
    "state": Rule(required=True, allowed=("OPEN", "THROTTLE", "PAUSE")),
    "source": Rule(required=True, allowed=("observed", "last-valid", "fallback", "initial")),
    "check_interval_seconds": Rule(required=True, minimum=0, above_minimum=True),
    "seconds_to_hard_limit": Rule(minimum=0),
    "volume_rule": Rule(allowed=FACTOR_RULES),
    "rule": Rule(allowed=FACTOR_RULES),
    "holds": Rule(allowed=("data", "metadata", "data,metadata")),
    # app.observation.model.KeptReason's values (a test holds them equal)
    "kept": Rule(allowed=("fenced", "missing", "unregistered", "last-valid")),
    "mutation_factor": Rule(minimum=0, maximum=1),
    # app.observation.model's ADMIN_API and NODE_REPORT
    "observed_by": Rule(allowed=("admin-api", "node-report")),
}
# A volume is named by both; a row of a round that observed no volume has neither.
VOLUME_FIELDS = ("broker_id", "log_dir")

# A full instant: date, time to the second (fractions to the microsecond) and a zone, which
# Spark's cast to timestamp and Python's datetime.fromisoformat read alike; the cast then
# rejects what is not on the calendar (2026-02-30, 25:00).
INSTANT_PATTERN = (
    r"^(19[7-9]\d|2\d{3})-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-](0\d|1[0-7]):[0-5]\d)$"
)

# Why a line was skipped: UNREADABLE when it is not a JSON object or a number or boolean
# field holds a value of another JSON type (Spark's reader refuses the line whole), else the
# first field, in the declared order, that fails its check ("<field>: <problem>").
UNREADABLE = "unreadable"
MISSING, NOT_TEXT, NOT_INSTANT, NOT_ALLOWED, OUT_OF_RANGE = (
    "missing",
    "not text",
    "not an instant",
    "not allowed",
    "out of range",
)
VOLUME_INCOMPLETE = "volume: broker_id and log_dir not both given"

_SPARK_TYPES = {
    "timestamp": T.TimestampType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
}
KINDS = {field.name: field.kind for field in HISTORY_FIELDS}

HISTORY_SCHEMA = T.StructType(
    [T.StructField(field.name, _SPARK_TYPES[field.kind], nullable=True) for field in HISTORY_FIELDS]
)

# The fields the report uses and keeps after the checks (the others are checked, then dropped).
UNUSED_FIELDS = frozenset(
    {
        "volume_factor",
        "cluster_factor",
        "fill_rate_bytes_per_second",
        "seconds_to_hard_limit",
        "volume_rule",
        "rule",
    }
)
REPORT_SCHEMA = T.StructType([f for f in HISTORY_SCHEMA.fields if f.name not in UNUSED_FIELDS])


def rule(name: str) -> Rule:
    return RULES.get(name, Rule())


def free_text(name: str) -> bool:
    """A text field with no list of allowed values: read as a variant, so that a number or an
    array there is told apart from a text (Spark's reader turns any JSON value into text)."""
    return KINDS[name] == "string" and not rule(name).allowed


# Format 2's own fields (app/history/compact.py): what kind of row a line is, and a round row's
# count of volumes and its marks. Checked in ``history.skip_reason``, used to expand the rows.
ROW_KINDS = (ROUND, VOLUME, GONE)
COMPACT_SCHEMA = T.StructType(
    [T.StructField(f.name, _SPARK_TYPES[f.kind], nullable=True) for f in COMPACT_FIELDS]
)

# Where the JSON reader puts a line it could not convert whole: one that does not parse, or
# whose numbers and booleans do not fit the declared types ("broker_id":"x").
UNPARSED_LINE = "unparsed_line"
# What the JSON reader asks for: timestamps as text (checked against INSTANT_PATTERN, then
# cast), free texts as variants (their JSON type checked), the rest as declared; then format 2's
# own fields.
READ_SCHEMA = T.StructType(
    [
        *[
            T.StructField(
                f.name,
                T.StringType()
                if isinstance(f.dataType, T.TimestampType)
                else T.VariantType()
                if free_text(f.name)
                else f.dataType,
                nullable=True,
            )
            for f in HISTORY_SCHEMA.fields
        ],
        *COMPACT_SCHEMA.fields,
        T.StructField(UNPARSED_LINE, T.StringType(), nullable=True),
    ]
)
TIMESTAMP_FIELDS = tuple(
    f.name for f in HISTORY_SCHEMA.fields if isinstance(f.dataType, T.TimestampType)
)


def skip_reasons() -> tuple[str, ...]:
    """Every reason the reader can give for skipping a line (docs/history-and-report.md lists
    each; a test holds the list and this equal)."""
    reasons = [UNREADABLE]
    for f in HISTORY_FIELDS:
        rule_ = rule(f.name)
        if rule_.required:
            reasons.append(f"{f.name}: {MISSING}")
        if f.kind == "timestamp":
            reasons.append(f"{f.name}: {NOT_INSTANT}")
        elif free_text(f.name):
            reasons.append(f"{f.name}: {NOT_TEXT}")
        if rule_.allowed:
            reasons.append(f"{f.name}: {NOT_ALLOWED}")
        if f.kind == "double" or rule_.minimum is not None or rule_.maximum is not None:
            reasons.append(f"{f.name}: {OUT_OF_RANGE}")
    reasons += [
        f"row: {NOT_ALLOWED}",
        f"volumes: {MISSING}",
        f"volumes: {OUT_OF_RANGE}",
        VOLUME_INCOMPLETE,
    ]
    return tuple(reasons)
