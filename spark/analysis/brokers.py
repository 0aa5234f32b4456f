"""A summary per broker: what it had, how close it came, its episodes and its nearest forecast."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark.analysis.episodes import volume_rows
from spark.analysis.forecast import fitted_rows
from spark.analysis.gaps import HistoryEnd, gap_limit, still_present
from spark.reading.frames import in_order
from spark.reading.history import epoch_seconds, node_reported


def judged() -> Column:
    """A row whose volume reported its capacity and usable bytes, so its ratio means something."""
    return (F.col("total_bytes") > 0) & (F.col("usable_bytes") >= 0)


def headroom() -> Column:
    """How close the row came to (or how far below) its hard limit, as a ratio (of a judged row)."""
    hard_ratio = F.when(
        F.col("limit_kind") == "min-available-ratio", F.col("hard_limit")
    ).otherwise(F.col("hard_limit") / F.col("total_bytes"))
    return F.col("available_ratio") - hard_ratio


def volume_aggregates() -> list[Column]:
    """What the volume summary takes of a volume's rows, each a minimum, maximum or count (so
    that the summaries of parts of the rows add up: ``partials``)."""
    return [
        F.min("time").alias("first_seen"),
        F.max("time").alias("last_seen"),
        F.count(F.lit(1)).alias("observations"),
        F.sum(node_reported()).alias("node_report_observations"),
        F.min(F.when(F.col("usable_bytes") >= 0, F.col("usable_bytes"))).alias("min_usable_bytes"),
        F.min("available_ratio").alias("min_available_ratio"),
        F.min(F.when(judged(), headroom())).alias(
            "headroom"
        ),  # how close it came to (or how far below) its hard limit, as a ratio
        F.max(F.when(fitted_rows(), F.col("time"))).alias(
            "last_fitted"
        ),  # where the forecast's window ends
    ]


def volume_summary(rows: DataFrame, max_gap_seconds: float | None = None) -> DataFrame:
    """One row per volume, from one pass over every row (a hash aggregation): what the broker
    summary, the chart's choice of volumes, the episodes' volume numbers and the forecast's
    windows need. (The report makes it from each file's share: ``partials.volume_summary``.)"""
    return (
        rows.transform(volume_rows)
        .groupBy("broker_id", "log_dir")
        .agg(*volume_aggregates(), F.max(gap_limit(max_gap_seconds)).alias("gap_limit"))
    )


def _observed(volumes: DataFrame, end: HistoryEnd) -> DataFrame:
    per_broker = volumes.groupBy("broker_id").agg(
        F.count(F.lit(1)).cast("int").alias("log_dirs"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
        F.sum("observations").alias("observations"),
        F.sum("node_report_observations").alias("node_report_observations"),
        F.min("min_usable_bytes").alias("min_usable_bytes"),
        F.min("min_available_ratio").alias("min_available_ratio"),
        F.max("gap_limit").alias("gap_limit"),
    )
    present = still_present(epoch_seconds("last_seen"), end, F.col("gap_limit"))
    return per_broker.withColumn("present_at_end", present).drop("gap_limit")


def _episode_totals(episodes: DataFrame) -> DataFrame:
    def of(kind: str):
        return F.col("limit") == F.lit(kind)

    return episodes.groupBy("broker_id").agg(
        F.count(F.when(of("hard"), 1)).alias("hard_episodes"),
        F.count(F.when(of("soft"), 1)).alias("soft_episodes"),
        F.count(F.when(F.col("ongoing"), 1)).alias("ongoing_episodes"),
        F.coalesce(F.sum(F.when(of("hard"), F.col("duration_seconds"))), F.lit(0.0)).alias(
            "hard_breach_seconds"
        ),
        F.coalesce(F.sum(F.when(of("soft"), F.col("duration_seconds"))), F.lit(0.0)).alias(
            "soft_breach_seconds"
        ),
    )


def fenced_time(fenced_rounds: DataFrame, held: DataFrame) -> DataFrame:
    """Per broker that was fenced: ``fenced_seconds``, the time the decisions held a fenced
    broker's kept observation (a round counts until the next, as in the time in states).
    ``fenced_rounds``: (broker_id, time) of the rounds that kept a fenced broker's observation,
    once each (``partials.fenced_rounds``); ``held``: ``states.held_rounds(...)``."""
    seconds = held.select("time", (F.col("held_until") - F.col("t")).alias("seconds"))
    return (
        fenced_rounds.join(F.broadcast(seconds), "time")
        .groupBy("broker_id")
        .agg(F.sum("seconds").alias("fenced_seconds"))
    )


def _nearest_forecast(forecast: DataFrame) -> DataFrame:
    return forecast.groupBy("broker_id").agg(
        F.min("projected_at").alias("soonest_hard_limit_at"),
        F.max("fill_rate_bytes_per_second").alias("fastest_fill_rate_bytes_per_second"),
    )


def broker_summary(
    volumes: DataFrame,
    episodes: DataFrame,
    forecast: DataFrame,
    end: HistoryEnd,
    fenced: DataFrame | None = None,
) -> DataFrame:
    """``volumes``: ``volume_summary(rows, max_gap_seconds)``; ``fenced``: ``fenced_time(...)``."""
    zero_counts = dict.fromkeys(("hard_episodes", "soft_episodes", "ongoing_episodes"), 0)
    zero_seconds = dict.fromkeys(
        ("hard_breach_seconds", "soft_breach_seconds", "fenced_seconds"), 0.0
    )
    observed = _observed(volumes, end)
    if fenced is not None:
        observed = observed.join(fenced, "broker_id", "left")
    else:
        observed = observed.withColumn("fenced_seconds", F.lit(None).cast("double"))
    return (
        observed.join(_episode_totals(episodes), "broker_id", "left")
        .join(_nearest_forecast(forecast), "broker_id", "left")
        .fillna({**zero_counts, **zero_seconds})
        .transform(lambda brokers: in_order(brokers, "broker_id"))
    )
