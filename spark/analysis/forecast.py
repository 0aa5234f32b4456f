"""Fill rate and projected time to the hard limit, per volume still present at the end.

The trend: the volume's observations in the last FORECAST_WINDOW_SECONDS (1 h) before its own
last one, from the last time in that window that it gained space by more than the noise (a
delete, a retention run): how fast a volume filled before a free says nothing about it now.
Fill rate = minus the least-squares slope of usable bytes over time across the trend (bytes/s;
positive while the volume fills), given with the observations and the seconds it rests on.
Time to the hard limit = (usable - hard limit in bytes) / fill rate from the last observation,
when the volume fills; 0 when it is already at or below the limit; none when it is not
filling or the trend holds fewer than two observations. A ratio limit is turned into bytes
with the volume's total bytes. A volume no longer present (its broker left) gets no forecast."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from spark.analysis.episodes import VOLUME, volume_rows
from spark.analysis.gaps import HistoryEnd, still_present
from spark.reading.history import epoch_seconds

FORECAST_WINDOW_SECONDS = 3600.0
# A rise of usable bytes from one observation to the next of up to this share of the capacity,
# and at most GAIN_NOISE_MAX_BYTES, is noise (index files trimmed at a segment roll: up to
# segment.index.bytes, 10 MiB; other files on the disk); a larger one is space gained (a
# segment deleted), and the trend starts again there. The cap keeps a large volume's retention
# runs visible: 0.1% of 10 TiB is 10 GiB, more than a segment.
GAIN_NOISE_RATIO = 0.001
GAIN_NOISE_MAX_BYTES = 64 * 1024 * 1024


def fitted_rows() -> Column:
    """The rows the fill rate is fitted on: the volume reported its capacity and usable bytes
    and no log dir error."""
    return (F.col("usable_bytes") >= 0) & (F.col("total_bytes") >= 0) & F.col("log_dir_error").isNull()


def _in_window(volumes: DataFrame, end: HistoryEnd, window_seconds: float):
    def step(rows: DataFrame) -> DataFrame:
        present = volumes.filter(still_present(epoch_seconds("last_seen"), end, F.col("gap_limit")))
        last_seen = present.select(*VOLUME, epoch_seconds("last_fitted").alias("last_t"))
        with_t = rows.withColumn("t", epoch_seconds("time"))
        return with_t.join(F.broadcast(last_seen), list(VOLUME)).filter(F.col("t") >= F.col("last_t") - F.lit(window_seconds))

    return step


def _since_last_gain(rows: DataFrame) -> DataFrame:
    """The rows of the window from the last one that gained space by more than the noise."""
    in_order = Window.partitionBy(*VOLUME).orderBy("t")
    rise = F.col("usable_bytes") - F.lag("usable_bytes").over(in_order)
    noise = F.least(F.col("total_bytes") * F.lit(GAIN_NOISE_RATIO), F.lit(GAIN_NOISE_MAX_BYTES))
    gained = F.coalesce(rise > noise, F.lit(False))
    trend_from = F.max(F.when(F.col("gained"), F.col("t"))).over(Window.partitionBy(*VOLUME))
    return (
        rows.withColumn("gained", gained)
        .withColumn("trend_from", trend_from)
        .filter(F.col("trend_from").isNull() | (F.col("t") >= F.col("trend_from")))
    )


def _fitted(rows: DataFrame) -> DataFrame:
    # Time relative to the last observation keeps the regression well conditioned.
    x = F.col("t") - F.col("last_t")
    y = F.col("usable_bytes").cast("double")
    latest = F.max_by(F.struct("time", "usable_bytes", "total_bytes", "limit_kind", "hard_limit"), "t")
    return rows.groupBy(*VOLUME).agg(
        F.min("time").alias("trend_start"),
        F.count(F.lit(1)).alias("trend_observations"),
        ((F.max(F.unix_micros("time")) - F.min(F.unix_micros("time"))) / F.lit(1_000_000.0)).alias("trend_seconds"),
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
        "trend_start",
        latest["time"].alias("last_observed"),
        "trend_observations",
        "trend_seconds",
        latest["usable_bytes"].alias("usable_bytes"),
        latest["total_bytes"].alias("total_bytes"),
        hard_bytes.alias("hard_limit_bytes"),
        fill_rate.alias("fill_rate_bytes_per_second"),
        seconds.alias("seconds_to_hard_limit"),
        F.timestamp_micros((F.unix_micros(latest["time"]) + seconds * 1_000_000).cast("long")).alias("projected_at"),
    )


def fill_forecast(rows: DataFrame, volumes: DataFrame, end: HistoryEnd, window_seconds: float = FORECAST_WINDOW_SECONDS) -> DataFrame:
    """``volumes``: ``brokers.volume_summary(rows)``, whose ``last_fitted`` (the last row each
    volume's fit may use) places the windows, so that the rows are read once here."""
    return (
        rows.transform(volume_rows)
        .filter(fitted_rows())
        .transform(_in_window(volumes, end, window_seconds))
        .transform(_since_last_gain)
        .transform(_fitted)
        .transform(_projected)
        .orderBy(F.col("seconds_to_hard_limit").asc_nulls_last(), *VOLUME)
    )
