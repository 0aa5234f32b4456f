"""The throttle decision as served over HTTP: the response models, made from the domain's Decision."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field

from app.decision.decision import Decision
from app.decision.factor import FactorSource
from app.decision.fill_rate import TimeToFull
from app.decision.metadata import MetadataStep, MetadataVerdict
from app.decision.policy import LimitKind, State, StoragePolicy, VolumeStatus, VolumeVerdict
from app.observation.model import ObservationRound, VolumeObservation
from app.timefmt import iso_instant

# What a volume holds, as the API names it.
Holding = Literal["data", "metadata"]


class VolumeEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    broker_id: int
    log_dir: str
    total_bytes: int = Field(description="Volume capacity; -1 when the broker does not report it")
    usable_bytes: int = Field(description="Usable (available) bytes; -1 when not reported")
    available_ratio: float | None = Field(description="usable / total; null when not reported")
    observed_at: str
    factor: float = Field(description="The factor this volume asks for")
    reason: str = Field(
        description="Why the volume is listed: hard limit, soft limit, time to full, log dir error, ..."
    )
    fill_rate_bytes_per_second: float | None = Field(
        None,
        description="Net fill rate from the recent observations (positive while filling); null without a horizon or too few observations",
    )
    seconds_to_hard_limit: float | None = Field(
        None,
        description="Seconds until the hard limit at that rate; null without a horizon or while not filling",
    )
    broker_fenced: bool = Field(
        False,
        description="The broker is registered but fenced (stopped or halted): this is its last observation, kept",
    )
    holds: list[Holding] = Field(
        ["data"],
        description="What the volume holds: data (a log dir DescribeLogDirs reports, judged by the storage limits) or the "
        "metadata log (as the node's shim reports it, judged by the metadata limits; broker_id is then the node.id, a "
        "controller's too), or both (a metadata log dir on a data dir's volume)",
    )


class LimitLevels(BaseModel):
    kind: LimitKind
    hard: float = Field(description="Hard limit level: a volume at or below it pauses producers")
    soft: float | None = Field(
        description="Soft limit level: below it the factor ramps down; null when not set"
    )
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


class MetadataDecision(BaseModel):
    mutation_factor: float = Field(
        ge=0.0,
        le=1.0,
        description="Multiplier for CONTROLLER_MUTATION quotas (0: mutations refused)",
    )
    source: FactorSource = Field(
        description="observed: metadata volumes are in the view; initial: none reported yet since start-up (1.0 for one "
        "validity duration); fallback: none in the view since, so the fallback factor applies to mutations"
    )
    limits: LimitLevels | None = Field(
        description="The metadata limits; null when none is set (the factor is then always 1)"
    )
    breaching: list[VolumeEntry]
    ramping: list[VolumeEntry]
    reporting_nodes: list[int] = Field(
        description="The nodes whose report of their volumes is in the view"
    )


class ThrottleDecision(BaseModel):
    factor: float = Field(ge=0.0, le=1.0, description="Multiplier for the affected quotas")
    mutation_factor: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Multiplier for CONTROLLER_MUTATION quotas, set by the metadata volumes (see metadata); 1 without metadata limits",
    )
    state: State
    source: FactorSource
    computed_at: str | None = Field(
        description="When the factor in force was computed (for fallback: when it took over)"
    )
    valid_until: str | None = Field(
        description="When this factor expires unless renewed; null for fallback/disabled"
    )
    fallback_factor: float
    limits: LimitLevels
    breaching: list[VolumeEntry]
    ramping: list[VolumeEntry]
    unjudged: list[VolumeEntry] = Field(
        description="Log dirs without TotalBytes/UsableBytes (-1), counted but not judged"
    )
    active_brokers: int = Field(
        description="Brokers listed by DescribeCluster in the latest successful round"
    )
    active_log_dirs: int = Field(description="Log dirs in the cached cluster view")
    fenced_brokers: list[FencedBroker] = Field(
        description="Registered but fenced brokers (stopped, or halted by a failed disk) whose last observation is in the view"
    )
    round: RoundSummary
    rule: str | None = Field(
        None,
        description="The rule that set the factor: hard limit, soft limit, time to full (or a log dir error); null when open",
    )
    enforced: bool = Field(
        description="Whether enforcement is on: the brokers' shims apply this factor (all of them, or the canary_brokers); "
        "false in shadow mode, where every shim applies its quotas unscaled and reports what it would apply"
    )
    canary_brokers: list[int] = Field(
        description="When enforced, the only brokers whose shims apply the factor (the others stay in shadow); empty: every broker"
    )
    metadata: MetadataDecision | None = Field(
        None,
        description="The metadata log volumes the nodes report and the mutation factor they set; null while no metadata limit "
        "is set and no node reports. A metadata volume that also holds data lowers factor too",
    )
    resumed_from: str | None = Field(
        None,
        description="Set while this process has not completed a round of its own since it started: when the state it serves "
        "(kept observations, node reports, trends, the factor in force) was saved by the process before it; the factor is then "
        "served as last-valid. Null once a round of its own has been applied, or after a start from nothing",
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "factor": 0.0,
                    "mutation_factor": 1.0,
                    "state": "PAUSE",
                    "source": "observed",
                    "computed_at": "2026-11-21T16:40:00.000Z",
                    "valid_until": "2026-11-21T16:45:00.000Z",
                    "fallback_factor": 1.0,
                    "limits": {
                        "kind": "min-available-bytes",
                        "hard": 8388608,
                        "soft": None,
                        "hysteresis": 0,
                    },
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
                    "round": {
                        "observed_at": "2026-11-21T16:40:00.000Z",
                        "complete": True,
                        "missing_brokers": [],
                        "error": None,
                    },
                    "enforced": True,
                    "canary_brokers": [],
                }
            ]
        }
    )


def volume_entry(
    verdict: VolumeVerdict,
    fenced: Collection[int] = (),
    time_to_full: TimeToFull | None = None,
    holds: Collection[str] = ("data",),
) -> VolumeEntry:
    volume = verdict.volume
    estimate = time_to_full or verdict.time_to_full
    return VolumeEntry(
        broker_id=volume.broker_id,
        log_dir=volume.log_dir,
        total_bytes=volume.total_bytes,
        usable_bytes=volume.usable_bytes,
        available_ratio=volume.available_ratio,
        observed_at=iso_instant(volume.observed_at) or "",
        factor=verdict.factor,
        reason=verdict.reason,
        fill_rate_bytes_per_second=estimate.fill_rate if estimate else None,
        seconds_to_hard_limit=estimate.seconds_to_hard_limit if estimate else None,
        broker_fenced=volume.broker_id in fenced,
        # Names as the node reports give them (str); VolumeEntry's validation holds them to Holding.
        holds=cast("list[Holding]", sorted(holds)),
    )


def metadata_entry(volume: MetadataVerdict, fenced: Collection[int] = ()) -> VolumeEntry:
    return volume_entry(volume.verdict, fenced, holds=volume.entry.holds)


def metadata_decision(step: MetadataStep, policy: StoragePolicy | None) -> MetadataDecision | None:
    if policy is None and not step.volumes:
        return None
    return MetadataDecision(
        mutation_factor=step.mutation_factor,
        source=step.source,
        limits=limit_levels(policy) if policy is not None else None,
        breaching=[
            metadata_entry(v) for v in step.judged if v.verdict.status is VolumeStatus.BREACHING
        ],
        ramping=[
            metadata_entry(v) for v in step.judged if v.verdict.status is VolumeStatus.RAMPING
        ],
        reporting_nodes=step.reporting_nodes,
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


def limit_levels(policy: StoragePolicy) -> LimitLevels:
    return LimitLevels(
        kind=policy.kind,
        hard=policy.hard_level,
        soft=policy.soft_level,
        hysteresis=policy.hysteresis,
    )


def round_summary(latest_round: ObservationRound | None) -> RoundSummary:
    if latest_round is None:
        return RoundSummary(observed_at=None, complete=False, missing_brokers=[], error=None)
    return RoundSummary(
        observed_at=iso_instant(latest_round.finished_at),
        complete=latest_round.complete,
        missing_brokers=[
            MissingBroker(broker_id=b, reason=r)
            for b, r in sorted(latest_round.missing_brokers.items())
        ],
        error=latest_round.error,
    )


def decision_response(decision: Decision) -> ThrottleDecision:
    reading, evaluation = decision.reading, decision.evaluation
    fenced = decision.fenced_brokers
    return ThrottleDecision(
        factor=reading.factor,
        mutation_factor=reading.mutation_factor,
        state=decision.state,
        source=reading.source,
        computed_at=iso_instant(reading.computed_at),
        valid_until=iso_instant(reading.valid_until),
        fallback_factor=decision.fallback,
        limits=limit_levels(decision.policy),
        breaching=[volume_entry(v, fenced) for v in evaluation.breaching] if evaluation else [],
        ramping=[volume_entry(v, fenced) for v in evaluation.ramping] if evaluation else [],
        unjudged=[volume_entry(v, fenced) for v in evaluation.unjudged] if evaluation else [],
        active_brokers=decision.active_brokers,
        active_log_dirs=decision.log_dirs,
        fenced_brokers=fenced_brokers(decision.fenced),
        round=round_summary(decision.latest_round),
        rule=decision.rule,
        enforced=decision.enforced,
        canary_brokers=list(decision.enforcement.canary_brokers),
        metadata=metadata_decision(decision.metadata, decision.metadata_policy),
        resumed_from=iso_instant(decision.resumed_from),
    )


# What a change of /throttle-factor's ETag means: the decision itself and which volumes set it,
# not the figures and instants that move every round.
DECISION_ETAG_FIELDS = "factor, state, source, fallback_factor, limits, enforced, canary_brokers, and which volumes are listed in breaching, ramping, unjudged and fenced_brokers (with their reasons); with metadata limits set, mutation_factor and the metadata source, limits and listed volumes too"


def decision_etag_basis(model: ThrottleDecision) -> bytes:
    listed = {
        name: [(v.broker_id, v.log_dir, v.reason) for v in getattr(model, name)]
        for name in ("breaching", "ramping", "unjudged")
    }
    basis = {
        "decision": model.model_dump(
            mode="json",
            include={
                "factor",
                "state",
                "source",
                "fallback_factor",
                "limits",
                "enforced",
                "canary_brokers",
            },
        ),
        "listed": listed,
        "fenced": [f.broker_id for f in model.fenced_brokers],
    }
    metadata = model.metadata
    if (
        metadata is not None and metadata.limits is not None
    ):  # without metadata limits, today's ETags
        basis["metadata"] = {
            "mutation_factor": model.mutation_factor,
            "source": metadata.source.value,
            "limits": metadata.limits.model_dump(mode="json"),
            "listed": {
                name: [(v.broker_id, v.log_dir, v.reason) for v in getattr(metadata, name)]
                for name in ("breaching", "ramping")
            },
        }
    return json.dumps(basis, sort_keys=True).encode()
