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

from pyspark.sql import Column, DataFrame, SparkSession, Window
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
_T, _USABLE, _TOTAL = (f"_{name}" for name in _OBSERVED)  # ``fill_inputs``' arrays of them
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


def _trend(window_seconds: float, group) -> tuple:
    """The service's estimator on one volume's observations (in the driver: the same code as the
    live decision, not a second implementation in Spark's functions), as _TREND's fields."""
    trend = replay(zip(group[_T], group[_USABLE], group[_TOTAL], strict=True), window_seconds)
    seconds = seconds_to_limit(
        group["latest"]["usable_bytes"], group["hard_bytes"], trend.fill_rate
    )
    return (trend.fill_rate, trend.start, trend.observations, seconds)


def _field(name: str) -> Callable[[Column], Column]:
    """An array element's field ``name`` (a function of one argument, as ``F.transform`` takes)."""
    return lambda element: element[name]


def _grouped(rows: DataFrame) -> DataFrame:
    """A row per volume: its observations as three arrays of numbers (in time order), its latest
    observation, the hard limit in bytes then, and how many of its observations are context."""
    latest = F.max_by(F.struct("t", "usable_bytes", "total_bytes", "limit_kind", "hard_limit"), "t")
    grouped = rows.groupBy(*VOLUME).agg(
        F.sort_array(F.collect_list(F.struct(*_OBSERVED))).alias("observations"),
        latest.alias("latest"),
        F.count(F.when(F.col("t") < F.col("cut"), 1)).alias(CONTEXT),
    )
    last = F.col("latest")
    hard_bytes = F.when(
        last["limit_kind"] == "min-available-ratio", last["hard_limit"] * last["total_bytes"]
    ).otherwise(last["hard_limit"])
    # Three arrays of numbers, which Python reads several times faster than an array of rows.
    observations = F.col("observations")
    return grouped.select(
        *VOLUME,
        *[
            F.transform(observations, _field(name)).alias(array)
            for name, array in zip(_OBSERVED, (_T, _USABLE, _TOTAL), strict=True)
        ],
        "latest",
        hard_bytes.alias("hard_bytes"),
        CONTEXT,
    )


def _fitted(spark: SparkSession, inputs: DataFrame, window_seconds: float) -> DataFrame:
    """``inputs`` (``fill_inputs``) collected, each volume's trend fitted in the driver, and
    made a table again, with the trend a struct (_TREND) in place of the observations. The fit
    runs in the driver, not in a Python worker: a worker's start cost a run more than the fit
    of every volume (a few thousand numbers each)."""
    schema = T.StructType(
        [f for f in inputs.schema.fields if f.name not in (_T, _USABLE, _TOTAL)]
        + [T.StructField("trend", _TREND)]
    )
    fitted = [
        (*(group[f.name] for f in schema.fields[:-1]), _trend(window_seconds, group))
        for group in inputs.collect()
    ]
    return spark.createDataFrame(fitted, schema)


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


def fill_inputs(
    rows: DataFrame, volumes: DataFrame, end: HistoryEnd, window_seconds: float
) -> DataFrame:
    """What the fit reads of ``rows``: a row per volume still present, with its window's
    observations (``_grouped``). ``volumes``: ``brokers.volume_summary(rows)``, whose
    ``last_fitted`` (the last row each volume's fit may use) places the windows, so that the
    rows are read once here."""
    return (
        rows.transform(volume_rows)
        .filter(fitted_rows())
        .transform(_in_window(volumes, end, window_seconds))
        .transform(_grouped)
    )


def fill_forecast(
    rows: DataFrame,
    volumes: DataFrame,
    end: HistoryEnd,
    window_seconds: float = FORECAST_WINDOW_SECONDS,
    context: bool = False,
) -> DataFrame:
    """The forecast table (``fill_inputs`` collected and fitted now, in the driver). With
    ``context``, the column CONTEXT last: whether ``rows`` reached far enough back is then
    known from the forecast itself, without a query of its own."""
    fitted = _fitted(
        rows.sparkSession, fill_inputs(rows, volumes, end, window_seconds), window_seconds
    )
    return fitted.transform(_projected(context)).transform(
        lambda forecast: in_order(
            forecast, F.col("seconds_to_hard_limit").asc_nulls_last(), *VOLUME
        )
    )
