"""A volume's net fill rate from its recent observations: pure functions, no I/O, no clock.

The trend of a volume is the part of its recent observations after it last gained space by
more than the noise: a retention run or a delete frees space in one step, and how fast the
volume filled before says nothing about now (the saw-tooth of retention). A rise of up to
0.1% of the capacity, and at most 64 MiB, is noise (index files trimmed at a segment roll); a
rise that only returns from one low reading is an outlier, not a gain.

The slope over the trend is the Theil-Sen estimator: the median of the slopes between every
pair of observations. One outlier among n observations moves at most n - 1 of the n(n - 1)/2
pair slopes, so the median ignores it once the trend holds 4 or more observations (with
fewer, it is at least bounded by the other slopes). The service keeps at most
MAX_TREND_OBSERVATIONS per volume, so a fit costs at most 120 slopes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

GAIN_NOISE_RATIO = 0.001
GAIN_NOISE_MAX_BYTES = 64 * 1024 * 1024
MAX_TREND_OBSERVATIONS = 16
MIN_TREND_OBSERVATIONS = 3


@dataclass(frozen=True, slots=True)
class TimeToFull:
    """What the horizon rule (app/decision/horizon.py) says of one volume."""

    fill_rate: float | None  # bytes/s, positive while filling; None while the trend is too short
    seconds_to_hard_limit: float | None  # at that rate; None while not filling
    factor: float  # 1.0 unless the horizon is at risk


NOT_ESTIMATED = TimeToFull(None, None, 1.0)


def gain_noise_bytes(total_bytes: float) -> float:
    """The largest rise of usable bytes between two observations that is still noise."""
    return min(total_bytes * GAIN_NOISE_RATIO, GAIN_NOISE_MAX_BYTES)


def gained(usable: Sequence[float], index: int, noise: float) -> bool:
    """Whether the volume gained space at observation ``index``: more than the noise above the
    observation before, and above the one before that, so that the way back from a single low
    reading is not taken for a retention run."""
    return usable[index] - usable[index - 1] > noise and (index < 2 or usable[index] - usable[index - 2] > noise)


def trend_start(usable: Sequence[float], total_bytes: float) -> int:
    """The index of the first observation after the last gain of space above the noise."""
    noise = gain_noise_bytes(total_bytes)
    for index in range(len(usable) - 1, 0, -1):
        if gained(usable, index, noise):
            return index
    return 0


def theil_sen_slope(times: Sequence[float], values: Sequence[float]) -> float | None:
    """The median of the pairwise slopes (None without two distinct times)."""
    slopes = [
        (values[j] - values[i]) / (times[j] - times[i])
        for i in range(len(times))
        for j in range(i + 1, len(times))
        if times[j] != times[i]
    ]
    return median(slopes) if slopes else None


def fill_rate(times: Sequence[float], usable: Sequence[float], total_bytes: float, window_seconds: float) -> float | None:
    """Bytes a second the volume fills (positive while it fills, negative while it frees),
    from the observations at ``times`` (ascending) no older than ``window_seconds`` before the
    last one, from the last gain of space on; None while that trend holds fewer than
    MIN_TREND_OBSERVATIONS."""
    if not times:
        return None
    oldest = times[-1] - window_seconds
    first = 0
    while first < len(times) and times[first] < oldest:
        first += 1
    start = first + trend_start(usable[first:], total_bytes)
    if len(times) - start < MIN_TREND_OBSERVATIONS:
        return None
    slope = theil_sen_slope(times[start:], usable[start:])
    return None if slope is None else 0.0 - slope  # not -slope: no "-0.0" for a flat volume


def seconds_to_limit(usable_bytes: float, hard_bytes: float, rate: float | None) -> float | None:
    """Seconds until the hard limit at ``rate``: 0 at or below it, None when not filling."""
    headroom = usable_bytes - hard_bytes
    if headroom <= 0:
        return 0.0
    if rate is None or rate <= 0:
        return None
    return headroom / rate
