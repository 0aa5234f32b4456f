"""What changed in the decision from one moment to the next, said once: a change of state, a
fallback taking over or lifting. Pure: it compares decisions and returns the lines to log."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.decision.decision import Decision
from app.decision.factor import FactorSource
from app.timefmt import iso_instant

SHOWN_VOLUMES = 5


@dataclass(frozen=True, slots=True)
class DecisionChange:
    level: int
    message: str
    fields: Mapping[str, object] = field(
        default_factory=dict
    )  # the line's facts, for structured logs


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
                        {
                            "event": "fallback_applied",
                            "factor": decision.factor,
                            "source": decision.source.value,
                        },
                    )
                )
            elif before is not None and before.source is FactorSource.FALLBACK:
                changes.append(
                    DecisionChange(
                        logging.INFO,
                        f"fallback lifted: factor source is {decision.source.value}",
                        {
                            "event": "fallback_lifted",
                            "factor": decision.factor,
                            "source": decision.source.value,
                        },
                    )
                )
        if before is None or before.state is not decision.state:
            detail = describe_volumes(decision)
            changes.append(
                DecisionChange(
                    logging.WARNING,
                    f"state {before.state.value if before else 'none'} -> {decision.state.value}: "
                    f"factor {decision.factor:.3f} ({decision.source.value}){f': {detail}' if detail else ''}",
                    {
                        "event": "state_change",
                        "previous_state": before.state.value if before else None,
                        "state": decision.state.value,
                        "factor": decision.factor,
                        "source": decision.source.value,
                        "volumes": [
                            {
                                "broker_id": v.volume.broker_id,
                                "log_dir": v.volume.log_dir,
                                "reason": v.reason,
                            }
                            for v in decision.listed[:SHOWN_VOLUMES]
                        ],
                    },
                )
            )
        return changes, fallback_took_over
