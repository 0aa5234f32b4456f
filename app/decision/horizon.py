"""Time left, not only space left: the factor that keeps every volume at least a horizon away
from its hard limit at its current net fill rate. Pure: rounds carry their time, no I/O.

Per volume the rule keeps the last MAX_TREND_OBSERVATIONS observations of its trend (no older
than a quarter of the horizon; a gain of space above the noise starts the trend again), each
with the factor that was in force when it was made. Then:

    fill rate r   = Theil-Sen slope of the trend (app/decision/fill_rate.py), bytes/s
    in force  f   = the time-weighted mean of the factors in force over the trend
    demand    d   = r / f          what the producers would write unthrottled
    target    t   = (usable - hard level in bytes) / (horizon + Kafka's quota window, 11 s)
    factor        = min(1, t / d)  when d > 0, else 1

A volume that has not filled at all over the last quota window (11 s) asks for no time
factor: the producers stopped, and the slope, which lags a stop by half the trend, does not
hold the throttle after it.

At a steady factor the volume fills at f x d = t, so exactly the horizon is left: the loop
converges on the rate the horizon allows instead of swinging between throttled and open.

Bounded work a round: a volume is fitted only when it could ask for a factor below 1. Every
pair slope is a time-weighted mean of the slopes between consecutive observations, so the
Theil-Sen slope is at most the largest of those, and the demand at most that over the least
factor in force; a volume whose headroom lasts the horizon even at that bound is skipped."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from app.decision.fill_rate import (
    GAIN_NOISE_MAX_BYTES,
    GAIN_NOISE_RATIO,
    MAX_TREND_OBSERVATIONS,
    MIN_TREND_OBSERVATIONS,
    NOT_ESTIMATED,
    TimeToFull,
    fill_rate,
    seconds_to_limit,
)
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import VolumeKey, VolumeObservation

# Kafka averages a quota over quota.window.num (11) samples of quota.window.size.seconds (1 s):
# a factor takes up to that long to show in what producers write (KIP-13; docs/shim.md).
KAFKA_QUOTA_WINDOW_SECONDS = 11.0
# The shortest horizon accepted: a factor needs the quota window to take effect, and the rule
# needs a few observations of the slowed fill to see it; a horizon of at least about five quota
# windows keeps that settling a small part of the time the horizon promises.
MIN_HORIZON_SECONDS = 60.0
# The trend is fitted on the last quarter of the horizon, which must hold 3 observations at least.
HORIZON_CHECK_INTERVALS = 12
# Below this mean factor in force the demand cannot be told from what was written.
MIN_FACTOR_FOR_DEMAND = 0.001


class _Trend:
    __slots__ = ("times", "usable", "factors", "slopes")

    def __init__(self) -> None:
        self.times: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)
        self.usable: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)
        self.factors: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)
        # Bytes/s used between consecutive observations: the bound that spares most fits.
        self.slopes: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS - 1)

    def restart(self) -> None:
        """Keep only the latest observation: the trend starts again there."""
        for kept in (self.times, self.usable, self.factors):
            while len(kept) > 1:
                kept.popleft()
        self.slopes.clear()

    def drop_oldest(self) -> None:
        self.times.popleft(), self.usable.popleft(), self.factors.popleft()
        if self.slopes:
            self.slopes.popleft()


def _stopped(times: deque[float], usable: deque[float]) -> bool:
    """No net fill over the last quota window (less the latest interval): the producers
    stopped (a throttled one still writes every second or few). The Theil-Sen slope lags a stop by half the trend; this lets the
    throttle go within a check interval and the quota window of the stop."""
    last = times[-1]
    # The first observation after a stop stands for the interval before it as well.
    span = KAFKA_QUOTA_WINDOW_SECONDS - (last - times[-2])
    for index in range(len(times) - 2, -1, -1):
        if last - times[index] >= span:
            return usable[-1] >= usable[index]
    return False


def hard_limit_bytes(policy: StoragePolicy, volume: VolumeObservation) -> float:
    if policy.kind is LimitKind.MIN_AVAILABLE_BYTES:
        return policy.hard_level
    return policy.hard_level * volume.total_bytes


class HorizonRule:
    def __init__(self, policy: StoragePolicy, horizon_seconds: float) -> None:
        if horizon_seconds < MIN_HORIZON_SECONDS:
            raise ValueError(f"the horizon must be at least {MIN_HORIZON_SECONDS:g} s")
        self.policy = policy
        self.horizon_seconds = horizon_seconds
        self.window_seconds = horizon_seconds / 4
        self._trends: dict[VolumeKey, _Trend] = {}

    def record(self, observations: Iterable[VolumeObservation], factor_in_force: float) -> dict[VolumeKey, TimeToFull]:
        """Add a round's observations; return the volumes whose time factor is below 1."""
        at_risk: dict[VolumeKey, TimeToFull] = {}
        horizon, window = self.horizon_seconds, self.window_seconds
        by_ratio = self.policy.kind is LimitKind.MIN_AVAILABLE_RATIO
        hard = self.policy.hard_level
        trends = self._trends
        # This loop runs for every volume every round: what it does is kept inline and small.
        for volume in observations:
            total, usable_now, at = volume.total_bytes, volume.usable_bytes, volume.observed_at
            if volume.error is not None or total < 0 or usable_now < 0:
                continue
            key = (volume.broker_id, volume.log_dir)
            trend = trends.get(key)
            if trend is None:
                trend = trends[key] = _Trend()
            times, usable = trend.times, trend.usable
            if times:
                if at <= times[-1]:
                    continue  # the same observation again (a broker that did not answer)
                trend.slopes.append((usable[-1] - usable_now) / (at - times[-1]))
            times.append(at)
            usable.append(usable_now)
            trend.factors.append(factor_in_force)
            count = len(usable)
            if count > 1:
                noise = min(total * GAIN_NOISE_RATIO, GAIN_NOISE_MAX_BYTES)  # fill_rate.gained, inline
                if usable_now - usable[-2] > noise and (count < 3 or usable_now - usable[-3] > noise):
                    trend.restart()
                    continue
            while times[0] < at - window:
                trend.drop_oldest()
            if len(times) < MIN_TREND_OBSERVATIONS:
                continue
            steepest = max(trend.slopes)
            headroom = usable_now - (hard * total if by_ratio else hard)
            if steepest <= 0 or headroom * max(min(trend.factors), MIN_FACTOR_FOR_DEMAND) >= horizon * steepest:
                continue
            estimate = self._estimate(trend, volume)
            if estimate.factor < 1.0:
                at_risk[key] = estimate
        return at_risk

    def estimate(self, volume: VolumeObservation) -> TimeToFull:
        """The fill rate, time to the hard limit and time factor of ``volume`` (for reads)."""
        trend = self._trends.get(volume.key)
        if trend is None or volume.error is not None or not volume.capacity_known:
            return NOT_ESTIMATED
        return self._estimate(trend, volume)

    def _estimate(self, trend: _Trend, volume: VolumeObservation) -> TimeToFull:
        times, factors = trend.times, trend.factors
        rate = fill_rate(list(times), list(trend.usable), volume.total_bytes, self.window_seconds)
        hard = hard_limit_bytes(self.policy, volume)
        seconds = seconds_to_limit(volume.usable_bytes, hard, rate)
        if rate is None or rate <= 0 or _stopped(times, trend.usable):
            return TimeToFull(rate, seconds, 1.0)
        span = times[-1] - times[0]
        in_force = sum(factors[i] * (times[i + 1] - times[i]) for i in range(len(times) - 1)) / span
        demand = rate / max(in_force, MIN_FACTOR_FOR_DEMAND)
        # Aim at the horizon plus the quota window: a cut shows in what producers write only
        # over Kafka's window, and meanwhile the volume fills at the old rate.
        target = max(volume.usable_bytes - hard, 0.0) / (self.horizon_seconds + KAFKA_QUOTA_WINDOW_SECONDS)
        return TimeToFull(rate, seconds, min(1.0, target / demand))

    def forget(self, keys: Iterable[VolumeKey]) -> None:
        """Drop the trends of volumes that left the view (bounded memory)."""
        for key in keys:
            self._trends.pop(key, None)
