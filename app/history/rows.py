"""History rows of one observation round. Pure: no I/O, no clock."""

from __future__ import annotations

from typing import Any

from app.history.schema import FIELD_NAMES
from app.decision.decision import Decision
from app.decision.policy import VolumeStatus
from app.timefmt import iso_instant
from app.observation.model import ObservationRound

HistoryRow = dict[str, Any]


def round_rows(round_: ObservationRound, decision: Decision, check_interval_seconds: float) -> list[HistoryRow]:
    """One row per volume the round observed, or one row without a volume when it observed
    none; ``decision`` is the one the round led to."""
    evaluation = decision.evaluation
    verdicts = (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged) if evaluation else ()
    listed = {v.volume.key: v for v in verdicts}
    policy = decision.policy
    common = {
        "time": iso_instant(round_.finished_at),
        "limit_kind": policy.kind.value,
        "hard_limit": policy.hard_level,
        "soft_limit": policy.soft_level,
        "cluster_factor": decision.factor,
        "state": decision.state.value,
        "source": decision.source.value,
        "round_complete": round_.complete,
        "check_interval_seconds": check_interval_seconds,
    }
    rows: list[HistoryRow] = []
    for volume in round_.observations:
        verdict = listed.get(volume.key)
        rows.append(
            {
                **common,
                "broker_id": volume.broker_id,
                "log_dir": volume.log_dir,
                "total_bytes": volume.total_bytes,
                "usable_bytes": volume.usable_bytes,
                "available_ratio": volume.available_ratio,
                "log_dir_error": volume.error,
                "volume_status": verdict.status.value if verdict else VolumeStatus.OK.value,
                "volume_factor": verdict.factor if verdict else 1.0,
            }
        )
    if not rows:
        no_volume = dict.fromkeys(("broker_id", "log_dir", "total_bytes", "usable_bytes", "available_ratio", "log_dir_error", "volume_status", "volume_factor"))
        rows.append({**common, **no_volume})
    # The declared field order, so every line reads the same.
    return [{name: row[name] for name in FIELD_NAMES} for row in rows]
