"""Refusal lines that a client cannot turn into a flood: at most one per source and reason per
interval, the next one saying how many were left out in between, and every quoted request
part cut to a bounded prefix.

A client that sends ten thousand requests without a token, or ten thousand heads too large,
costs the log one line a minute, not ten thousand lines of its choosing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from app.redaction import printable

MAX_QUOTED_CHARS = 200
DEFAULT_INTERVAL_SECONDS = 60.0
# Sources remembered at once; past it, the ones whose interval has passed are forgotten (and,
# under a flood from more sources than that, all of them: a line too many is the lesser harm).
MAX_SOURCES = 10_000


def bounded(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """``text`` cut to ``limit`` characters, marked with "..." when cut."""
    return text if len(text) <= limit else text[:limit] + "..."


def quoted(text: str, limit: int = MAX_QUOTED_CHARS) -> str:
    """A bounded prefix of a request part in double quotes: a backslash and a double quote
    escaped (a value cannot close its quotes and forge the fields after it), its control
    characters by the rule of every echoed value (redaction.printable: ``\\r\\n``, ``\\x1b``,
    ``\\u2028``), so a hostile value stays on its line and colours nothing."""
    return '"' + printable(bounded(text, limit).replace("\\", "\\\\").replace('"', '\\"')) + '"'


class RefusalLog:
    """Whether a refusal of ``reason`` to ``source`` is logged now, and how many of them were
    left out since the last line."""

    def __init__(
        self,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval_seconds
        self.clock = clock
        self._last: dict[
            tuple[str, str], tuple[float, int]
        ] = {}  # (source, reason) -> (logged at, left out since)

    def admit(self, source: str, reason: str) -> int | None:
        """None when this refusal is left out; else the number left out before it."""
        now = self.clock()
        key = (source, reason)
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval:
            self._last[key] = (last[0], last[1] + 1)
            return None
        if last is None and len(self._last) >= MAX_SOURCES:
            self._forget_before(now - self.interval)
        self._last[key] = (now, 0)
        return 0 if last is None else last[1]

    def log(
        self,
        logger: logging.Logger,
        level: int,
        source: str,
        reason: str,
        message: str,
        *args: object,
        extra: dict[str, object] | None = None,
    ) -> None:
        """Log ``message % args`` unless a line of this source and reason was logged within the
        interval; a line after left-out ones says how many."""
        left_out = self.admit(source, reason)
        if left_out is None:
            return
        if left_out:
            extra = {**(extra or {}), "left_out": left_out}
            # Two templates joined, not a formatted message: the arguments are still formatted lazily.
            template = (
                message + " (%d more like it from this client left out since the previous line)"
            )
            logger.log(level, template, *args, left_out, extra=extra)
        else:
            logger.log(level, message, *args, extra=extra)

    def _forget_before(self, cutoff: float) -> None:
        self._last = {key: value for key, value in self._last.items() if value[0] >= cutoff}
        if len(self._last) >= MAX_SOURCES:
            self._last.clear()
