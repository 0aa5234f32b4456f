"""Time left, not only space left: the factor that keeps every volume at least a horizon away
from its hard limit at its current net fill rate. Pure: rounds carry their time, no I/O.

Per volume the rule keeps the last MAX_TREND_OBSERVATIONS observations of its trend (no older
than a quarter of the horizon; a gain of space above the noise starts the trend again), each
with the factor that was in force when it was made. Then:

    fill rate r   = Theil-Sen slope of the trend (app/decision/fill_rate.py), bytes/s
    in force  f   = the time-weighted mean of the factors in force over the trend
    demand    d   = r / f          what the producers would write unthrottled
    target    t   = (usable - hard level in bytes) / horizon
    factor        = min(1, t / d)  when d > 0, else 1

At a steady factor the volume fills at f x d = t, so exactly the horizon is left: the loop
converges on the rate the horizon allows instead of swinging between throttled and open.

Bounded work a round: a volume is fitted only when it could ask for a factor below 1. Every
pair slope is a time-weighted mean of the slopes between consecutive observations, so the
Theil-Sen slope is at most the largest of those, and the demand at most that over the least
factor in force; a volume whose headroom lasts the horizon even at that bound is skipped."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from app.decision.fill_rate import MAX_TREND_OBSERVATIONS, NOT_ESTIMATED, TimeToFull, fill_rate, gain_noise_bytes, gained, seconds_to_limit
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import VolumeKey, VolumeObservation

# Kafka averages a quota over quota.window.num (11) samples of quota.window.size.seconds (1 s):
# a factor takes up to that long to show in what producers write (KIP-13; docs/shim.md).
KAFKA_QUOTA_WINDOW_SECONDS = 11.0
# The shortest horizon accepted: a factor needs the quota window to take effect, and the rule
# needs a few observations of the slowed fill to see it; a horizon of at least about five quota
# windows keeps that settling a small part of the time the horizon promises.
MIN_HORIZON_SECONDS = 60.0
# Below this mean factor in force the demand cannot be told from what was written.
MIN_FACTOR_FOR_DEMAND = 0.001


class _Trend:
    __slots__ = ("times", "usable", "factors")

    def __init__(self) -> None:
        self.times: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)
        self.usable: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)
        self.factors: deque[float] = deque(maxlen=MAX_TREND_OBSERVATIONS)


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
        horizon = self.horizon_seconds
        for volume in observations:
            if volume.error is not None or not volume.capacity_known:
                continue
            key = volume.key
            trend = self._trends.get(key)
            if trend is None:
                trend = self._trends[key] = _Trend()
            times, usable, factors = trend.times, trend.usable, trend.factors
            if times and volume.observed_at <= times[-1]:
                continue  # the same observation again (a broker that did not answer)
            times.append(volume.observed_at)
            usable.append(float(volume.usable_bytes))
            factors.append(factor_in_force)
            if len(usable) > 1 and gained(usable, len(usable) - 1, gain_noise_bytes(volume.total_bytes)):
                for kept in (times, usable, factors):  # space gained: the trend starts again
                    for _ in range(len(kept) - 1):
                        kept.popleft()
            oldest = volume.observed_at - self.window_seconds
            while times[0] < oldest:
                times.popleft(), usable.popleft(), factors.popleft()
            if len(times) < 3:
                continue
            steepest = max((usable[i - 1] - usable[i]) / (times[i] - times[i - 1]) for i in range(1, len(times)))
            headroom = volume.usable_bytes - hard_limit_bytes(self.policy, volume)
            if steepest <= 0 or headroom * max(min(factors), MIN_FACTOR_FOR_DEMAND) >= horizon * steepest:
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
        if rate is None or rate <= 0:
            return TimeToFull(rate, seconds, 1.0)
        span = times[-1] - times[0]
        in_force = sum(factors[i] * (times[i + 1] - times[i]) for i in range(len(times) - 1)) / span
        demand = rate / max(in_force, MIN_FACTOR_FOR_DEMAND)
        target = max(volume.usable_bytes - hard, 0.0) / self.horizon_seconds
        return TimeToFull(rate, seconds, min(1.0, target / demand))

    def forget(self, keys: Iterable[VolumeKey]) -> None:
        """Drop the trends of volumes that left the view (bounded memory)."""
        for key in keys:
            self._trends.pop(key, None)
