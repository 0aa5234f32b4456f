"""Numbers as people read them: bytes in binary units, durations in days, hours, minutes and
seconds, and exact seconds as a plain decimal (for a tooltip)."""

from __future__ import annotations

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(value: float) -> str:
    for unit in BYTE_UNITS:
        if abs(value) < 1024 or unit == BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def human_duration(seconds: float | None) -> str:
    """Two units at most, rounded to the smaller one: 42 s, 4 min 20 s, 1 h 25 min, 3 d 19 h."""
    if seconds is None:
        return ""
    seconds = float(seconds)
    if seconds < 10:
        return f"{seconds:.1f}".removesuffix(".0") + " s"
    if round(seconds) < 60:
        return f"{round(seconds)} s"
    if round(seconds) < 3600:
        return _two(*divmod(round(seconds), 60), "min", "s")
    if round(seconds / 60) < 24 * 60:
        return _two(*divmod(round(seconds / 60), 60), "h", "min")
    return _two(*divmod(round(seconds / 3600), 24), "d", "h")


def _two(large: int, small: int, large_unit: str, small_unit: str) -> str:
    return f"{large} {large_unit} {small} {small_unit}" if small else f"{large} {large_unit}"


def plain_decimal(value: float, places: int = 6) -> str:
    """2420.398, 10485760, 0.05: no exponent, no float noise past ``places``, no trailing zeros."""
    text = f"{value:.{places}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def exact_seconds(seconds: float) -> str:
    return f"{plain_decimal(seconds)} s"
