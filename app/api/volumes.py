"""GET /volumes: the cached cluster view, one entry per (broker, log dir), with its age."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from app.api.dependencies import get_observer
from app.observer import Observer
from app.policy.limits import VolumeStatus, judge_volume
from app.throttle.decision import VolumeEntry, volume_entry
from app.timefmt import iso_instant

router = APIRouter(tags=["volumes"])


class CachedVolume(VolumeEntry):
    age_seconds: float = Field(description="Seconds since this observation was made")
    broker_active: bool = Field(description="The broker was listed by DescribeCluster in the latest round")
    expires_at: str = Field(
        description="When this observation leaves the view unless a round renews it (a fenced broker's is renewed by "
        "every round that lists it, with the keep policy)"
    )
    error: str | None = Field(description="Kafka error reported for this log dir (e.g. KAFKA_STORAGE_ERROR)")
    status: VolumeStatus


class VolumesView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "observed_at": "2026-11-21T16:40:00.000Z",
                    "validity_seconds": 300.0,
                    "active_brokers": [1, 2],
                    "missing_brokers": [],
                    "volumes": [
                        {
                            "broker_id": 1,
                            "log_dir": "/var/lib/kafka/data",
                            "total_bytes": 67108864,
                            "usable_bytes": 4194304,
                            "available_ratio": 0.0625,
                            "observed_at": "2026-11-21T16:40:00.000Z",
                            "factor": 0.0,
                            "reason": "hard limit",
                            "age_seconds": 3.2,
                            "broker_active": True,
                            "broker_fenced": False,
                            "expires_at": "2026-11-21T16:45:00.000Z",
                            "error": None,
                            "status": "breaching",
                        }
                    ],
                }
            ]
        }
    )

    observed_at: str | None
    validity_seconds: float
    active_brokers: list[int]
    missing_brokers: list[int]
    volumes: list[CachedVolume]


@router.get("/volumes", response_model=VolumesView, summary="The cached cluster view of every log dir volume")
async def volumes(observer: Annotated[Observer, Depends(get_observer)]) -> VolumesView:
    decider = observer.decider
    now = observer.clock()
    breaching = {(v.broker_id, v.log_dir) for v in observer.board.current().model.breaching}
    active = set(decider.active_brokers)
    step = decider.view_at(now)
    fenced = decider.cache.fenced
    entries = []
    for volume in sorted(step.volumes if step is not None else (), key=lambda v: v.key):
        verdict = judge_volume(decider.policy, volume, volume.key in breaching)
        entries.append(
            CachedVolume(
                **volume_entry(verdict, fenced).model_dump(),
                age_seconds=round(max(0.0, now - volume.observed_at), 3),
                broker_active=volume.broker_id in active,
                expires_at=iso_instant(decider.cache.expires_at(volume)) or "",
                error=volume.error,
                status=verdict.status,
            )
        )
    latest = decider.latest_round
    return VolumesView(
        observed_at=iso_instant(latest.finished_at) if latest else None,
        validity_seconds=decider.validity_seconds,
        active_brokers=sorted(active),
        missing_brokers=sorted(latest.missing_brokers) if latest else [],
        volumes=entries,
    )
