"""Axis ticks at round values: times on round minutes, hours or days (UTC), with the date
written once per day; bytes on round binary units; durations on round minutes or hours."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from spark.page.units import BYTE_UNITS

MINUTE, HOUR, DAY = 60, 3600, 86400
_TIME_STEPS = (
    1, 2, 5, 10, 15, 30,
    MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
    HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
    DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY,
)  # fmt: skip
_DURATION_STEPS = (
    MINUTE,
    2 * MINUTE,
    5 * MINUTE,
    10 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    3 * HOUR,
    4 * HOUR,
    6 * HOUR,
)
_MANTISSAS = (1, 2, 2.5, 5)
# Ticks a week or more apart fall on Mondays (the epoch, 1970-01-01, was a Thursday).
_MONDAY = 4 * DAY


@dataclass(frozen=True)
class TimeTick:
    t: float  # epoch seconds
    label: str  # 23:30, or 03-14 when the ticks are days apart
    date: str | None  # 2026-03-14 at the first tick of each day (of each year for daily ticks)


def time_ticks(first: float, last: float, most: int) -> list[TimeTick]:
    """Ticks on round UTC instants between ``first`` and ``last``, at most ``most`` of them."""
    step = next(
        (s for s in _TIME_STEPS if len(_multiples(first, last, s)) <= max(most, 2)), _TIME_STEPS[-1]
    )
    ticks, previous = [], None
    period: object  # a day or, with steps of days, a year
    for t in _multiples(first, last, step):
        moment = datetime.fromtimestamp(t, tz=UTC)
        if step < MINUTE:
            label, period = moment.strftime("%H:%M:%S"), moment.date()
        elif step < DAY:
            label, period = moment.strftime("%H:%M"), moment.date()
        else:
            label, period = moment.strftime("%m-%d"), moment.year
        date = None
        if period != previous:
            date = moment.strftime("%Y-%m-%d") if step < DAY else str(moment.year)
        ticks.append(TimeTick(t, label, date))
        previous = period
    return ticks


def _multiples(first: float, last: float, step: int) -> range:
    """The instants from ``first`` to ``last`` that are whole multiples of ``step`` (from a
    Monday, for steps of a week or more)."""
    offset = _MONDAY if step >= 7 * DAY else 0
    return range(
        math.ceil((first - offset) / step) * step + offset,
        math.floor((last - offset) / step) * step + offset + 1,
        step,
    )


def byte_ticks(top: float, most: int = 6) -> list[tuple[float, str]]:
    """(bytes, label) from 0 up to ``top`` on round steps of one binary unit: 0, 25 MiB, ..."""
    top = max(top, 1.0)
    exponent = min(int(math.log(top, 1024)), len(BYTE_UNITS) - 1)
    if exponent > 0 and top / 1024**exponent < 2:  # 1 TiB: 200 GiB steps, not 0.2 TiB
        exponent -= 1
    unit = 1024**exponent
    in_units = top / unit
    step = next(
        m * 10**p for p in range(-1, 5) for m in _MANTISSAS if in_units / (m * 10**p) <= most - 1
    )
    count = int(in_units / step + 1e-9)
    return [
        (i * step * unit, "0" if i == 0 else f"{i * step:g} {BYTE_UNITS[exponent]}")
        for i in range(count + 1)
    ]


def duration_ticks(longest: float, most: int = 5) -> list[tuple[float, str]]:
    """(seconds, label) from 0 to a round duration at or above ``longest``, in one unit:
    0, 15 min, 30 min, 45 min, 60 min; or 0, 6 h, 12 h, 18 h, 24 h."""
    step = next(
        (s for s in _DURATION_STEPS if math.ceil(longest / s) <= most - 1), _DURATION_STEPS[-1]
    )
    count = max(math.ceil(longest / step), 1)

    def label(seconds: float) -> str:
        return f"{seconds / MINUTE:g} min" if step < HOUR else f"{seconds / HOUR:g} h"

    return [(i * step, "0" if i == 0 else label(i * step)) for i in range(count + 1)]
