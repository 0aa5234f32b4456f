"""Instants on the wire: RFC 3339 / ISO-8601 UTC with millisecond precision."""

from __future__ import annotations

import functools
from datetime import UTC, datetime


# A view of thousands of volumes repeats a few instants (a round's observed_at, the expiries):
# each is formatted once.
@functools.lru_cache(maxsize=4096)
def iso_instant(epoch_seconds: float | None) -> str | None:
    if epoch_seconds is None:
        return None
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
