"""Time as the decision logic sees it: injectable, so validity and fallback are tested exactly."""

from __future__ import annotations

import time
from collections.abc import Callable

# Seconds since the epoch, as a float. Production uses time.time; tests pass their own.
Clock = Callable[[], float]

system_clock: Clock = time.time


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
