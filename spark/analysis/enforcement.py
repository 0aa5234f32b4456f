"""Whether an episode was enforced or only would have been (shadow mode).

In shadow mode the service decides and records as ever, but the shims do not apply the
factor: its rows carry ``"enforced": false``. An episode that began in such a row is one the
producers never felt, and the page labels it "would have". A history without the field (one
written before it existed) was enforced throughout."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.analysis.episodes import ENFORCED, VOLUME
from spark.reading.frames import kept


def with_enforcement(rows: DataFrame, persisted: list[DataFrame] | None = None):
    """Episodes (``violation_episodes``) with ``enforced``: whether the row each began in was
    enforced (a missing field, or a null, counts as enforced). ``rows``: the rows, or
    ``episodes.segment_starts`` of the segments the episodes are made of. With ``persisted``, the episodes
    are computed once, persisted and added to it (for the caller to unpersist)."""

    def step(episodes: DataFrame) -> DataFrame:
        if ENFORCED not in rows.columns:
            return episodes.withColumn(ENFORCED, F.lit(True))
        # The episodes are few and costly to compute: computed once here, and the rows of
        # their starts looked up by a broadcast join instead of another sort of every row.
        episodes = kept(episodes, persisted)
        starts = episodes.select(*VOLUME, F.col("start").alias("time")).distinct()
        at_start = (
            rows.join(F.broadcast(starts), [*VOLUME, "time"])
            .groupBy(*VOLUME, F.col("time").alias("start"))
            .agg(F.min(F.coalesce(F.col(ENFORCED), F.lit(True))).alias(ENFORCED))
        )
        # The broadcast side is the lookup: the episodes keep their order.
        return episodes.join(F.broadcast(at_start), [*VOLUME, "start"], "left").select(
            *episodes.columns, F.coalesce(F.col(ENFORCED), F.lit(True)).alias(ENFORCED)
        )

    return step
