"""The gap rule shared by every report: observations of a volume (or rounds) further apart
than the gap limit do not describe the time between them. So a volume is still present at
the end of the history when it was observed within the gap limit of the last round that
observed volumes."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark.report import GAP_INTERVALS


def gap_limit(max_gap_seconds: float | None) -> Column:
    """Seconds: the job's --max-gap, else GAP_INTERVALS x the row's check interval."""
    if max_gap_seconds is not None:
        return F.lit(float(max_gap_seconds))
    return F.col("check_interval_seconds") * F.lit(GAP_INTERVALS)


def round_gap_limit(
    check_interval_seconds: float | None, max_gap_seconds: float | None
) -> float | None:
    """``gap_limit`` of one round collected to the driver, the same double (None: a round
    without a check interval, and no --max-gap)."""
    if max_gap_seconds is not None:
        return float(max_gap_seconds)
    return None if check_interval_seconds is None else check_interval_seconds * GAP_INTERVALS


@dataclass(frozen=True)
class HistoryEnd:
    """Where the history ends (epoch seconds). A history made while the service cannot reach
    the cluster ends in rounds that observed nothing: what was true at the last round that
    observed volumes is the last thing known, not something that stopped."""

    last_round: float
    last_observing_round: float

    @property
    def unobserved(self) -> bool:
        """The history ends in rounds that observed no volume."""
        return self.last_round > self.last_observing_round


def still_present(last_seen_seconds: Column, end: HistoryEnd, limit: Column) -> Column:
    """A volume (or broker) last seen at ``last_seen_seconds`` is still there at the end of
    the history: seen within the gap limit of the last round that observed volumes."""
    return last_seen_seconds >= F.lit(end.last_observing_round) - limit
