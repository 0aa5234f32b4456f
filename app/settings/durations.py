"""ISO-8601 durations in the subset java.time.Duration accepts (PnDTnHnMn.nS), with ASCII
digits only, as Java reads them: a line copied from a broker's server.properties means the
same here (Python's \\d and float() would also take other scripts' digits)."""

from __future__ import annotations

import re
from datetime import timedelta

_DURATION = re.compile(
    r"^P(?:(?P<days>[0-9]+)D)?"
    r"(?:T(?:(?P<hours>[0-9]+)H)?(?:(?P<minutes>[0-9]+)M)?(?:(?P<seconds>[0-9]+(?:\.[0-9]{1,9})?)S)?)?$",
    re.IGNORECASE | re.ASCII,  # without ASCII, "ſ" (long s) would match "S"
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
