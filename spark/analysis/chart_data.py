"""The few numbers the HTML charts need, reduced in Spark and collected to the driver.

Series are reduced to at most CHART_BUCKETS points per volume (the lowest usable bytes of
each time bucket, so a dip is never smoothed away) whatever the size of the history.

A history of more than CHART_BUCKETS cells (CELL_SECONDS each, from the epoch) is charted from
each file's cells (``partials.derive``: per volume and cell, the same minima, maxima, first and
last values a bucket takes of its rows), in buckets of whole cells: the buckets start on a cell
and are as many cells wide as it takes to cover the history in at most CHART_BUCKETS of them.
Such a bucket's figures are those of its rows, and the chart reads a few rows per volume and
cell instead of every row. A shorter history is charted from its rows, in CHART_BUCKETS buckets
from its first row to its last."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.analysis.brokers import judged
from spark.analysis.episodes import VOLUME, volume_rows
from spark.analysis.gaps import round_gap_limit
from spark.analysis.states import Round
from spark.reading.frames import in_order
from spark.reading.history import epoch_seconds
from spark.report import StateBucket, VolumeSeries

CHART_BUCKETS = 360
CLOSEST_VOLUMES = 4
CELL_SECONDS = 600
CELL = "cell"  # a row's cell: floor(epoch seconds / CELL_SECONDS)
_STATE_RANK = {"OPEN": 0, "THROTTLE": 1, "PAUSE": 2}


def _bytes_level(level: str) -> F.Column:
    return F.when(
        F.col("limit_kind") == "min-available-ratio", F.col(level) * F.col("total_bytes")
    ).otherwise(F.col(level))


def _bucket(first: float, last: float) -> F.Column:
    width = max((last - first) / CHART_BUCKETS, 1e-6)
    return F.least(
        F.floor((epoch_seconds("time") - F.lit(first)) / F.lit(width)), F.lit(CHART_BUCKETS - 1)
    )


@dataclass(frozen=True)
class CellBuckets:
    """Buckets of whole cells: the first starts with cell ``first_cell``, each is ``cells``
    cells wide."""

    first_cell: int
    cells: int

    def of(self, cell: F.Column) -> F.Column:
        """The bucket of the rows of a cell (an integer column)."""
        return F.least(
            F.floor((cell - F.lit(self.first_cell)) / F.lit(self.cells)), F.lit(CHART_BUCKETS - 1)
        )


def cell_buckets(first: float, last: float) -> CellBuckets | None:
    """The buckets of whole cells of a history from ``first`` to ``last`` (epoch seconds), none
    when it covers CHART_BUCKETS cells or fewer (its buckets would be narrower than a cell)."""
    if (last - first) / CHART_BUCKETS < CELL_SECONDS:
        return None
    first_cell, last_cell = math.floor(first / CELL_SECONDS), math.floor(last / CELL_SECONDS)
    return CellBuckets(first_cell, -(-(last_cell + 1 - first_cell) // CHART_BUCKETS))


def cell_of() -> F.Column:
    """A row's cell."""
    return F.floor(epoch_seconds("time") / F.lit(CELL_SECONDS))


_LEVELS = ("hard_limit", "soft_limit")


def series_points(rows: DataFrame, *keep: str) -> DataFrame:
    """Each judged data row as a part of a bucket (with its columns ``keep``): its time as the
    part's first and last, its bytes, and its limits in bytes as the first and last in force."""
    t = epoch_seconds("time")
    return rows.select(
        *keep,
        *VOLUME,
        F.col("time"),
        t.alias("t"),
        t.alias("t_last"),
        F.col("usable_bytes").alias("usable"),
        F.col("total_bytes").alias("total"),
        *[_bytes_level(level).alias(f"{level}_first") for level in _LEVELS],
        *[_bytes_level(level).alias(f"{level}_last") for level in _LEVELS],
    )


def combined_points(parts: DataFrame, *by: F.Column | str) -> DataFrame:
    """Parts (``series_points``, or what this made of them) combined by ``by``: the first and
    last time, the lowest usable bytes, the largest total, the limits of the first and last time."""
    return parts.groupBy(*by).agg(
        F.min("t").alias("t"),
        F.max("t_last").alias("t_last"),
        F.min("usable").alias("usable"),
        F.max("total").alias("total"),
        *[F.min_by(f"{level}_first", "t").alias(f"{level}_first") for level in _LEVELS],
        *[F.max_by(f"{level}_last", "t_last").alias(f"{level}_last") for level in _LEVELS],
    )


def chart_cells(rows: DataFrame, *by: str) -> DataFrame:
    """The cells of the judged ones of ``rows`` (a volume's rows), per ``by`` and volume."""
    return combined_points(
        series_points(rows.filter(judged()), *by).withColumn(CELL, cell_of()).drop("time"),
        *by,
        *VOLUME,
        CELL,
    )


def _steps(buckets: list, level: str) -> list[tuple[float, float | None]]:
    """The level in force over time, from each bucket's first and last values: a step at
    every change (a change inside a bucket shows at that bucket's last observation)."""
    steps: list[tuple[float, float | None]] = []
    for b in buckets:
        for t, value in ((b["t"], b[f"{level}_first"]), (b["t_last"], b[f"{level}_last"])):
            if not steps or steps[-1][1] != value:
                steps.append((t, value))
    return steps


def closest_volume_series(
    rows: DataFrame,
    cells: DataFrame,
    volumes: DataFrame,
    forecast: DataFrame,
    first: float,
    last: float,
    count: int = CLOSEST_VOLUMES,
) -> list[VolumeSeries]:
    """The volumes forecast to reach the hard limit soonest (``forecast``: ``fill_forecast``),
    then those whose available ratio came closest to (or furthest below) it (``volumes``:
    ``volume_summary(rows)``, whose headroom says how close). Their series come from ``cells``
    (``chart_cells`` of the same rows, per file) when the history is long enough for buckets of
    whole cells (``cell_buckets``), from the rows otherwise."""
    soonest = forecast.select(
        *VOLUME,
        "seconds_to_hard_limit",
        epoch_seconds("projected_at").alias("projected_t"),
        "hard_limit_bytes",
    )
    closest = (
        volumes.filter(F.col("headroom").isNotNull())
        .join(soonest, list(VOLUME), "left")
        .orderBy(F.col("seconds_to_hard_limit").asc_nulls_last(), "headroom", *VOLUME)
        .limit(count)
        .collect()
    )
    chosen = [(row["broker_id"], row["log_dir"]) for row in closest]
    if not chosen:
        return []
    one_of_chosen = reduce(
        operator.or_,
        [
            (F.col("broker_id") == broker_id) & (F.col("log_dir") == log_dir)
            for broker_id, log_dir in chosen
        ],
    )
    whole_cells = cell_buckets(first, last)
    if whole_cells is not None:
        parts, bucket = cells.filter(one_of_chosen), whole_cells.of(F.col(CELL))
    else:
        judged_rows = rows.transform(volume_rows).filter(one_of_chosen).filter(judged())
        parts, bucket = judged_rows.transform(series_points), _bucket(first, last)
    buckets = (
        combined_points(parts, *VOLUME, bucket.alias("bucket"))
        .transform(lambda buckets: in_order(buckets, *VOLUME, "bucket"))
        .collect()
    )
    series = []
    for row in closest:
        mine = [
            b
            for b in buckets
            if (b["broker_id"], b["log_dir"]) == (row["broker_id"], row["log_dir"])
        ]
        seconds = row["seconds_to_hard_limit"]
        projected = (
            (row["projected_t"], row["hard_limit_bytes"])
            if seconds is not None and seconds > 0
            else None
        )
        series.append(
            VolumeSeries(
                row["broker_id"],
                row["log_dir"],
                max(b["total"] for b in mine),
                _steps(mine, "hard_limit"),
                _steps(mine, "soft_limit"),
                [(b["t"], b["usable"]) for b in mine],
                projected,
            )
        )
    return series


def timeline(
    rounds: Sequence[Round], first: float, last: float, max_gap_seconds: float | None = None
) -> list[StateBucket]:
    """The worst state per time bucket of the rounds (``states.collected_rounds``); a bucket's
    colour reaches the next bucket with rounds unless the rounds are further apart than the gap
    limit (then the gap shows as no data). Worked out in the driver from the rounds collected,
    with the arithmetic of ``_bucket`` and ``gaps.gap_limit`` (doubles, as Spark's)."""
    width = max((last - first) / CHART_BUCKETS, 1e-6)
    found: dict[int, dict] = {}
    for r in rounds:
        t = r.t
        bucket = min(math.floor((t - first) / width), CHART_BUCKETS - 1)
        gap = round_gap_limit(r.check_interval_seconds, max_gap_seconds)
        rank = _STATE_RANK.get(r.state) if r.state is not None else None
        fallback = None if r.source is None else r.source in ("fallback", "last-valid")
        b = found.get(bucket)
        if b is None:
            found[bucket] = {
                "bucket": bucket,
                "rank": rank,
                "fallback": fallback,
                "rounds": 1,
                "first_t": t,
                "last_t": t,
                "gap_limit": gap,
            }
            continue
        b["rank"] = _greatest(b["rank"], rank)
        b["fallback"] = _greatest(b["fallback"], fallback)
        b["rounds"] += 1
        b["first_t"], b["last_t"] = min(b["first_t"], t), max(b["last_t"], t)
        b["gap_limit"] = _greatest(b["gap_limit"], gap)
    buckets = [found[bucket] for bucket in sorted(found)]
    names = {value: name for name, value in _STATE_RANK.items()}
    states = []
    for entry, following in zip(buckets, [*buckets[1:], None]):
        start = first + entry["bucket"] * width
        end = max(start + width, entry["last_t"]) if following is None else start + width
        if following is not None and following["first_t"] - entry["last_t"] <= entry["gap_limit"]:
            end = first + following["bucket"] * width
        states.append(
            StateBucket(
                start,
                min(end, last),
                names[entry["rank"]],
                bool(entry["fallback"]),
                entry["rounds"],
            )
        )
    return states


def _greatest(one, other):
    """Spark's ``max`` of two values, nulls left out."""
    if one is None:
        return other
    return one if other is None else max(one, other)
