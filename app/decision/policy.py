"""Storage limits and the throttle factor they imply. Pure functions, no I/O.

- Hard limit (proposal 047): a volume breaches when usable bytes <= level (bytes kind) or
  usable/total <= level (ratio kind). Breaching gives factor 0.0.
- Soft limit ("Re-thinking the quota plug-in"): strictly looser than the hard limit; between
  the two the factor ramps linearly from 1.0 at the soft level to 0.0 at the hard level.
- Hysteresis: a volume that breached stays breaching until it is above level + hysteresis.
- A log dir reported with an error is treated as breaching (an offline disk must never make
  the cluster look healthier); a log dir without capacity figures (-1) cannot be judged and
  is reported as such.
- Time to full (optional, app/decision/horizon.py): a volume that would reach its hard limit
  within the horizon asks for the factor that keeps the horizon left; a volume's factor is
  the least of its level factor and its time factor, and the reason names the rule that set it.
- The cluster factor is the minimum over all volumes: the largest delay wins.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.decision.fill_rate import TimeToFull
from app.observation.model import VolumeKey, VolumeObservation


class LimitKind(str, enum.Enum):
    MIN_AVAILABLE_BYTES = "min-available-bytes"
    MIN_AVAILABLE_RATIO = "min-available-ratio"


class State(str, enum.Enum):
    OPEN = "OPEN"
    THROTTLE = "THROTTLE"
    PAUSE = "PAUSE"

    @classmethod
    def of(cls, factor: float) -> State:
        if factor >= 1.0:
            return cls.OPEN
        if factor <= 0.0:
            return cls.PAUSE
        return cls.THROTTLE


@dataclass(frozen=True)
class StoragePolicy:
    kind: LimitKind
    hard_level: float
    soft_level: float | None = None
    hysteresis: float = 0.0

    def __post_init__(self) -> None:
        if self.soft_level is not None and self.soft_level <= self.hard_level:
            raise ValueError("the soft limit must be strictly looser than the hard limit")
        if self.hysteresis < 0:
            raise ValueError("hysteresis must not be negative")

    @property
    def ok_above(self) -> float:
        """Above this (in the limit's unit) a judged volume is ok whatever it was before: past
        the hard level and its hysteresis, and past the soft level. The common case, which the
        evaluation and a node report's data dirs decide without a verdict."""
        soft = self.soft_level
        return max(self.hard_level + self.hysteresis, soft if soft is not None else self.hard_level)

    def measure(self, total_bytes: int, usable_bytes: int) -> float:
        """A volume's room in the limit's unit: its usable bytes, or usable / total."""
        if self.kind is LimitKind.MIN_AVAILABLE_BYTES:
            return float(usable_bytes)
        return usable_bytes / total_bytes if total_bytes > 0 else 0.0


class VolumeStatus(str, enum.Enum):
    OK = "ok"
    RAMPING = "ramping"
    BREACHING = "breaching"
    UNJUDGED = "unjudged"


@dataclass(frozen=True, slots=True)
class VolumeVerdict:
    volume: VolumeObservation
    status: VolumeStatus
    factor: float
    reason: str  # the rule that set the factor: "hard limit", "soft limit", "time to full", ...
    time_to_full: TimeToFull | None = None  # with a horizon, when the volume's time is at risk


@dataclass(frozen=True)
class Evaluation:
    """The cluster-wide result of applying the policy to every known volume."""

    factor: float
    breaching: tuple[VolumeVerdict, ...]
    ramping: tuple[VolumeVerdict, ...]
    unjudged: tuple[VolumeVerdict, ...]
    volume_count: int

    @property
    def breaching_keys(self) -> frozenset[VolumeKey]:
        return frozenset(v.volume.key for v in self.breaching)


TIME_TO_FULL = "time to full"
# The rules that can set a factor, as the history names them; a verdict's reason starts with one.
FACTOR_RULES = ("hard limit", "soft limit", TIME_TO_FULL, "log dir error")


def rule_of(reason: str | None) -> str | None:
    """The rule a verdict's reason names ("hard limit (hysteresis)" is the hard limit's; "log
    dir error KAFKA_STORAGE_ERROR" a log dir error's); None for a volume no rule slows."""
    if reason:
        for rule in FACTOR_RULES:
            if reason.startswith(rule):
                return rule
    return None


def judge_volume(
    policy: StoragePolicy,
    volume: VolumeObservation,
    was_breaching: bool = False,
    time_to_full: TimeToFull | None = None,
) -> VolumeVerdict:
    """The factor one volume asks for, and why."""
    verdict = _judge_level(policy, volume, was_breaching)
    if (
        time_to_full is not None
        and time_to_full.factor < verdict.factor
        and verdict.status is not VolumeStatus.UNJUDGED
    ):
        return VolumeVerdict(
            volume, VolumeStatus.RAMPING, time_to_full.factor, TIME_TO_FULL, time_to_full
        )
    return verdict


_new_verdict = object.__new__
_set_volume, _set_status, _set_factor, _set_reason, _set_time_to_full = (
    getattr(VolumeVerdict, name).__set__
    for name in ("volume", "status", "factor", "reason", "time_to_full")
)
_OK = VolumeStatus.OK


def ok_verdict(volume: VolumeObservation) -> VolumeVerdict:
    """``VolumeVerdict(volume, VolumeStatus.OK, 1.0, "")``, its slots set through their
    descriptors (a node report's metadata volume is judged at every report)."""
    verdict = _new_verdict(VolumeVerdict)
    _set_volume(verdict, volume)
    _set_status(verdict, _OK)
    _set_factor(verdict, 1.0)
    _set_reason(verdict, "")
    _set_time_to_full(verdict, None)
    return verdict


def _judge_level(
    policy: StoragePolicy, volume: VolumeObservation, was_breaching: bool
) -> VolumeVerdict:
    if volume.error is not None:
        return VolumeVerdict(volume, VolumeStatus.BREACHING, 0.0, f"log dir error {volume.error}")
    if not volume.capacity_known:
        return VolumeVerdict(
            volume, VolumeStatus.UNJUDGED, 1.0, "total/usable bytes not reported (-1)"
        )
    measured = policy.measure(volume.total_bytes, volume.usable_bytes)
    release_level = policy.hard_level + policy.hysteresis if was_breaching else policy.hard_level
    if measured <= release_level:
        reason = "hard limit" if measured <= policy.hard_level else "hard limit (hysteresis)"
        return VolumeVerdict(volume, VolumeStatus.BREACHING, 0.0, reason)
    soft = policy.soft_level
    if soft is not None and measured <= soft:
        factor = (measured - policy.hard_level) / (soft - policy.hard_level)
        return VolumeVerdict(volume, VolumeStatus.RAMPING, min(1.0, factor), "soft limit")
    return VolumeVerdict(volume, VolumeStatus.OK, 1.0, "")


def evaluate(
    policy: StoragePolicy,
    volumes: Iterable[VolumeObservation],
    previously_breaching: frozenset[VolumeKey] = frozenset(),
    times_to_full: Mapping[VolumeKey, TimeToFull] | None = None,
) -> Evaluation:
    """Apply the policy to every volume; the cluster factor is the minimum. ``times_to_full``
    holds the volumes the horizon rule would slow (none without a horizon)."""
    factor = 1.0
    breaching: list[VolumeVerdict] = []
    ramping: list[VolumeVerdict] = []
    unjudged: list[VolumeVerdict] = []
    count = 0
    kind_is_bytes = policy.kind is LimitKind.MIN_AVAILABLE_BYTES
    # The common case (a healthy, judged volume) is decided inline: at 12,000 volumes the
    # per-volume call of judge_volume would dominate the evaluation time.
    quick_ok_above = policy.ok_above
    for volume in volumes:
        count += 1
        if volume.error is None and volume.total_bytes >= 0 and volume.usable_bytes >= 0:
            measured: float
            if kind_is_bytes:
                measured = volume.usable_bytes
            else:
                measured = (
                    volume.usable_bytes / volume.total_bytes if volume.total_bytes > 0 else 0.0
                )
            if measured > quick_ok_above and (not times_to_full or volume.key not in times_to_full):
                continue
        key = volume.key
        verdict = judge_volume(
            policy,
            volume,
            key in previously_breaching,
            times_to_full.get(key) if times_to_full else None,
        )
        if verdict.status is VolumeStatus.BREACHING:
            breaching.append(verdict)
        elif verdict.status is VolumeStatus.RAMPING:
            ramping.append(verdict)
        elif verdict.status is VolumeStatus.UNJUDGED:
            unjudged.append(verdict)
        factor = min(factor, verdict.factor)
    order = lambda v: v.volume.key  # noqa: E731 - stable output for clients and ETags
    return Evaluation(
        factor=factor,
        breaching=tuple(sorted(breaching, key=order)),
        ramping=tuple(sorted(ramping, key=order)),
        unjudged=tuple(sorted(unjudged, key=order)),
        volume_count=count,
    )


def policy_from_levels(
    min_available_bytes: int | None,
    min_available_ratio: float | None,
    soft_bytes: int | None = None,
    soft_ratio: float | None = None,
    hysteresis_bytes: int | None = None,
    hysteresis_ratio: float | None = None,
) -> StoragePolicy:
    """Build the policy from the configured levels (validated by the settings beforehand)."""
    if min_available_bytes is not None:
        return StoragePolicy(
            LimitKind.MIN_AVAILABLE_BYTES,
            float(min_available_bytes),
            None if soft_bytes is None else float(soft_bytes),
            float(hysteresis_bytes or 0),
        )
    if min_available_ratio is None:
        raise ValueError("exactly one hard limit is required")
    return StoragePolicy(
        LimitKind.MIN_AVAILABLE_RATIO, min_available_ratio, soft_ratio, hysteresis_ratio or 0.0
    )
