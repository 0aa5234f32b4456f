"""The throttle decision as served over HTTP: the response models and their assembly."""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.policy.limits import Evaluation, LimitKind, State, StoragePolicy, VolumeVerdict
from app.throttle.factor import FactorReading, FactorSource
from app.timefmt import iso_instant
from app.volumes.model import ObservationRound, VolumeObservation


class VolumeEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    broker_id: int
    log_dir: str
    total_bytes: int = Field(description="Volume capacity; -1 when the broker does not report it")
    usable_bytes: int = Field(description="Usable (available) bytes; -1 when not reported")
    available_ratio: float | None = Field(description="usable / total; null when not reported")
    observed_at: str
    factor: float = Field(description="The factor this volume asks for")
    reason: str = Field(description="Why the volume is listed: hard limit, soft limit, log dir error, ...")
    broker_fenced: bool = Field(
        False, description="The broker is registered but fenced (stopped or halted): this is its last observation, kept"
    )


class Limits(BaseModel):
    kind: Literal["min-available-bytes", "min-available-ratio"]
    hard: float = Field(description="Hard limit level: a volume at or below it pauses producers")
    soft: float | None = Field(description="Soft limit level: below it the factor ramps down; null when not set")
    hysteresis: float


class MissingBroker(BaseModel):
    broker_id: int
    reason: str


class FencedBroker(BaseModel):
    broker_id: int
    last_observed_at: str = Field(description="When the kept observation of this broker was made")
    log_dirs: int = Field(description="Log dirs of this broker kept in the view")


class RoundSummary(BaseModel):
    observed_at: str | None = Field(description="When the latest observation round finished")
    complete: bool = Field(description="Every active broker answered the latest round")
    missing_brokers: list[MissingBroker]
    error: str | None = Field(description="Why the latest round produced nothing, if it did not")


class ThrottleDecision(BaseModel):
    factor: float = Field(ge=0.0, le=1.0, description="Multiplier for the affected quotas")
    state: Literal["OPEN", "THROTTLE", "PAUSE"]
    source: Literal["observed", "last-valid", "fallback", "initial", "disabled"]
    computed_at: str | None = Field(description="When the factor in force was computed (for fallback: when it took over)")
    valid_until: str | None = Field(description="When this factor expires unless renewed; null for fallback/disabled")
    fallback_factor: float
    limits: Limits
    breaching: list[VolumeEntry]
    ramping: list[VolumeEntry]
    unjudged: list[VolumeEntry] = Field(description="Log dirs without TotalBytes/UsableBytes (-1), counted but not judged")
    active_brokers: int = Field(description="Brokers listed by DescribeCluster in the latest successful round")
    active_log_dirs: int = Field(description="Log dirs in the cached cluster view")
    fenced_brokers: list[FencedBroker] = Field(
        description="Registered but fenced brokers (stopped, or halted by a failed disk) whose last observation is in the view"
    )
    round: RoundSummary

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "factor": 0.0,
                    "state": "PAUSE",
                    "source": "observed",
                    "computed_at": "2026-11-21T16:40:00.000Z",
                    "valid_until": "2026-11-21T16:45:00.000Z",
                    "fallback_factor": 1.0,
                    "limits": {"kind": "min-available-bytes", "hard": 8388608, "soft": None, "hysteresis": 0},
                    "breaching": [
                        {
                            "broker_id": 2,
                            "log_dir": "/var/lib/kafka/data",
                            "total_bytes": 67108864,
                            "usable_bytes": 4194304,
                            "available_ratio": 0.0625,
                            "observed_at": "2026-11-21T16:40:00.000Z",
                            "factor": 0.0,
                            "reason": "hard limit",
                        }
                    ],
                    "ramping": [],
                    "unjudged": [],
                    "active_brokers": 3,
                    "active_log_dirs": 3,
                    "fenced_brokers": [],
                    "round": {"observed_at": "2026-11-21T16:40:00.000Z", "complete": True, "missing_brokers": [], "error": None},
                }
            ]
        }
    )


def volume_entry(verdict: VolumeVerdict, fenced: Collection[int] = ()) -> VolumeEntry:
    volume = verdict.volume
    return VolumeEntry(
        broker_id=volume.broker_id,
        log_dir=volume.log_dir,
        total_bytes=volume.total_bytes,
        usable_bytes=volume.usable_bytes,
        available_ratio=volume.available_ratio,
        observed_at=iso_instant(volume.observed_at) or "",
        factor=verdict.factor,
        reason=verdict.reason,
        broker_fenced=volume.broker_id in fenced,
    )


def fenced_brokers(fenced: Collection[VolumeObservation]) -> list[FencedBroker]:
    by_broker: dict[int, list[VolumeObservation]] = {}
    for volume in fenced:
        by_broker.setdefault(volume.broker_id, []).append(volume)
    return [
        FencedBroker(
            broker_id=broker_id,
            last_observed_at=iso_instant(min(v.observed_at for v in volumes)) or "",
            log_dirs=len(volumes),
        )
        for broker_id, volumes in sorted(by_broker.items())
    ]


def limits_of(policy: StoragePolicy) -> Limits:
    return Limits(
        kind="min-available-bytes" if policy.kind is LimitKind.MIN_AVAILABLE_BYTES else "min-available-ratio",
        hard=policy.hard_level,
        soft=policy.soft_level,
        hysteresis=policy.hysteresis,
    )


def assemble(
    reading: FactorReading,
    policy: StoragePolicy,
    fallback: float,
    evaluation: Evaluation | None,
    latest_round: ObservationRound | None,
    active_brokers: int,
    active_log_dirs: int,
    fenced: Collection[VolumeObservation] = (),
) -> ThrottleDecision:
    show_volumes = evaluation is not None and reading.source is not FactorSource.DISABLED
    round_summary = RoundSummary(
        observed_at=iso_instant(latest_round.finished_at) if latest_round else None,
        complete=latest_round.complete if latest_round else False,
        missing_brokers=[
            MissingBroker(broker_id=b, reason=r) for b, r in sorted((latest_round.missing_brokers if latest_round else {}).items())
        ],
        error=latest_round.error if latest_round else None,
    )
    fenced_ids = {volume.broker_id for volume in fenced}
    return ThrottleDecision(
        factor=reading.factor,
        state=State.of(reading.factor).value,
        source=reading.source.value,
        computed_at=iso_instant(reading.computed_at),
        valid_until=iso_instant(reading.valid_until),
        fallback_factor=fallback,
        limits=limits_of(policy),
        breaching=[volume_entry(v, fenced_ids) for v in evaluation.breaching] if show_volumes else [],
        ramping=[volume_entry(v, fenced_ids) for v in evaluation.ramping] if show_volumes else [],
        unjudged=[volume_entry(v, fenced_ids) for v in evaluation.unjudged] if show_volumes else [],
        active_brokers=active_brokers,
        active_log_dirs=active_log_dirs,
        fenced_brokers=fenced_brokers(fenced) if show_volumes else [],
        round=round_summary,
    )
