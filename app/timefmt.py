"""Instants on the wire: RFC 3339 / ISO-8601 UTC with millisecond precision."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_instant(epoch_seconds: float | None) -> str | None:
    if epoch_seconds is None:
        return None
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
