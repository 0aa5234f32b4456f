"""A volume's net fill rate from its recent observations: the one estimator the live decision
(app/decision/horizon.py) and the report's forecast (spark/analysis/forecast.py) share. Pure:
no I/O, no clock.

The trend of a volume is the part of its recent observations after it last gained space by
more than the noise: a retention run or a delete frees space in one step, and how fast the
volume filled before says nothing about now (the saw-tooth of retention). A rise of up to
0.1% of the capacity, and at most 64 MiB, is noise (index files trimmed at a segment roll); a
rise that only returns from one low reading (it does not clear the reading before that one
too) is an outlier, not a gain.

The slope over the trend is the median of the slopes across half the trend: with n
observations, the slope from each observation i to observation i + ceil(n/2), for the
floor(n/2) first ones. Every observation is in one such pair at most, so one outlier moves at
most one of the floor(n/2) slopes, and their median ignores it once the trend holds 6 or more
observations; each slope spans half the trend, so the noise of one reading weighs little. It
reads a linear fill exactly, and a stop as zero once three quarters of the trend are flat
(the live rule sees a stop sooner: app/decision/horizon.py). Its cost is floor(n/2) slopes
and a sort of them, a few microseconds a volume: the service estimates every volume every
round (Theil-Sen's n(n - 1)/2 slopes cost ten times as much at 16 observations).

``FillTrend`` is the trend as it grows: an observation at a time, as the service makes them
and as the report replays them; both get the same rate from the same observations."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

GAIN_NOISE_RATIO = 0.001
GAIN_NOISE_MAX_BYTES = 64 * 1024 * 1024
MIN_TREND_OBSERVATIONS = 3
# What a gain is judged against: the observation before and the one before that.
GAIN_CONTEXT = 2


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


def half_trend_slopes(times: Sequence[float], values: Sequence[float]) -> list[float]:
    """The slopes from each observation to the one half the trend later, oldest pair first
    (``times`` strictly ascending, at least two)."""
    half = (len(times) + 1) // 2
    return [
        (late - early) / (t_late - t_early)
        for early, late, t_early, t_late in zip(values, values[half:], times, times[half:])
    ]


def median_of(values: Sequence[float]) -> float:
    ordered = sorted(values)
    count = len(ordered)
    return (ordered[(count - 1) // 2] + ordered[count // 2]) / 2


def half_trend_slope(times: Sequence[float], values: Sequence[float]) -> float:
    """The median of the slopes across half the trend."""
    return median_of(half_trend_slopes(times, values))


class FillTrend:
    """One volume's trend: its observations since it last gained space, no older than
    ``window_seconds`` before the latest one and at most ``max_observations`` of them (None:
    any number), each with a weight the caller keeps beside it (the live rule: the factor its
    broker's shims applied when it was made)."""

    __slots__ = (
        "_before",
        "_previous",
        "_slopes",
        "fill_rate",
        "max_observations",
        "times",
        "usable",
        "weights",
        "window_seconds",
    )

    def __init__(self, window_seconds: float, max_observations: int | None = None) -> None:
        self.window_seconds = window_seconds
        self.max_observations = max_observations
        self.times: list[float] = []
        self.usable: list[float] = []
        self.weights: list[float] = []
        # The rate of the trend as it stands (``rate()``), worked out as each observation comes:
        # the live rule reads it for every volume every round, without a call.
        self.fill_rate: float | None = None
        # The usable bytes of the last two observations added, trend or not: what a gain is judged against.
        self._previous: float | None = None
        self._before: float | None = None
        # The slopes across half the trend, oldest pair first (an observation in, one out: one
        # slope in, one out); None while the trend is too short for a rate.
        self._slopes: list[float] | None = None

    def add(self, at: float, usable: float, total_bytes: float, weight: float = 1.0) -> bool:
        """Add an observation; False (and nothing changes) when it is not newer than the last."""
        times, values, weights = self.times, self.usable, self.weights
        if times and at <= times[-1]:
            return False
        previous, before = self._previous, self._before
        # Only a rise can be a gain while the noise is not negative (a known capacity): a volume
        # that did not gain space skips the noise (most of them, every round).
        if previous is not None and (usable > previous or total_bytes < 0):
            noise = gain_noise_bytes(total_bytes)
            if usable - previous > noise and (before is None or usable - before > noise):
                # space gained: the trend starts again here
                times.clear()
                values.clear()
                weights.clear()
                self._slopes = None
        self._before, self._previous = previous, usable
        times.append(at)
        values.append(usable)
        weights.append(weight)
        oldest = at - self.window_seconds
        drop = 0
        while times[drop] < oldest:
            drop += 1
        if self.max_observations is not None and len(times) - self.max_observations > drop:
            drop = len(times) - self.max_observations
        slopes = self._slopes
        if drop == 1 and slopes is not None:
            del times[0], values[0], weights[0]
            # The same length: every pair but the oldest is still one, and the newest joins.
            half = (len(times) + 1) // 2
            del slopes[0]
            slopes.append((usable - values[-1 - half]) / (at - times[-1 - half]))
        else:
            if drop:
                del times[:drop], values[:drop], weights[:drop]
            if len(times) < MIN_TREND_OBSERVATIONS:
                self._slopes = self.fill_rate = None
                return True
            slopes = self._slopes = half_trend_slopes(times, values)
        # median_of, inline: this runs for every volume every round, and the call cost as much as the sort.
        ordered = sorted(slopes)
        count = len(ordered)
        self.fill_rate = (
            0.0 - (ordered[(count - 1) // 2] + ordered[count // 2]) / 2
        )  # not -slope: no "-0.0" for a flat volume
        return True

    def rate(self) -> float | None:
        """Bytes a second the volume fills (positive while it fills, negative while it frees);
        None while the trend holds fewer than MIN_TREND_OBSERVATIONS."""
        return self.fill_rate


@dataclass(frozen=True, slots=True)
class TrendFit:
    """What the report shows of a trend: its rate and what the rate rests on."""

    fill_rate: float | None
    start: float | None  # the first observation of the trend
    observations: int


def replay(
    observations: Iterable[tuple[float, float, float]],
    window_seconds: float,
    max_observations: int | None = None,
) -> TrendFit:
    """The trend after ``observations`` (time, usable bytes, total bytes; ascending), as
    ``FillTrend`` builds it. It rests on the latest observations only: give it those of the
    window and the GAIN_CONTEXT observations before them, and it says what the service said."""
    trend = FillTrend(window_seconds, max_observations)
    for at, usable, total in observations:
        trend.add(at, usable, total)
    return TrendFit(trend.rate(), trend.times[0] if trend.times else None, len(trend.times))


def fill_rate(
    times: Sequence[float], usable: Sequence[float], total_bytes: float, window_seconds: float
) -> float | None:
    """The rate ``FillTrend`` gives after the observations at ``times`` (ascending)."""
    return replay(
        ((at, value, total_bytes) for at, value in zip(times, usable)), window_seconds
    ).fill_rate


def seconds_to_limit(usable_bytes: float, hard_bytes: float, rate: float | None) -> float | None:
    """Seconds until the hard limit at ``rate``: 0 at or below it, None when not filling."""
    headroom = usable_bytes - hard_bytes
    if headroom <= 0:
        return 0.0
    if rate is None or rate <= 0:
        return None
    return headroom / rate
