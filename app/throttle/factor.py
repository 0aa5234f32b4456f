"""The throttle factor lifecycle of Strimzi proposal 047: validity and fallback.

A successful evaluation yields a factor valid until its ``valid_until``. Failed or incomplete
rounds keep the last valid factor until it expires; then the fallback factor applies until
the next success. Expiry is judged when the factor is read, against an injectable clock,
never by a timer. At start-up the service behaves as if a factor of 1.0 had been computed at
that moment (as the Strimzi plugin does), so a restart never pauses a healthy cluster.

An incomplete round can still prove that a volume breaches; such a known factor caps the
reading (last valid or fallback) until the data behind it expires, so missing data never
makes the cluster look healthier than what was seen."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FactorSource(str, enum.Enum):
    OBSERVED = "observed"  # the latest round succeeded and produced this factor
    LAST_VALID = "last-valid"  # the latest round failed; the last valid factor still holds
    FALLBACK = "fallback"  # the last valid factor expired; the configured fallback applies
    INITIAL = "initial"  # no round has succeeded since start-up; 1.0 until the validity runs out
    DISABLED = "disabled"  # observation is switched off (check interval PT0S): always 1.0


@dataclass(frozen=True, slots=True)
class FactorReading:
    factor: float
    source: FactorSource
    computed_at: float | None
    valid_until: float | None
    # The earliest time at which this reading changes by itself (an expiry), if any.
    next_change_at: float | None


@dataclass(frozen=True, slots=True)
class _Valid:
    factor: float
    computed_at: float
    valid_until: float
    initial: bool = False


class ThrottleFactorHolder:
    def __init__(self, validity_seconds: float, fallback: float, started_at: float, enabled: bool = True) -> None:
        if validity_seconds <= 0:
            raise ValueError("validity must be positive")
        self._validity = validity_seconds
        self._fallback = fallback
        self._enabled = enabled
        self._last_valid = _Valid(1.0, started_at, started_at + validity_seconds, initial=True)
        self._latest_succeeded = True
        self._cap: tuple[float, float] | None = None  # (known factor, valid until)

    @property
    def validity_seconds(self) -> float:
        return self._validity

    def record_success(self, factor: float, computed_at: float, valid_until: float | None = None) -> None:
        until = computed_at + self._validity if valid_until is None else valid_until
        self._last_valid = _Valid(factor, computed_at, until)
        self._latest_succeeded = True
        self._cap = None

    def record_failure(self, known_factor: float | None = None, known_until: float | None = None) -> None:
        self._latest_succeeded = False
        if known_factor is not None and known_until is not None and known_factor < 1.0:
            self._cap = (known_factor, known_until)

    def read(self, now: float) -> FactorReading:
        if not self._enabled:
            return FactorReading(1.0, FactorSource.DISABLED, None, None, None)
        valid = self._last_valid
        if now <= valid.valid_until:
            if valid.initial:
                source = FactorSource.INITIAL
            else:
                source = FactorSource.OBSERVED if self._latest_succeeded else FactorSource.LAST_VALID
            reading = FactorReading(valid.factor, source, valid.computed_at, valid.valid_until, valid.valid_until)
        else:
            # The fallback has no expiry of its own; it started when the last factor expired.
            reading = FactorReading(self._fallback, FactorSource.FALLBACK, valid.valid_until, None, None)
        if self._cap is not None:
            cap_factor, cap_until = self._cap
            if now <= cap_until:
                next_change = cap_until if reading.next_change_at is None else min(cap_until, reading.next_change_at)
                if cap_factor < reading.factor:
                    valid_until = cap_until if reading.valid_until is None else min(cap_until, reading.valid_until)
                    reading = FactorReading(cap_factor, reading.source, reading.computed_at, valid_until, next_change)
                else:
                    reading = FactorReading(reading.factor, reading.source, reading.computed_at, reading.valid_until, next_change)
        return reading
