"""The throttle factor lifecycle of Strimzi proposal 047: validity and fallback.

A successful round yields a timeline of factors (one per set of observations still valid, see
app/decision/timeline.py), valid until its last observation expires. Failed or incomplete
rounds keep the last valid timeline until it ends; then the fallback factor applies until
the next success. Expiry is judged when the factor is read, against an injectable clock,
never by a timer. At start-up the service behaves as if a factor of 1.0 had been computed at
that moment (as the Strimzi plugin does), so a restart never pauses a healthy cluster.

An incomplete round can still prove that a volume breaches; such a known factor caps the
reading (last valid or fallback) until the data behind it expires, so missing data never
makes the cluster look healthier than what was seen."""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from app.decision.fill_rate import TimeToFull
from app.decision.policy import StoragePolicy
from app.decision.timeline import SteadyTimeline, Timeline
from app.observation.model import VolumeKey


class FactorSource(str, enum.Enum):
    OBSERVED = "observed"  # the latest round succeeded and produced this factor
    LAST_VALID = "last-valid"  # the latest round failed; the last valid factor still holds
    FALLBACK = "fallback"  # the last valid factor expired; the configured fallback applies
    INITIAL = "initial"  # no round has succeeded since start-up; 1.0 until the validity runs out
    DISABLED = "disabled"  # observation is switched off (check interval PT0S): always 1.0


# The members read at every node report, looked up once (an enum member read through its class
# costs a descriptor call: about ten times a global's read).
_OBSERVED, _LAST_VALID, _FALLBACK, _INITIAL, _DISABLED = (
    FactorSource.OBSERVED,
    FactorSource.LAST_VALID,
    FactorSource.FALLBACK,
    FactorSource.INITIAL,
    FactorSource.DISABLED,
)


@dataclass(frozen=True, slots=True)
class FactorReading:
    factor: float
    source: FactorSource
    computed_at: float | None
    valid_until: float | None
    # The earliest time at which this reading changes by itself (an expiry), if any.
    next_change_at: float | None
    # What CONTROLLER_MUTATION quotas are scaled by: the metadata volumes' factor (1 without
    # metadata limits, or with none of them in breach); app/decision/metadata.py.
    mutation_factor: float = 1.0


class ThrottleFactorHolder:
    def __init__(
        self, validity_seconds: float, fallback: float, started_at: float, enabled: bool = True
    ) -> None:
        if validity_seconds <= 0:
            raise ValueError("validity must be positive")
        self._validity = validity_seconds
        self._fallback = fallback
        self._enabled = enabled
        self._last_valid: Timeline = SteadyTimeline(1.0, started_at, started_at + validity_seconds)
        self._initial = True
        self._latest_succeeded = True
        self._known: Timeline | None = None  # what an incomplete or failed round still knew

    @property
    def validity_seconds(self) -> float:
        return self._validity

    @property
    def enabled(self) -> bool:
        return self._enabled

    def resumed(self) -> None:
        """The timelines were restored from an earlier process: what they say is last-valid for
        this one until its own round succeeds (an initial grace stays initial)."""
        self._latest_succeeded = False

    def record_success(self, timeline: Timeline) -> None:
        self._last_valid = timeline
        self._initial = False
        self._latest_succeeded = True
        self._known = None

    def record_failure(self, known: Timeline | None = None) -> None:
        """A round that failed or left an active broker without data. ``known`` is what the
        cached observations still say: it caps the reading while it lasts, so missing data
        never makes the cluster look healthier than what was seen."""
        self._latest_succeeded = False
        if known is not None:
            self._known = known

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None = None
    ) -> ThrottleFactorHolder:
        """A copy whose timelines (the last valid one, what a failed round still knew) are
        judged by ``policy`` with the time factors ``times_to_full``; the lifecycle (initial,
        failures, expiry, fallback) is this one's."""
        twin = copy.copy(self)
        known = self._known.judged_by(policy, times_to_full) if self._known is not None else None
        # a copy of this holder: its own private state, re-judged
        twin._last_valid = self._last_valid.judged_by(policy, times_to_full)  # noqa: SLF001
        twin._known = known  # noqa: SLF001
        return twin

    def _step_source(self) -> FactorSource:
        """Where a factor of the last valid timeline comes from while one is in force."""
        if self._initial:
            return _INITIAL
        return _OBSERVED if self._latest_succeeded else _LAST_VALID

    def factor_at(self, now: float) -> tuple[float, FactorSource]:
        """``read(now)``'s factor and source, without the times it gives: what every node
        report compares with what was last published."""
        if not self._enabled:
            return 1.0, _DISABLED
        step = self._last_valid.at(now)
        if step is None:
            factor, source = self._fallback, _FALLBACK
        else:
            factor, source = step.factor, self._step_source()
        known = self._known.at(now) if self._known is not None else None
        if known is not None and known.factor < factor:
            factor = known.factor
        return factor, source

    def read(self, now: float) -> FactorReading:
        if not self._enabled:
            return FactorReading(1.0, FactorSource.DISABLED, None, None, None)
        timeline = self._last_valid
        step = timeline.at(now)
        if step is not None:
            reading = FactorReading(
                step.factor,
                self._step_source(),
                step.start,
                timeline.factor_holds_until(now),
                timeline.next_change_after(now),
            )
        else:
            # The fallback has no expiry of its own; it started when the last factor expired.
            reading = FactorReading(self._fallback, FactorSource.FALLBACK, timeline.end, None, None)
        known = self._known.at(now) if self._known is not None else None
        if known is not None:
            assert self._known is not None
            change = self._known.next_change_after(now)
            next_change = (
                change
                if reading.next_change_at is None or change is None
                else min(change, reading.next_change_at)
            )
            if known.factor < reading.factor:
                known_until = self._known.factor_holds_until(now)
                assert known_until is not None  # a step is in force
                valid_until = (
                    known_until
                    if reading.valid_until is None
                    else min(known_until, reading.valid_until)
                )
                reading = FactorReading(
                    known.factor, reading.source, reading.computed_at, valid_until, next_change
                )
            else:
                reading = FactorReading(
                    reading.factor,
                    reading.source,
                    reading.computed_at,
                    reading.valid_until,
                    next_change,
                )
        return reading
