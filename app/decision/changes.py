"""What changed in the decision from one moment to the next, said once: a change of state, a
fallback taking over or lifting. Pure: it compares decisions and returns the lines to log."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.decision.decision import Decision
from app.decision.factor import FactorSource
from app.timefmt import iso_instant

SHOWN_VOLUMES = 5


@dataclass(frozen=True, slots=True)
class DecisionChange:
    level: int
    message: str


def describe_volumes(decision: Decision) -> str:
    listed = decision.listed
    shown = ", ".join(
        f"broker {v.volume.broker_id} {v.volume.log_dir} ({v.reason}, usable {v.volume.usable_bytes} of {v.volume.total_bytes})"
        for v in listed[:SHOWN_VOLUMES]
    )
    more = f" and {len(listed) - SHOWN_VOLUMES} more" if len(listed) > SHOWN_VOLUMES else ""
    return shown + more


class DecisionChanges:
    def __init__(self) -> None:
        self._last: Decision | None = None

    def after(self, decision: Decision) -> tuple[list[DecisionChange], bool]:
        """The lines to log since the last decision, and whether a fallback just took over."""
        before, self._last = self._last, decision
        changes: list[DecisionChange] = []
        fallback_took_over = False
        if before is None or before.source is not decision.source:
            if decision.source is FactorSource.FALLBACK:
                fallback_took_over = True
                changes.append(
                    DecisionChange(
                        logging.WARNING,
                        f"fallback factor {decision.factor:.3f} applied: no valid factor since {iso_instant(decision.reading.computed_at)}",
                    )
                )
            elif before is not None and before.source is FactorSource.FALLBACK:
                changes.append(DecisionChange(logging.INFO, f"fallback lifted: factor source is {decision.source.value}"))
        if before is None or before.state is not decision.state:
            detail = describe_volumes(decision)
            changes.append(
                DecisionChange(
                    logging.WARNING,
                    f"state {before.state.value if before else 'none'} -> {decision.state.value}: "
                    f"factor {decision.factor:.3f} ({decision.source.value}){f': {detail}' if detail else ''}",
                )
            )
        return changes, fallback_took_over
