"""Fill rate and projected time to the hard limit, per volume.

Window: the volume's observations in the last FORECAST_WINDOW_SECONDS (1 h) before its own
last observation. Fill rate = minus the least-squares slope of usable bytes over time in
that window (bytes/s; positive while the volume fills). Time to the hard limit =
(usable - hard limit in bytes) / fill rate from the last observation, when the volume fills;
0 when it is already at or below the limit; none when it is not filling or the window
holds fewer than two observations. A ratio limit is turned into bytes with the volume's
total bytes."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark.episodes import VOLUME, volume_rows
from spark.reading import epoch_seconds

FORECAST_WINDOW_SECONDS = 3600.0


def fitted_rows() -> Column:
    """The rows the fill rate is fitted on: the volume reported its capacity and usable bytes
    and no log dir error."""
    return (F.col("usable_bytes") >= 0) & (F.col("total_bytes") >= 0) & F.col("log_dir_error").isNull()


def _in_window(volumes: DataFrame, window_seconds: float):
    def step(rows: DataFrame) -> DataFrame:
        last_seen = volumes.select(*VOLUME, epoch_seconds("last_fitted").alias("last_t"))
        with_t = rows.withColumn("t", epoch_seconds("time"))
        return with_t.join(F.broadcast(last_seen), list(VOLUME)).filter(F.col("t") >= F.col("last_t") - F.lit(window_seconds))

    return step


def _fitted(rows: DataFrame) -> DataFrame:
    # Time relative to the last observation keeps the regression well conditioned.
    x = F.col("t") - F.col("last_t")
    y = F.col("usable_bytes").cast("double")
    latest = F.max_by(F.struct("time", "usable_bytes", "total_bytes", "limit_kind", "hard_limit"), "t")
    return rows.groupBy(*VOLUME).agg(
        F.min("time").alias("window_start"),
        F.count(F.lit(1)).alias("observations"),
        F.regr_slope(y, x).alias("slope"),
        latest.alias("latest"),
    )


def _projected(rows: DataFrame) -> DataFrame:
    latest = F.col("latest")
    hard_bytes = F.when(latest["limit_kind"] == "min-available-ratio", latest["hard_limit"] * latest["total_bytes"]).otherwise(
        latest["hard_limit"]
    )
    fill_rate = F.lit(0.0) - F.col("slope")  # not -slope: no "-0.0" for a flat volume
    headroom = latest["usable_bytes"] - hard_bytes
    seconds = F.when(headroom <= 0, F.lit(0.0)).when(fill_rate > 0, headroom / fill_rate)
    return rows.select(
        *VOLUME,
        "window_start",
        latest["time"].alias("last_observed"),
        "observations",
        latest["usable_bytes"].alias("usable_bytes"),
        latest["total_bytes"].alias("total_bytes"),
        hard_bytes.alias("hard_limit_bytes"),
        fill_rate.alias("fill_rate_bytes_per_second"),
        seconds.alias("seconds_to_hard_limit"),
        F.timestamp_micros((F.unix_micros(latest["time"]) + seconds * 1_000_000).cast("long")).alias("projected_at"),
    )


def fill_forecast(rows: DataFrame, volumes: DataFrame, window_seconds: float = FORECAST_WINDOW_SECONDS) -> DataFrame:
    """``volumes``: ``brokers.volume_summary(rows)``, whose ``last_fitted`` (the last row each
    volume's fit may use) places the windows, so that the rows are read once here."""
    return (
        rows.transform(volume_rows)
        .filter(fitted_rows())
        .transform(_in_window(volumes, window_seconds))
        .transform(_fitted)
        .transform(_projected)
        .orderBy(F.col("seconds_to_hard_limit").asc_nulls_last(), *VOLUME)
    )
