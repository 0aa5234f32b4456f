"""The levels at which a node's volumes change the decision, for the shims (``report_on`` in GET
/quotas): a shim samples its log dirs' file stores often and sends a report at once when one of
them crosses such a level, instead of waiting for its poll interval or the next round.

- The data limit's levels (hard, then soft when set) and hysteresis, in the limit's kind; the
  metadata limit's, when one is set. The shim judges a dir by what it holds.
- The time-to-full take-hold levels (app/decision/horizon.py): per volume whose fill rate is
  known and whose time to its hard limit is within ``TAKE_HOLD_HORIZONS`` horizons, the usable
  bytes below which the rule would take hold of it at that rate,
  ``hard level in bytes + (horizon + Kafka's quota window) x rate`` (the rule holds a volume
  whose factor ``(usable - hard) / reach / demand`` is below ``(horizon + window) / reach``;
  unthrottled, the demand is the fill rate). Volumes the rule already holds are left out: their
  reports matter through ``move_share``. At most ``MAX_TAKE_HOLD`` entries, the nearest to
  their hard limit first.

The take-hold levels move with the fill rates, every round. Every change of ``report_on`` is a
change of /quotas' ETag, which wakes every long-polling shim, so a published level is kept
while it stays within ``KEEP_SHARE`` of its own height above the hard level and its volume
within ``KEEP_HORIZONS`` horizons of full: a fill at a steady rate publishes its level once.
Computed once per round (per new mapping of rates), when a decision is published, never per
request."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from app.decision.horizon import KAFKA_QUOTA_WINDOW_SECONDS, HorizonRule
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import VolumeKey, VolumeObservation

# A shim reports when a volume's usable bytes moved by more than this share of its total since
# the report it last sent (at most one such report a second; a crossing is never held back).
MOVE_SHARE = 0.01
# Volumes whose time to their hard limit is within this many horizons get a take-hold level.
TAKE_HOLD_HORIZONS = 2.0
# A published level is kept while its volume stays within this many horizons of full...
KEEP_HORIZONS = 3.0
# ... and the level computed now is within this share of its height above the hard level.
KEEP_SHARE = 0.1
# The most take-hold levels one body carries (about 60 bytes each).
MAX_TAKE_HOLD = 2000

NO_TAKE_HOLD: Mapping[VolumeKey, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class LimitLevels:
    """One limit as the shims compare with it: kind, levels (hard first, then soft) and
    hysteresis, in the kind's unit (bytes, or usable/total)."""

    kind: LimitKind
    levels: tuple[float, ...]
    hysteresis: float

    @classmethod
    def of(cls, policy: StoragePolicy) -> LimitLevels:
        levels = (
            (policy.hard_level,)
            if policy.soft_level is None
            else (policy.hard_level, policy.soft_level)
        )
        return cls(policy.kind, levels, policy.hysteresis)


@dataclass(frozen=True, slots=True)
class ReportOn:
    """What a shim is told to report on (the contract of ``report_on``)."""

    data: LimitLevels
    metadata: LimitLevels | None
    move_share: float
    min_interval_ms: int
    take_hold: Mapping[VolumeKey, int]  # usable bytes, per (broker id, log dir)
    burst: int = 1  # reports a node may send in a row before min_interval_ms paces them


def take_hold_levels(
    horizon: HorizonRule,
    volumes: Iterable[VolumeObservation],
    published: Mapping[VolumeKey, int] = NO_TAKE_HOLD,
) -> dict[VolumeKey, int]:
    """The take-hold level of each volume that needs one now (see the module's text); a level in
    ``published`` is kept while close enough to the one computed now."""
    rates, held = horizon.rates, horizon.at_risk
    horizon_seconds = horizon.horizon_seconds
    ahead = horizon_seconds + KAFKA_QUOTA_WINDOW_SECONDS
    new_within = TAKE_HOLD_HORIZONS * horizon_seconds
    kept_within = KEEP_HORIZONS * horizon_seconds
    by_ratio = horizon.policy.kind is LimitKind.MIN_AVAILABLE_RATIO
    hard_level = horizon.policy.hard_level
    candidates: list[tuple[float, VolumeKey, int]] = []
    # Every volume, once a round: kept inline and small (5 ms at 12,000 volumes all filling).
    for volume in volumes:
        key = (volume.broker_id, volume.log_dir)
        rate = rates.get(key)
        if rate is None or rate <= 0 or key in held:
            continue
        total, usable = volume.total_bytes, volume.usable_bytes
        if volume.error is not None or total < 0 or usable < 0:
            continue
        hard = hard_level * total if by_ratio else hard_level
        seconds = (usable - hard) / rate
        kept = published.get(key)
        if seconds <= 0 or seconds > (new_within if kept is None else kept_within):
            continue
        level = hard + ahead * rate
        if kept is not None and abs(level - kept) <= KEEP_SHARE * (kept - hard):
            candidates.append((seconds, key, kept))
        else:
            candidates.append((seconds, key, int(level)))
    if len(candidates) > MAX_TAKE_HOLD:
        candidates.sort()
        del candidates[MAX_TAKE_HOLD:]
    return {key: level for _, key, level in candidates}


class ReportLevels:
    """The ``report_on`` of each publication: the limits' levels are fixed; the take-hold levels
    are computed when the horizon rule has new rates (once a round) and kept otherwise, so that a
    publication between rounds (a node report, a quota change, an expiry) costs nothing here."""

    def __init__(
        self,
        policy: StoragePolicy,
        metadata_policy: StoragePolicy | None,
        min_interval_ms: int,
        move_share: float = MOVE_SHARE,
        burst: int = 1,
    ) -> None:
        self._current = ReportOn(
            LimitLevels.of(policy),
            None if metadata_policy is None else LimitLevels.of(metadata_policy),
            move_share,
            min_interval_ms,
            NO_TAKE_HOLD,
            burst,
        )
        self._rates_seen: object = None

    def current(
        self,
        horizon: HorizonRule | None,
        volumes: Callable[[], Iterable[VolumeObservation]],
    ) -> ReportOn:
        """The ``report_on`` to publish now: the same object as last time unless it changed."""
        if horizon is None:
            if self._current.take_hold:
                self._current = replace(self._current, take_hold=NO_TAKE_HOLD)
            return self._current
        if horizon.rates is self._rates_seen:
            return self._current
        self._rates_seen = horizon.rates
        published = self._current.take_hold
        levels = take_hold_levels(horizon, volumes(), published) if horizon.rates else {}
        if levels != published:
            self._current = replace(self._current, take_hold=MappingProxyType(levels))
        return self._current
