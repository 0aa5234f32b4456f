"""Fill rate and projected time to the hard limit, per volume still present at the end.

The fill rate is the service's own estimator (app/decision/fill_rate.py), run on the volume's
observations as the service made them: each observation once, at its own time (``observed_at``;
a kept one repeats in later rounds' rows), the last FORECAST_WINDOW_SECONDS (1 h) before the
volume's own last one, from the last time it gained space by more than the noise (a delete, a
retention run): how fast a volume filled before a free says nothing about it now. Fill rate =
minus the median of the slopes across half that trend (bytes/s; positive while the volume
fills), given with the observations and the seconds it rests on. Time to the hard limit =
(usable - hard limit in bytes) / fill rate from the last observation, when the volume fills; 0
when it is already at or below the limit; none when it is not filling or the trend holds fewer
than three observations. A ratio limit is turned into bytes with the volume's total bytes. A
volume no longer present (its broker left) gets no forecast. Given the same observations and
window (and the service's count of them), the figures are the ones the service computed live."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.decision.fill_rate import GAIN_CONTEXT, replay, seconds_to_limit
from spark.analysis.episodes import VOLUME, volume_rows
from spark.analysis.gaps import HistoryEnd, still_present
from spark.reading.frames import in_order
from spark.reading.history import epoch_seconds

FORECAST_WINDOW_SECONDS = 3600.0
# ``fill_forecast(..., context=True)``: a column more, each volume's observations before its
# window that the fit kept (at most GAIN_CONTEXT): fewer than GAIN_CONTEXT when the rows given
# did not reach far enough back (``partials.short_of_context``).
CONTEXT = "context_observations"
_OBSERVED = ("t", "usable_bytes", "total_bytes")  # an observation, as the fit reads it
_TREND = T.StructType(
    [
        T.StructField("fill_rate", T.DoubleType()),
        T.StructField("start", T.DoubleType()),
        T.StructField("observations", T.LongType()),
        T.StructField("seconds", T.DoubleType()),
    ]
)


def fitted_rows() -> Column:
    """The rows the fill rate is fitted on: the volume reported its capacity and usable bytes
    and no log dir error."""
    return (
        (F.col("usable_bytes") >= 0) & (F.col("total_bytes") >= 0) & F.col("log_dir_error").isNull()
    )


def observed_seconds() -> Column:
    """When the row's observation was made (epoch seconds): a kept one's own time, not the round's."""
    return F.unix_micros(F.coalesce("observed_at", "time")) / F.lit(1_000_000.0)


def _in_window(volumes: DataFrame, end: HistoryEnd, window_seconds: float):
    """Each present volume's observations once each (t: when it was made), those of the window
    and the GAIN_CONTEXT ones before them (what a gain at the window's start is judged against)."""

    def step(rows: DataFrame) -> DataFrame:
        present = volumes.filter(
            still_present(epoch_seconds("last_seen"), end, F.col("gap_limit"))
        ).select(*VOLUME)
        made = rows.withColumn("t", observed_seconds())
        once = made.dropDuplicates([*VOLUME, "t"])
        in_order = Window.partitionBy(*VOLUME).orderBy("t")
        cut = F.max("t").over(Window.partitionBy(*VOLUME)) - F.lit(window_seconds)
        return (
            once.join(F.broadcast(present), list(VOLUME))
            .withColumn("cut", cut)
            .withColumn("context_end", F.lead("t", GAIN_CONTEXT).over(in_order))
            .filter((F.col("t") >= F.col("cut")) | (F.col("context_end") >= F.col("cut")))
        )

    return step


def _trend_fit(window_seconds: float):
    """The service's estimator on one volume's observations (a Python function: the same code
    as the live decision, not a second implementation in Spark's functions)."""

    def fit(
        times, usable, total, usable_bytes, hard_bytes
    ):  # no hints: Spark would read them as a pandas UDF's
        trend = replay(zip(times, usable, total, strict=True), window_seconds)
        return (
            trend.fill_rate,
            trend.start,
            trend.observations,
            seconds_to_limit(usable_bytes, hard_bytes, trend.fill_rate),
        )

    return F.udf(fit, _TREND, useArrow=False)


def _field(name: str) -> Callable[[Column], Column]:
    """An array element's field ``name`` (a function of one argument, as ``F.transform`` takes)."""
    return lambda element: element[name]


def _fitted(window_seconds: float):
    def step(rows: DataFrame) -> DataFrame:
        latest = F.max_by(
            F.struct("t", "usable_bytes", "total_bytes", "limit_kind", "hard_limit"), "t"
        )
        grouped = rows.groupBy(*VOLUME).agg(
            F.sort_array(F.collect_list(F.struct(*_OBSERVED))).alias("observations"),
            latest.alias("latest"),
            F.count(F.when(F.col("t") < F.col("cut"), 1)).alias(CONTEXT),
        )
        last = F.col("latest")
        hard_bytes = F.when(
            last["limit_kind"] == "min-available-ratio", last["hard_limit"] * last["total_bytes"]
        ).otherwise(last["hard_limit"])
        # The observations go to the fit as three arrays of numbers (in the sorted structs'
        # order), which Python reads several times faster than an array of rows.
        observations = F.col("observations")
        return grouped.withColumn("hard_bytes", hard_bytes).withColumn(
            "trend",
            _trend_fit(window_seconds)(
                *[F.transform(observations, _field(name)) for name in _OBSERVED],
                last["usable_bytes"],
                "hard_bytes",
            ),
        )

    return step


def _instant(seconds: Column) -> Column:
    return F.timestamp_micros(F.round(seconds * F.lit(1_000_000.0)).cast("long"))


def _projected(context: bool):
    return lambda rows: _projection(rows, context)


def _projection(rows: DataFrame, context: bool) -> DataFrame:
    latest, trend = F.col("latest"), F.col("trend")
    seconds = trend["seconds"]
    return rows.select(
        *VOLUME,
        _instant(trend["start"]).alias("trend_start"),
        _instant(latest["t"]).alias("last_observed"),
        trend["observations"].alias("trend_observations"),
        (latest["t"] - trend["start"]).alias("trend_seconds"),
        latest["usable_bytes"].alias("usable_bytes"),
        latest["total_bytes"].alias("total_bytes"),
        F.col("hard_bytes").alias("hard_limit_bytes"),
        trend["fill_rate"].alias("fill_rate_bytes_per_second"),
        seconds.alias("seconds_to_hard_limit"),
        _instant(latest["t"] + seconds).alias("projected_at"),
        *([CONTEXT] if context else []),
    )


def fill_forecast(
    rows: DataFrame,
    volumes: DataFrame,
    end: HistoryEnd,
    window_seconds: float = FORECAST_WINDOW_SECONDS,
    context: bool = False,
) -> DataFrame:
    """``volumes``: ``brokers.volume_summary(rows)``, whose ``last_fitted`` (the last row each
    volume's fit may use) places the windows, so that the rows are read once here. With
    ``context``, the column CONTEXT last: whether ``rows`` reached far enough back is then
    known from the forecast itself, without a query of its own."""
    return (
        rows.transform(volume_rows)
        .filter(fitted_rows())
        .transform(_in_window(volumes, end, window_seconds))
        .transform(_fitted(window_seconds))
        .transform(_projected(context))
        .transform(
            lambda forecast: in_order(
                forecast, F.col("seconds_to_hard_limit").asc_nulls_last(), *VOLUME
            )
        )
    )
