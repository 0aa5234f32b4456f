"""ISO-8601 durations in the subset java.time.Duration accepts (PnDTnHnMn.nS)."""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(
    r"^P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d{1,9})?)S)?)?$",
    re.IGNORECASE,
)

DURATION_HINT = "an ISO-8601 duration such as PT30S, PT5M or P1DT2H (not negative)"


def parse_duration(text: str) -> timedelta:
    """Parse ``PT1M``-style durations; raise ValueError naming what is allowed."""
    match = _DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"expected {DURATION_HINT}")
    parts = {name: float(value) for name, value in match.groupdict().items() if value is not None}
    return timedelta(**parts)


def format_duration(value: timedelta) -> str:
    """The canonical ISO-8601 text of a duration, e.g. ``PT5M`` or ``PT0.5S``."""
    total = value.total_seconds()
    if total == 0:
        return "PT0S"
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = "PT"
    if hours:
        text += f"{int(hours)}H"
    if minutes:
        text += f"{int(minutes)}M"
    if seconds:
        text += f"{seconds:g}S"
    return text
