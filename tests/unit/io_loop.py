"""Driving the admin client's IO loop in the unit tests of its selector and transport."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def run_until(net: Any, until: Callable[[], object], seconds: float = 2.0, poll_ms: int = 20) -> None:
    """Poll ``net`` (a kafka-python NetworkSelector) until ``until()`` holds or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not until() and time.monotonic() < deadline:
        net.poll(timeout_ms=poll_ms)
