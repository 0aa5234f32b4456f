"""The enforcement in force, as one source the loop is built with: the settings' enforcement
until the quota store is open, then the store's (changed at run time with /enforcement), and the
settings' again once the store closes. Every decision carries it, and the time-to-full rule reads
from it the factor the shims applied (1 where they do not enforce: shadow mode, brokers outside
the canary list)."""

from __future__ import annotations

from collections.abc import Callable

from app.decision.enforcement import Enforcement
from app.decision.horizon import AppliedFactor


class EnforcementInForce:
    def __init__(self, initial: Enforcement) -> None:
        self._initial = initial
        self._current: Callable[[], Enforcement] = lambda: initial

    def __call__(self) -> Enforcement:
        return self._current()

    def follow(self, current: Callable[[], Enforcement]) -> None:
        """Take the enforcement from ``current`` (the quota service's) from now on."""
        self._current = current

    def reset(self) -> None:
        """Back to the settings' enforcement (the quota store closed)."""
        self._current = lambda: self._initial

    def applied_factor(self, factor: float) -> AppliedFactor:
        """What the shims apply of ``factor``, broker by broker, under the enforcement in force."""
        return AppliedFactor.under(factor, self())
