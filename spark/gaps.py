"""The gap rule shared by every report: observations of a volume (or rounds) further apart
than the gap limit do not describe the time between them."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

# Default gap limit: this many check intervals (each row records the service's interval).
GAP_INTERVALS = 3.0


def gap_limit(max_gap_seconds: float | None) -> Column:
    """Seconds: the job's --max-gap, else GAP_INTERVALS x the row's check interval."""
    if max_gap_seconds is not None:
        return F.lit(float(max_gap_seconds))
    return F.col("check_interval_seconds") * F.lit(GAP_INTERVALS)
