"""Violation episodes per volume and limit kind (hard / soft).

A volume is in a hard episode while the service judged it breaching (the policy's verdict,
so hysteresis and log dir errors count as the service counted them), and in a soft episode
while it was ramping or breaching (at or below the soft level) when a soft limit was set.
An episode starts at its first observation in breach, and holds one limit setting (kind and
level). It ends:
- ``recovered``: at the first observation back within the limit (no gap before it);
- ``limit-changed``: at the first observation under other settings of that limit (a level
  changed, a soft limit removed); still in breach, a new episode starts there;
- ``unjudged``: at its last observation in breach, when the next one has no usable bytes;
- ``gap``: at its last observation in breach, when the next observation of the volume comes
  more than the gap limit later (a new episode starts after the gap if still in breach);
- ``volume-gone``: at its last observation in breach, when the volume is never observed
  again but rounds go on observing others (a broker that disappeared);
- ``back-with-room``: at the first observation back within the limit, when the last one in
  breach was kept (a fenced or silent broker's last observation, ``kept`` in the history): the
  broker answered again, with room;
- ``unregistered`` / ``expired``: at its last observation in breach, a kept one, when the
  volume then left the view: its broker was no longer registered (``unregistered``), or the
  observation outlived the validity duration (``expired``: a fenced broker's under the
  ``expire`` policy, a silent broker's);
- ``ongoing``: still in breach at the end of the history (``end`` is the last observation);
- ``unobserved``: ongoing too, in a history that ends in rounds that observed nothing: in
  breach at the last round that observed volumes, and not seen since.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.analysis.gaps import HistoryEnd, gap_limit, still_present
from spark.reading.history import epoch_seconds, node_reported

VOLUME = ("broker_id", "log_dir")
LIMIT_KINDS = ("hard", "soft")
END_REASONS = (
    "recovered", "limit-changed", "unjudged", "gap", "volume-gone", "unobserved", "ongoing", "back-with-room", "unregistered", "expired",
)  # fmt: skip
STILL_IN_BREACH = ("unobserved", "ongoing")
# Verdicts that judged the volume against its limits (unjudged: no usable bytes reported).
JUDGED = ("ok", "ramping", "breaching")
# The writer's limit kinds (app.decision.policy's LimitKind values). Text goes through the episode
# aggregation as its index here, so that Spark aggregates in a hash table instead of
# sorting every row in breach; a kind not listed would come out as null.
KNOWN_LIMIT_KINDS = ("min-available-bytes", "min-available-ratio")
# Why the service kept an observation from an earlier round (app.observation.model.KeptReason);
# a fresh observation has none (code 0), as has every row of a history written before them.
KEPT_REASONS = ("fenced", "missing", "unregistered", "last-valid")


def _code(column: str, values: tuple[str, ...]) -> Column:
    return _code_of(F.col(column), values)


def _code_of(text: Column, values: tuple[str, ...]) -> Column:
    """1-based index of the text in ``values`` (0 when not there)."""
    return F.array_position(F.array(*[F.lit(v) for v in values]), text).cast("int")


def _text(column: str, values: tuple[str, ...]) -> Column:
    return F.element_at(F.array(*[F.lit(v) for v in values]), F.nullif(F.col(column), F.lit(0)))


def volume_rows(rows: DataFrame) -> DataFrame:
    """Rows that describe a volume (not the rows of rounds that observed none)."""
    return rows.filter(F.col("broker_id").isNotNull() & F.col("log_dir").isNotNull())


# What a row's volume holds (``holds``): the data volumes DescribeLogDirs reports (and every
# row written before the field, and the rows without a volume), or a node's metadata log
# volume, judged by the metadata limits. Each kind has its own episodes: a combined node's
# shared volume has a row of each kind every round.
DATA = "data"


def data_rows(rows: DataFrame) -> DataFrame:
    """The rows of data volumes, and the rows without a volume: what every table but the
    metadata volumes' episodes is made of."""
    return rows.filter(F.col("holds").isNull() | (F.col("holds") == F.lit(DATA)))


def metadata_rows(rows: DataFrame) -> DataFrame:
    """The rows of the metadata log volumes the nodes report."""
    return rows.filter(F.col("holds").contains("metadata"))


# The sort by volume and time is by a number given to each volume: comparing two rows then
# compares two integers, not a broker id and a log dir's text. Only what the episodes need
# goes through that sort, each field as narrow as it can be: the verdict as a small number
# (0 when unjudged), from which the breach of each limit is derived after the sort.
_VOLUME_ID = "volume_id"
_STATUS = "status"
_JUDGED_CODES = {
    verdict: code for code, verdict in enumerate(JUDGED, start=1)
}  # ok 1, ramping 2, breaching 3
_LEVEL = {"hard": "hard_limit", "soft": "soft_limit"}
# Of the observations before and after each one, what the episodes compare with it.
_NEIGHBOURS = ("status", "limit_kind", "hard_limit", "soft_limit")
_KEPT = "kept"
_ERROR_T = "error_t"
ENFORCED = "enforced"

# The episodes read a volume's observations as segments: runs of consecutive observations
# alike in everything an episode's start and end depend on (STATE), with what the episodes
# aggregate of them (their first and last time, count, worst values, last log dir error).
# Within a segment no episode starts or ends: each observation's neighbours are alike and
# near, so the episodes of the segments are those of the observations (``segments``). A history
# swinging in and out of its limits has a few segments per swing instead of a row per round.
STATE = (
    "limit_kind",
    "hard_limit",
    "soft_limit",
    "volume_status",
    _KEPT,
    "check_interval_seconds",
    ENFORCED,
)
# A segment also ends where the next observation comes more than this many check intervals
# later (a missed round): so the gaps inside a segment stay below the gap limit of the default
# rule (GAP_INTERVALS, three). Only a --max-gap under this can count a gap inside a segment
# (its ``inner_gap_seconds``, the longest): such a volume is read row by row (``partials``).
JOIN_INTERVALS = 1.5
SEGMENT_FIELDS = (
    *VOLUME,
    *STATE,
    "time_first",
    "time_last",
    "observations",
    "node_report_observations",
    "worst_usable_bytes",
    "worst_available_ratio",
    "total_bytes",
    "error_time",
    "log_dir_error",
    "inner_gap_seconds",
)


def _state(rows: DataFrame) -> list[Column]:
    enforced = (
        F.coalesce(F.col(ENFORCED), F.lit(True)) if ENFORCED in rows.columns else F.lit(True)
    )  # missing: enforced
    return [*[F.col(name) for name in STATE if name != ENFORCED], enforced.alias(ENFORCED)]


def as_segments(rows: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """Every row a segment of its own (with the columns ``by``)."""
    return rows.transform(volume_rows).select(
        *by,
        *VOLUME,
        *_state(rows),
        F.col("time").alias("time_first"),
        F.col("time").alias("time_last"),
        F.lit(1).cast("long").alias("observations"),
        node_reported().cast("long").alias("node_report_observations"),
        F.when(F.col("usable_bytes") >= 0, F.col("usable_bytes")).alias("worst_usable_bytes"),
        F.col("available_ratio").alias("worst_available_ratio"),
        "total_bytes",
        F.when(F.col("log_dir_error").isNotNull(), F.col("time")).alias("error_time"),
        "log_dir_error",
        F.lit(None).cast("double").alias("inner_gap_seconds"),
    )


# How consecutive segments make one: of the rows, into segments; of the segments, into episodes.
_ROLL_UP = {
    "time_first": F.min,
    "time_last": F.max,
    "observations": F.sum,
    "node_report_observations": F.sum,
    "worst_usable_bytes": F.min,
    "worst_available_ratio": F.min,
    "total_bytes": F.max,
    "error_time": F.max,
}


def _rolled_up(*names: str) -> list[Column]:
    return [_ROLL_UP[name](name).alias(name) for name in names]


def segments(rows: DataFrame, by: tuple[str, ...]) -> DataFrame:
    """The rows (of volumes) as segments, per ``by`` (a file) and volume, with ``by``."""
    single = as_segments(rows, by)
    in_order = Window.partitionBy(*by, *VOLUME).orderBy("time_first")
    step = epoch_seconds("time_first") - F.lag(epoch_seconds("time_first")).over(in_order)
    alike = functools.reduce(
        Column.__and__, [F.lag(name).over(in_order).eqNullSafe(F.col(name)) for name in STATE]
    )
    joined = F.coalesce(
        alike & (step <= F.col("check_interval_seconds") * F.lit(JOIN_INTERVALS)), F.lit(False)
    )
    flagged = single.withColumns({"step": step, "joined": joined})
    numbered = flagged.withColumn(
        "segment",
        F.sum((~F.col("joined")).cast("int")).over(
            in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    )
    grouped = numbered.groupBy(*by, *VOLUME, "segment", *STATE).agg(
        *_rolled_up(*_ROLL_UP),
        F.max(F.when(F.col("joined"), F.col("step"))).alias("inner_gap_seconds"),
    )
    # The error's text looked up after: a text in the aggregation would make Spark sort the rows.
    errors = (
        single.filter(F.col("log_dir_error").isNotNull())
        .groupBy(*by, *VOLUME, "error_time")
        .agg(F.max("log_dir_error").alias("log_dir_error"))
    )
    return grouped.join(errors, [*by, *VOLUME, "error_time"], "left").select(*by, *SEGMENT_FIELDS)


def segment_starts(of: DataFrame) -> DataFrame:
    """(volume, time, enforced) of the segments' first observations: where an episode can start."""
    return of.select(*VOLUME, F.col("time_first").alias("time"), ENFORCED)


def _with_status(max_gap_seconds: float | None):
    def step(segments: DataFrame) -> DataFrame:
        return segments.select(
            _VOLUME_ID,
            "time_first",
            "time_last",
            "hard_limit",
            "soft_limit",
            "observations",
            "node_report_observations",
            "worst_usable_bytes",
            "worst_available_ratio",
            "total_bytes",
            "log_dir_error",
            _code("limit_kind", KNOWN_LIMIT_KINDS).alias("limit_kind"),
            epoch_seconds("time_first").alias("t"),
            epoch_seconds("time_last").alias("t_last"),
            epoch_seconds("error_time").alias(_ERROR_T),
            gap_limit(max_gap_seconds).alias("gap_limit"),
            F.coalesce(_code("volume_status", JUDGED), F.lit(0)).alias(_STATUS),
            F.coalesce(_code(_KEPT, KEPT_REASONS), F.lit(0)).alias(_KEPT),
        )

    return step


def _in_breach(kind: str, of: str = "") -> Column:
    """Whether the observation (this one, or its neighbour ``of`` "prev_" / "next_") is in
    breach of the ``kind`` limit: breaching for the hard one; ramping or breaching, with a soft
    limit set, for the soft one."""
    status = F.col(f"{of}{_STATUS}")
    if kind == "hard":
        return status == F.lit(_JUDGED_CODES["breaching"])
    return F.col(f"{of}soft_limit").isNotNull() & (status >= F.lit(_JUDGED_CODES["ramping"]))


def _same_settings(kind: str, of: str) -> Column:
    """Whether the neighbour ``of`` ("prev_" / "next_") has this observation's settings of the
    ``kind`` limit: its kind and level."""
    return F.col(f"{of}limit_kind").eqNullSafe(F.col("limit_kind")) & F.col(
        f"{of}{_LEVEL[kind]}"
    ).eqNullSafe(F.col(_LEVEL[kind]))


def _in_same_episode(kind: str, of: str) -> Column:
    """The neighbour is in breach of the same settings of the limit (gaps aside)."""
    return F.coalesce(_in_breach(kind, of) & _same_settings(kind, of), F.lit(False))


def _with_neighbours(rows: DataFrame) -> DataFrame:
    """Each segment with the segments before and after it, as far as the episodes need them;
    the breaches are derived from these after the sort, so they do not widen what is sorted.
    ``prev_t``: the last observation before the segment; ``next_t``: the first after it."""
    by_volume = Window.partitionBy(_VOLUME_ID).orderBy("t")
    return rows.withColumns(
        {
            "prev_t": F.lag("t_last").over(by_volume),
            "next_t": F.lead("t").over(by_volume),
            "next_time": F.lead("time_first").over(by_volume),
            **{f"prev_{name}": F.lag(name).over(by_volume) for name in _NEIGHBOURS},
            **{f"next_{name}": F.lead(name).over(by_volume) for name in _NEIGHBOURS},
        }
    )


def _gap_follows() -> Column:
    """The next observation comes more than the gap limit after the segment's last."""
    return (F.col("next_t") - F.col("t_last")) > F.col("gap_limit")


def _with_episode_numbers(rows: DataFrame) -> DataFrame:
    """Rows in breach only, numbered by episode. The neighbours are known by now, so the rows
    outside every episode can go before the running count (it counts starts, which are rows
    in breach); the rows stay in the window's order, so nothing is sorted again."""
    running = (
        Window.partitionBy(_VOLUME_ID)
        .orderBy("t")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    after_gap = F.coalesce((F.col("t") - F.col("prev_t")) > F.col("gap_limit"), F.lit(False))
    flags, numbers = {}, {}
    for kind in LIMIT_KINDS:
        inside = F.col(f"in_{kind}")
        flags[f"start_{kind}"] = inside & (~_in_same_episode(kind, "prev_") | after_gap)
        flags[f"last_{kind}"] = inside & (
            F.col("next_t").isNull() | _gap_follows() | ~_in_same_episode(kind, "next_")
        )
        numbers[f"episode_{kind}"] = F.sum(F.col(f"start_{kind}").cast("int")).over(running)
    in_either = {f"in_{kind}": _in_breach(kind) for kind in LIMIT_KINDS}
    return (
        rows.withColumns(in_either)
        .withColumns(flags)
        .filter(F.col("in_hard") | F.col("in_soft"))
        .withColumns(numbers)
    )


def _kept_left_view() -> Column:
    """Why a kept observation, the last of its volume before the volume left the view, left it."""
    unregistered = F.col(_KEPT) == F.lit(KEPT_REASONS.index("unregistered") + 1)
    return F.when(unregistered, F.lit("unregistered")).otherwise(F.lit("expired"))


def _end_reason(kind: str, end: HistoryEnd) -> Column:
    """Why an episode of ``kind`` whose last observation is this row ends (its code)."""
    at_the_end = still_present(F.col("t_last"), end, F.col("gap_limit"))
    kept = F.col(_KEPT) > F.lit(0)
    gap_follows = _gap_follows()
    reason = (
        F.when(
            F.col("next_t").isNull() & at_the_end,
            F.lit("unobserved" if end.unobserved else "ongoing"),
        )
        .when(kept & (F.col("next_t").isNull() | gap_follows), _kept_left_view())
        .when(F.col("next_t").isNull(), F.lit("volume-gone"))
        .when(gap_follows, F.lit("gap"))
        .when(~_same_settings(kind, "next_"), F.lit("limit-changed"))
        .when(F.col(f"next_{_STATUS}") == F.lit(0), F.lit("unjudged"))
        .when(kept, F.lit("back-with-room"))
        .otherwise(F.lit("recovered"))
    )
    return _code_of(reason, END_REASONS)


# Episodes that end at the next observation (the first outside them); the others end at their
# last observation in breach.
_ENDS_AT_NEXT = [
    END_REASONS.index(reason) + 1 for reason in ("recovered", "limit-changed", "back-with-room")
]


def _one_row_per_kind(end: HistoryEnd):
    def step(rows: DataFrame) -> DataFrame:
        kinds = []
        for kind in LIMIT_KINDS:
            kinds.append(
                F.struct(
                    F.lit(kind).alias("limit"),
                    F.col(f"in_{kind}").alias("inside"),
                    F.col(f"episode_{kind}").alias("episode"),
                    F.col(f"last_{kind}").alias("last"),
                    F.col(_LEVEL[kind]).alias("level"),
                    _end_reason(kind, end).alias("end_reason"),
                )
            )
        return rows.withColumn("kind", F.explode(F.filter(F.array(*kinds), lambda k: k["inside"])))

    return step


_EPISODE_COLUMNS = (
    "limit",
    "limit_kind",
    "level",
    "start",
    "end",
    "duration_seconds",
    "ongoing",
    "end_reason",
    "worst_usable_bytes",
    "worst_available_ratio",
    "total_bytes",
    "observations",
    "node_report_observations",
    "log_dir_error",
)


def _episodes(rows: DataFrame) -> DataFrame:
    last = F.col("kind.last")
    grouped = rows.groupBy(
        _VOLUME_ID, F.col("kind.limit").alias("limit"), F.col("kind.episode").alias("episode")
    ).agg(
        F.min_by("limit_kind", "t").alias("limit_kind"),  # as at the start
        F.min_by("kind.level", "t").alias("level"),
        F.min("time_first").alias("start"),
        # The end time from the reason, once per segment: the reason is evaluated once, in the struct.
        F.max(
            F.when(
                last,
                F.when(F.col("kind.end_reason").isin(*_ENDS_AT_NEXT), F.col("next_time")).otherwise(
                    F.col("time_last")
                ),
            )
        ).alias("end"),
        F.max(F.when(last, F.col("kind.end_reason"))).alias("end_reason"),
        *_rolled_up(
            "worst_usable_bytes",
            "worst_available_ratio",
            "total_bytes",
            "observations",
            "node_report_observations",
        ),
        # When the last log dir error of the episode was observed: its text is looked up after
        # (a text in the aggregation would make Spark sort the segments in breach instead of
        # aggregating them in a hash table).
        F.max(_ERROR_T).alias(_ERROR_T),
    )
    return grouped.select(
        _VOLUME_ID,
        "limit",
        _text("limit_kind", KNOWN_LIMIT_KINDS).alias("limit_kind"),
        "level",
        "start",
        "end",
        (epoch_seconds("end") - epoch_seconds("start")).alias("duration_seconds"),
        F.col("end_reason")
        .isin(*[END_REASONS.index(reason) + 1 for reason in STILL_IN_BREACH])
        .alias("ongoing"),
        _text("end_reason", END_REASONS).alias("end_reason"),
        "worst_usable_bytes",
        "worst_available_ratio",
        "total_bytes",
        "observations",
        "node_report_observations",
        _ERROR_T,
    )


def _errors(rows: DataFrame) -> DataFrame:
    """The log dir errors of the segments (``_with_status``), by volume and time: what an
    episode's ``_ERROR_T`` names."""
    with_error = rows.filter(F.col("log_dir_error").isNotNull())
    return with_error.groupBy(_VOLUME_ID, _ERROR_T).agg(
        F.max("log_dir_error").alias("log_dir_error")
    )


def _volume_ids(volumes: DataFrame) -> DataFrame:
    """(volume_id, broker_id, log_dir) of every volume, numbered in Spark from the volume
    summary (a few hundred rows, so one partition is fine): no rows go through Python, which
    would start a Python worker only for this."""
    in_order = Window.orderBy(*VOLUME)
    return volumes.select(
        (F.row_number().over(in_order) - 1).cast("int").alias(_VOLUME_ID), *VOLUME
    )


def violation_episodes(
    rows: DataFrame, volumes: DataFrame, end: HistoryEnd, max_gap_seconds: float | None = None
) -> DataFrame:
    """One row per episode, ordered by volume, limit kind and start. ``volumes``: one row per
    volume (``broker_id``, ``log_dir``), e.g. ``brokers.volume_summary(rows)``."""
    return segment_episodes(as_segments(rows), volumes, end, max_gap_seconds)


def segment_episodes(
    of: DataFrame, volumes: DataFrame, end: HistoryEnd, max_gap_seconds: float | None = None
) -> DataFrame:
    """``violation_episodes`` of the rows the segments ``of`` stand for (SEGMENT_FIELDS; none
    with an ``inner_gap_seconds`` over the gap limit)."""
    ids = F.broadcast(_volume_ids(volumes))
    statused = of.join(ids, list(VOLUME)).transform(_with_status(max_gap_seconds))
    return (
        statused.transform(_with_neighbours)
        .transform(_with_episode_numbers)
        .transform(_one_row_per_kind(end))
        .transform(_episodes)
        .join(_errors(statused), [_VOLUME_ID, _ERROR_T], "left")
        .join(ids, _VOLUME_ID)
        .select(*VOLUME, *_EPISODE_COLUMNS)
        # Not orderBy: its range partitioning samples its input first, and no shuffle stands
        # between the episodes and the sort by volume and time (the aggregation reuses the
        # window's partitioning), so the sampling would run that sort and both windows over
        # every row a second time. The episodes are few: one partition, sorted in place.
        .repartition(1)
        .sortWithinPartitions(*VOLUME, "limit", "start")
    )
