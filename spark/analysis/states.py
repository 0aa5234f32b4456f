"""Time spent in each state (OPEN / THROTTLE / PAUSE) and on each factor source, per UTC day.

The state and source a round published hold until the next round, when that round comes
within the gap limit; otherwise (the service was down, or this is the last round) nothing
after the round is counted. Intervals that cross midnight are split at midnight."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.analysis.gaps import gap_limit, round_gap_limit
from spark.reading.frames import in_order
from spark.reading.history import epoch_seconds, valid

SECONDS_PER_DAY = 86400.0
STATES = ("OPEN", "THROTTLE", "PAUSE")
SOURCES = ("observed", "last-valid", "fallback", "initial")


def decisions(lines: DataFrame, by: tuple[str, ...] = ()) -> DataFrame:
    """Every line read (``History.lines``, valid or not) grouped by time, state and source,
    with the number of lines: about one row per round, from which the rounds come and the
    lines are counted (``reading.line_counts``).

    Grouped by the text columns here, in a hash table (Spark aggregates a text value in a
    sort, not in a hash table), so that ``rounds`` aggregates text over few rows. ``by``: more
    columns to group by (a file's: ``partials.derive``)."""
    return lines.groupBy(*by, "time", "state", "source").agg(
        F.count(F.lit(1)).alias("lines"),
        F.max("check_interval_seconds").alias("check_interval_seconds"),
        F.max("round_complete").alias("round_complete"),
        F.count(F.when(blames(), 1)).alias("blamed_volumes"),
        F.count(F.when(F.col("volume_status") == F.lit("breaching"), 1)).alias("breaching_volumes"),
    )


def rounds(decisions: DataFrame) -> DataFrame:
    """One row per observation round (every row of a round carries the same time and
    decision), from ``decisions(history.lines)``; the groups of invalid lines are left out."""
    return (
        decisions.filter(valid())
        .groupBy("time")
        .agg(
            F.max("state").alias("state"),
            F.max("source").alias("source"),
            F.max("check_interval_seconds").alias("check_interval_seconds"),
            F.max("round_complete").alias("round_complete"),
            F.sum("blamed_volumes").alias("blamed_volumes"),
            F.sum("breaching_volumes").alias("breaching_volumes"),
        )
    )


def blames(of: str = "volume_status") -> Column:
    """A row whose volume the round's decision blamed, and so whose episode is open in that
    round: breaching (a hard episode), or ramping with a soft limit set (a soft one)."""
    status = F.col(of)
    return (status == F.lit("breaching")) | (
        (status == F.lit("ramping")) & F.col("soft_limit").isNotNull()
    )


# A round in THROTTLE or PAUSE is limited by its volumes when its factor is their own or the
# last valid one; the fallback's factor (and the start-up grace) stands for no volume.
VOLUME_SOURCES = ("observed", "last-valid")


def unexplained_rounds(round_rows: DataFrame) -> DataFrame:
    """The rounds (``rounds(...)``) in THROTTLE or PAUSE on a factor of the volumes that no
    open episode explains: a PAUSE without a volume in hard breach, a THROTTLE without one in
    breach of either limit. Every history the service writes has none; a history written
    before rows carried kept observations may."""

    def none(column: str) -> Column:
        return F.coalesce(F.col(column), F.lit(0)) == 0

    on_volumes = F.col("source").isin(*VOLUME_SOURCES)
    paused, throttled = F.col("state") == F.lit("PAUSE"), F.col("state") == F.lit("THROTTLE")
    unexplained = on_volumes & (
        (paused & none("breaching_volumes")) | (throttled & none("blamed_volumes"))
    )
    return round_rows.filter(unexplained).select("time", "state", "source")


@dataclass(frozen=True)
class Round:
    """A round of ``rounds(...)`` as collected: its time in microseconds since the epoch."""

    micros: int
    state: str | None
    source: str | None
    check_interval_seconds: float | None
    blamed_volumes: int | None
    breaching_volumes: int | None
    round_complete: bool | None = None

    @property
    def t(self) -> float:
        """Epoch seconds, as ``reading.epoch_seconds`` gives them."""
        return self.micros / 1_000_000.0


def collected_rounds(round_rows: DataFrame) -> list[Round]:
    """The rounds (``rounds(...)``), collected once (a row per round), in time order: the
    timeline and the unexplained rounds are worked out from them without a query each."""
    columns = (
        F.unix_micros("time"),
        "state",
        "source",
        "check_interval_seconds",
        "blamed_volumes",
        "breaching_volumes",
        "round_complete",
    )
    return sorted(
        (Round(*row) for row in round_rows.select(*columns).collect()), key=lambda r: r.micros
    )


def unexplained(collected: Sequence[Round]) -> list[Round]:
    """``unexplained_rounds`` of the rounds collected, in time order."""

    def none(count: int | None) -> bool:
        return (count or 0) == 0

    return [
        r
        for r in collected
        if r.source in VOLUME_SOURCES
        and (
            (r.state == "PAUSE" and none(r.breaching_volumes))
            or (r.state == "THROTTLE" and none(r.blamed_volumes))
        )
    ]


def round_blame(rows: DataFrame) -> DataFrame:
    """Per round: its state and the volumes it blamed, as /throttle-factor listed them live
    (``breaching`` and ``ramping``, each a sorted array of (broker_id, log_dir))."""

    def listed(status: str) -> Column:
        volume = F.when(F.col("volume_status") == F.lit(status), F.struct("broker_id", "log_dir"))
        return F.array_sort(F.collect_list(volume)).alias(status)

    return rows.groupBy("time").agg(
        F.max("state").alias("state"), listed("breaching"), listed("ramping")
    )


def _with_held_until(max_gap_seconds: float | None):
    def step(round_rows: DataFrame) -> DataFrame:
        in_order = Window.orderBy("t")  # rounds are few next to rows: one partition is fine
        with_next = round_rows.withColumns(
            {"t": epoch_seconds("time"), "gap_limit": gap_limit(max_gap_seconds)}
        ).withColumn("next_t", F.lead("t").over(in_order))
        held = F.when(
            (F.col("next_t") - F.col("t")) <= F.col("gap_limit"), F.col("next_t")
        ).otherwise(F.col("t"))
        return with_next.withColumn("held_until", held)

    return step


def _split_at_midnight(round_rows: DataFrame) -> DataFrame:
    last_day = F.to_date(F.timestamp_micros((F.col("held_until") * 1_000_000).cast("long")))
    days = round_rows.withColumn("day", F.explode(F.sequence(F.to_date("time"), last_day)))
    day_start = F.unix_micros(F.col("day").cast("timestamp")) / F.lit(1_000_000.0)
    piece = F.least(F.col("held_until"), day_start + F.lit(SECONDS_PER_DAY)) - F.greatest(
        F.col("t"), day_start
    )
    return days.withColumns(
        {
            "seconds": F.greatest(piece, F.lit(0.0)),
            "round_starts_here": F.to_date("time") == F.col("day"),
        }
    )


def source_column(source: str) -> str:
    return f"source_{source.replace('-', '_')}_seconds"


def _per_day(pieces: DataFrame) -> DataFrame:
    def seconds_where(condition):
        return F.coalesce(F.sum(F.when(condition, F.col("seconds"))), F.lit(0.0))

    aggregates = [
        F.count(F.when(F.col("round_starts_here"), 1)).alias("rounds"),
        F.count(F.when(F.col("round_starts_here") & ~F.col("round_complete"), 1)).alias(
            "incomplete_rounds"
        ),
        F.sum("seconds").alias("covered_seconds"),
        *[
            seconds_where(F.col("state") == state).alias(f"{state.lower()}_seconds")
            for state in STATES
        ],
        *[
            seconds_where(F.col("source") == source).alias(source_column(source))
            for source in SOURCES
        ],
    ]
    return in_order(pieces.groupBy("day").agg(*aggregates), "day")


def held_rounds(round_rows: DataFrame, max_gap_seconds: float | None = None) -> DataFrame:
    """The rounds with ``t`` and ``held_until`` (epoch seconds): how long each round's decision
    held, by the rule of the time in states."""
    return round_rows.transform(_with_held_until(max_gap_seconds))


def time_in_states(round_rows: DataFrame, max_gap_seconds: float | None = None) -> DataFrame:
    """Per day, from the rounds (``rounds(decisions(lines))``): rounds, seconds covered by observations,
    seconds in OPEN / THROTTLE / PAUSE and per source."""
    return (
        round_rows.transform(_with_held_until(max_gap_seconds))
        .transform(_split_at_midnight)
        .transform(_per_day)
    )


_MICROS_PER_DAY = 86_400_000_000


def collected_time_in_states(
    collected: Sequence[Round], max_gap_seconds: float | None = None
) -> list[tuple]:
    """``time_in_states`` of the rounds collected (``collected_rounds``, in time order), worked
    out in the driver with Spark's arithmetic: doubles, each day's sums added in time order (as
    Spark's aggregate adds them: the rounds come to it in one partition, sorted by the window
    that finds each round's next). A row per day, in the table's column order."""
    days: dict[int, dict] = {}
    for r, following in zip(collected, [*collected[1:], None]):
        t = r.t
        gap = round_gap_limit(r.check_interval_seconds, max_gap_seconds)
        next_t = None if following is None else following.t
        held = next_t if next_t is not None and gap is not None and next_t - t <= gap else t
        first_day = r.micros // _MICROS_PER_DAY
        last_day = int(held * 1_000_000) // _MICROS_PER_DAY
        for day in range(first_day, last_day + 1):
            day_start = (day * _MICROS_PER_DAY) / 1_000_000.0
            seconds = max(min(held, day_start + SECONDS_PER_DAY) - max(t, day_start), 0.0)
            d = days.get(day)
            if d is None:
                d = days[day] = {"rounds": 0, "incomplete": 0, "covered": None, "by": {}}
            if day == first_day:
                d["rounds"] += 1
                if r.round_complete is False:
                    d["incomplete"] += 1
            d["covered"] = (0.0 if d["covered"] is None else d["covered"]) + seconds
            for key in (("state", r.state), ("source", r.source)):
                d["by"][key] = d["by"].get(key, 0.0) + seconds
    epoch = date(1970, 1, 1)
    return [
        (
            epoch + timedelta(days=day),
            d["rounds"],
            d["incomplete"],
            d["covered"],
            *[d["by"].get(("state", state), 0.0) for state in STATES],
            *[d["by"].get(("source", source), 0.0) for source in SOURCES],
        )
        for day, d in sorted(days.items())
    ]
