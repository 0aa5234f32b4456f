"""Whether the decision bites: enforced on every broker, on canary brokers only, or nowhere
(shadow). Pure: the service publishes it with every decision and each broker's shim applies it
to itself.

- ``enforce`` with no canary brokers: every broker's shim applies the factor.
- ``enforce`` with canary brokers: only the listed brokers apply it; the others stay in shadow.
- ``shadow``: no broker applies it (the canary list is kept for the next switch to enforce).

A shim in shadow applies its quotas unscaled (static and kafka-configs quotas still hold) and
reports what it would have applied. A shim that cannot reach the service applies its own
fallback whatever the mode was: the fallback is the operator's choice for outages."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from app.redaction import quoted


class EnforcementMode(str, enum.Enum):
    ENFORCE = "enforce"
    SHADOW = "shadow"


MODE_NAMES = tuple(mode.value for mode in EnforcementMode)


@dataclass(frozen=True, slots=True)
class Enforcement:
    mode: EnforcementMode = EnforcementMode.ENFORCE
    canary_brokers: tuple[int, ...] = ()  # sorted, distinct; empty: every broker

    @classmethod
    def of(cls, mode: str | EnforcementMode, canary_brokers: Iterable[int] = ()) -> Enforcement:
        return cls(EnforcementMode(mode), tuple(sorted(set(canary_brokers))))

    @property
    def enforced(self) -> bool:
        """Whether enforcement is on: on every broker, or on the canary brokers."""
        return self.mode is EnforcementMode.ENFORCE

    def enforces(self, broker_id: int) -> bool:
        """Whether the shim of ``broker_id`` applies the factor."""
        return self.enforced and (not self.canary_brokers or broker_id in self.canary_brokers)

    def describe(self) -> str:
        if not self.enforced:
            return "shadow (no broker enforces)"
        if self.canary_brokers:
            return (
                "enforce on canary brokers "
                + ", ".join(map(str, self.canary_brokers))
                + " (the others in shadow)"
            )
        return "enforce (every broker)"


ENFORCE_EVERYWHERE = Enforcement()


def parse_broker_ids(text: str) -> tuple[int, ...]:
    """Comma-separated broker ids (non-negative integers); raises ValueError naming the bad entry."""
    ids = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        if not entry.isascii() or not entry.isdigit():
            raise ValueError(f"{quoted(entry)} is not a broker id (a non-negative integer)")
        ids.append(int(entry))
    return tuple(sorted(set(ids)))
