"""The few numbers the HTML charts need, reduced in Spark and collected to the driver.

Series are reduced to at most CHART_BUCKETS points per volume (the lowest usable bytes of
each time bucket, so a dip is never smoothed away) whatever the size of the history."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
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
    volumes: DataFrame,
    forecast: DataFrame,
    first: float,
    last: float,
    count: int = CLOSEST_VOLUMES,
) -> list[VolumeSeries]:
    """The volumes forecast to reach the hard limit soonest (``forecast``: ``fill_forecast``),
    then those whose available ratio came closest to (or furthest below) it (``volumes``:
    ``volume_summary(rows)``, whose headroom says how close)."""
    judged_rows = rows.transform(volume_rows).filter(judged())
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
    selected = judged_rows.filter(one_of_chosen)
    buckets = (
        selected.groupBy(*VOLUME, _bucket(first, last).alias("bucket"))
        .agg(
            F.min(epoch_seconds("time")).alias("t"),
            F.max(epoch_seconds("time")).alias("t_last"),
            F.min("usable_bytes").alias("usable"),
            F.max("total_bytes").alias("total"),
            *[
                F.min_by(_bytes_level(level), "time").alias(f"{level}_first")
                for level in ("hard_limit", "soft_limit")
            ],
            *[
                F.max_by(_bytes_level(level), "time").alias(f"{level}_last")
                for level in ("hard_limit", "soft_limit")
            ],
        )
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
