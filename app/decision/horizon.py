"""Time left, not only space left: the factor that keeps every volume at least a horizon away
from its hard limit at its current net fill rate. Pure: rounds carry their time, no I/O.

Per volume the rule keeps the trend of its last MAX_TREND_OBSERVATIONS observations (no older
than a quarter of the horizon; a gain of space above the noise starts the trend again), each
with the factor its broker's shims *applied* when it was made (app/decision/fill_rate.py, the
estimator the report's forecast uses too): the factor in force where they enforce it, 1 where
they do not (shadow mode, brokers outside the canary list; ``AppliedFactor``). Every round,
for every volume:

    fill rate r   = the median of the slopes across half the trend, bytes/s
    time left     = (usable - hard level in bytes) / r      while r > 0

and, for a volume that could ask for less than 1 (one the rule does not hold yet is passed
over while its broker applies a pause: nothing is written to tell the demand from, and
nothing is slower than a pause):

    demand    d   = the median, over the pairs of observations (i, j) at least half the
                    trend apart, of (usable_i - usable_j) / the integral of the factors
                    applied from t_i to t_j (at least MIN_FACTOR_FOR_DEMAND x the time):
                    what the producers would write unthrottled
    target    t   = (usable - hard level in bytes) / (horizon + 11 s + half the trend)
    factor        = min(1, t / d)  when d > 0, else 1

The rule takes hold of a volume only when that factor is below (horizon + 11 s) / (horizon +
11 s + half the trend), and lets go of one it holds only when its fill has stopped (below),
reversed (r <= 0, or a gain of space restarted its trend) or its time left at the demand is
back above the reach (the factor comes back to 1): never because the factor applied was too
small to tell the demand from. A volume held whose broker does not answer keeps its figures
while its last observation is in the view, as its level verdict does.

A fill that does not slow when produce is throttled (followers replicating, excluded
principals, internal topics) reads as a demand that grows as the factor falls: the factor
falls geometrically, round after round, towards 0, and the volume is held until its fill
stops; PAUSE (by this rule or at the hard limit) is the expected end. Dividing the fill by
the factor *applied* is what keeps shadow mode honest: there the demand is the fill itself
and the factor shown is the one enforcing would start from, (headroom / reach) / r.

The target adds to the horizon Kafka's quota window (11 s: a cut shows in what producers
write only over it, and meanwhile the volume fills at the old rate) and half the trend (the
slope is the rate of about half a trend ago: while the rule slows a fill, the time left at
the estimated rate is about that much shorter than at the rate written now; aiming at the
horizon plus the quota window alone held it about 6% under the horizon, and the bursts of a
throttled producer's writes took it under 0.8 x).

A volume that has not filled at all over the last quota window less two check intervals
(7 s at 2 s; at least the last interval) asks for no time factor: the producers stopped,
and the slope, which lags a stop by half the trend, does not hold the throttle after it.

At a steady factor the volume fills at t, the rate that leaves the target's time: the loop
converges on the rate the horizon allows instead of swinging between throttled and open.

Bounded work a round: the rate of every volume (a few microseconds each: a sort of at most
8 slopes); the demand (at most 36 pairs) only for a volume held, or one whose headroom would
not last the target's time even at its rate over the least factor applied over its trend (a
screen on the fill rate r: the volumes that can ask for a factor below 1).

"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from app.decision.enforcement import Enforcement
from app.decision.fill_rate import NOT_ESTIMATED, FillTrend, TimeToFull, median_of, seconds_to_limit
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
# The most observations a trend keeps: the estimator's cost a volume is bounded by it.
MAX_TREND_OBSERVATIONS = 16
# Below this factor applied the demand cannot be told from what was written.
MIN_FACTOR_FOR_DEMAND = 0.001

NO_RATES: Mapping[VolumeKey, float | None] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class AppliedFactor:
    """The factor the brokers' shims applied while a round's observations were made: ``factor``
    on the brokers that enforce it (``enforcing``; None: every broker), 1 on the others. The
    demand is what was written over what was applied, not over what was decided: in shadow
    mode the shims applied nothing."""

    factor: float
    enforcing: frozenset[int] | None = None

    @classmethod
    def under(cls, factor: float, enforcement: Enforcement) -> AppliedFactor:
        """What the shims applied with ``factor`` in force under ``enforcement``."""
        if not enforcement.enforced:
            return cls(1.0)
        return cls(
            factor, frozenset(enforcement.canary_brokers) if enforcement.canary_brokers else None
        )

    def on(self, broker_id: int) -> float:
        enforcing = self.enforcing
        return self.factor if enforcing is None or broker_id in enforcing else 1.0


def _stopped(times: list[float], usable: list[float]) -> bool:
    """No net fill over the last quota window less two check intervals: the producers stopped
    (a throttled one still writes every second or so). The slope lags a stop by half the trend;
    this lets the throttle go within a check interval and the quota window of the stop: the
    first observation after the stop comes up to an interval after it, the round that sees the
    span up to an interval after that, and the interval left over is for that round itself,
    the shim's poll and Kafka's re-reading of the quota."""
    last = times[-1]
    span = KAFKA_QUOTA_WINDOW_SECONDS - 2 * (last - times[-2])
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
        # What the rule aims at: the horizon, plus Kafka's quota window (a cut shows in what
        # producers write only over it, and meanwhile the volume fills at the old rate), plus
        # half the trend (the estimated rate is the rate of about half a trend ago: while the
        # rule slows a fill, the time left at it is about that much shorter than at the rate
        # written now).
        self.reach_seconds = horizon_seconds + KAFKA_QUOTA_WINDOW_SECONDS + self.window_seconds / 2
        # A volume the rule does not hold yet is taken hold of only when its demand would reach
        # the hard limit within the horizon and the quota window (a factor below this); one it
        # holds is let go when the factor comes to 1. The band, half the trend, is about the
        # noise of the demand a throttled producer's bursts leave: without it the factor
        # flickered between 1 and 0.95 for half a minute before the rule held for good.
        self.take_hold_below = (horizon_seconds + KAFKA_QUOTA_WINDOW_SECONDS) / self.reach_seconds
        self._trends: dict[VolumeKey, FillTrend] = {}
        # The latest round's: every estimated volume's fill rate, and the volumes at risk.
        self.rates: Mapping[VolumeKey, float | None] = NO_RATES
        self._at_risk: Mapping[VolumeKey, TimeToFull] = MappingProxyType({})
        self._held_at: dict[VolumeKey, float] = {}  # the time of the observation each was held on

    def record(
        self, observations: Iterable[VolumeObservation], applied: AppliedFactor
    ) -> dict[VolumeKey, TimeToFull]:
        """Add a round's observations, made under the factor ``applied``; return the volumes
        whose time factor is below 1. The rates of every volume the rule estimates are in
        ``rates`` afterwards (a new mapping each round: a reader may keep the one it took)."""
        at_risk: dict[VolumeKey, TimeToFull] = {}
        rates = dict(
            self.rates
        )  # a kept observation's volume keeps its rate until a newer one comes
        reach = self.reach_seconds
        held, take_hold_below = self._at_risk, self.take_hold_below
        by_ratio = self.policy.kind is LimitKind.MIN_AVAILABLE_RATIO
        hard = self.policy.hard_level
        trends, window = self._trends, self.window_seconds
        in_force, enforcing = applied.factor, applied.enforcing
        # This loop runs for every volume every round: what it does is kept inline and small.
        for volume in observations:
            total, usable, at = volume.total_bytes, volume.usable_bytes, volume.observed_at
            if volume.error is not None or total < 0 or usable < 0:
                continue
            key = (volume.broker_id, volume.log_dir)
            trend = trends.get(key)
            if trend is None:
                trend = trends[key] = FillTrend(window, MAX_TREND_OBSERVATIONS)
            factor = in_force if enforcing is None or volume.broker_id in enforcing else 1.0
            if not trend.add(at, usable, total, factor):
                continue  # the same observation again (a broker that did not answer): see below
            rate = rates[key] = trend.fill_rate
            if rate is None or rate <= 0:
                continue  # not filling: a volume held is let go (its fill stopped or reversed)
            headroom = usable - (hard * total if by_ratio else hard)
            beyond = reach * rate
            # Paused on its broker: nothing is written to tell the demand from, and no factor is
            # below 0, for a volume not held yet. The least factor applied is at least
            # MIN_FACTOR_FOR_DEMAND in the screen: a volume that passes it at that factor passes
            # it at any (most do), without the min. A volume held is judged whatever the screen
            # or the factor applied say: only its fill, not the factor, lets it go.
            if (
                factor < MIN_FACTOR_FOR_DEMAND
                or headroom * MIN_FACTOR_FOR_DEMAND >= beyond
                or headroom * max(min(trend.weights), MIN_FACTOR_FOR_DEMAND) >= beyond
            ) and key not in held:
                continue  # paused, or even at the least factor applied the demand leaves the reach
            estimate = self._estimate(trend, volume, rate)
            if estimate.factor < (1.0 if key in held else take_hold_below):
                at_risk[key] = estimate
        self._keep_unanswered(at_risk)
        self.rates = rates
        self._at_risk = at_risk
        return at_risk

    def _keep_unanswered(self, at_risk: dict[VolumeKey, TimeToFull]) -> None:
        """Add to the round's ``at_risk`` each volume held whose broker did not answer: it keeps
        its figures while its last observation is in the view (as its level verdict does), and
        stays held. Notes the observation each volume is held on."""
        trends, last_held_at = self._trends, self._held_at
        held_at: dict[VolumeKey, float] = {}
        for key in at_risk:
            held_at[key] = trends[key].times[-1]
        for key, estimate in self._at_risk.items():
            if (
                key not in at_risk
                and (trend := trends.get(key)) is not None
                and trend.times[-1] == last_held_at[key]
            ):
                at_risk[key], held_at[key] = estimate, last_held_at[key]
        self._held_at = held_at

    def estimate(self, volume: VolumeObservation) -> TimeToFull:
        """The fill rate, time to the hard limit and time factor of ``volume`` as the latest
        round left them (for reads)."""
        key = volume.key
        at_risk = self._at_risk.get(key)
        if at_risk is not None:
            return at_risk
        if key not in self.rates or volume.error is not None or not volume.capacity_known:
            return NOT_ESTIMATED
        rate = self.rates[key]
        return TimeToFull(
            rate,
            seconds_to_limit(volume.usable_bytes, hard_limit_bytes(self.policy, volume), rate),
            1.0,
        )

    def _estimate(self, trend: FillTrend, volume: VolumeObservation, rate: float) -> TimeToFull:
        times, factors = trend.times, trend.weights
        hard = hard_limit_bytes(self.policy, volume)
        seconds = seconds_to_limit(volume.usable_bytes, hard, rate)
        if _stopped(times, trend.usable):
            return TimeToFull(rate, seconds, 1.0)
        # The demand: the median, over every pair of observations at least half the trend
        # apart, of the bytes written between them over the factor applied between them (the
        # integral of the factors over the time: each pair weighs what was written against the
        # factor that let it through). Pairs that span half the trend or more weigh the bursts of
        # a throttled producer little; there are at most 36 of them, and only volumes that could
        # ask for a factor below 1 count them.
        usable, half = trend.usable, (len(times) + 1) // 2
        in_force = [0.0]
        for i in range(len(times) - 1):
            in_force.append(in_force[-1] + factors[i] * (times[i + 1] - times[i]))
        demand = median_of(
            [
                (usable[i] - usable[j])
                / max(in_force[j] - in_force[i], MIN_FACTOR_FOR_DEMAND * (times[j] - times[i]))
                for i in range(len(times) - half)
                for j in range(i + half, len(times))
            ]
        )
        if demand <= 0:
            return TimeToFull(rate, seconds, 1.0)
        target = max(volume.usable_bytes - hard, 0.0) / self.reach_seconds
        return TimeToFull(rate, seconds, min(1.0, target / demand))

    @property
    def at_risk(self) -> Mapping[VolumeKey, TimeToFull]:
        """The volumes whose time factor is below 1 as the latest round left them."""
        return self._at_risk

    def judged_by(
        self,
        policy: StoragePolicy,
        horizon_seconds: float,
        latest: Mapping[VolumeKey, VolumeObservation],
    ) -> HorizonRule:
        """What a rule with ``policy`` and ``horizon_seconds`` would hold now, on this rule's
        trends (what-if): each volume's trend replayed, an observation at a time with the factor
        applied when it was made, through the candidate's window, screen, band and target, as
        the candidate's own rule would have taken them round after round. ``latest``: each
        volume's latest observation (its capacity; a volume without one is left out). The
        replay starts where this rule's trend starts: a candidate whose trend window (a quarter
        of its horizon) is longer than this rule's sees only what this rule kept."""
        twin = HorizonRule(policy, horizon_seconds)
        rates: dict[VolumeKey, float | None] = {}
        at_risk: dict[VolumeKey, TimeToFull] = {}
        for key, trend in self._trends.items():
            volume = latest.get(key)
            if volume is None or not volume.capacity_known:
                continue
            replayed = twin._trends[key] = FillTrend(twin.window_seconds, MAX_TREND_OBSERVATIONS)
            held = twin._replay(replayed, trend, volume)
            rates[key] = replayed.fill_rate
            if held is not None:
                at_risk[key] = held
                twin._held_at[key] = replayed.times[-1]
        twin.rates = rates
        twin._at_risk = at_risk
        return twin

    def _replay(
        self, replayed: FillTrend, trend: FillTrend, volume: VolumeObservation
    ) -> TimeToFull | None:
        """Add ``trend``'s observations to ``replayed`` one by one, judging each as ``record``
        does; returns the figures the volume is held with after the last (None: not held)."""
        held: TimeToFull | None = None
        hard = hard_limit_bytes(self.policy, volume)
        reach = self.reach_seconds
        for at, usable, factor in zip(trend.times, trend.usable, trend.weights):
            replayed.add(at, usable, volume.total_bytes, factor)
            rate = replayed.fill_rate
            if rate is None or rate <= 0:
                held = None
                continue
            headroom, beyond = usable - hard, reach * rate
            if held is None and (
                factor < MIN_FACTOR_FOR_DEMAND
                or headroom * max(min(replayed.weights), MIN_FACTOR_FOR_DEMAND) >= beyond
            ):
                continue
            observed = VolumeObservation(
                volume.broker_id, volume.log_dir, volume.total_bytes, int(usable), at
            )
            estimate = self._estimate(replayed, observed, rate)
            held = (
                estimate
                if estimate.factor < (1.0 if held is not None else self.take_hold_below)
                else None
            )
        return held

    def forget(self, keys: Iterable[VolumeKey]) -> None:
        """Drop the trends of volumes that left the view (bounded memory): called after ``record``,
        before the round's rates are handed on."""
        rates = self.rates if isinstance(self.rates, dict) else {}
        at_risk = self._at_risk if isinstance(self._at_risk, dict) else {}
        for key in keys:
            self._trends.pop(key, None)
            rates.pop(key, None)
            at_risk.pop(key, None)
            self._held_at.pop(key, None)
