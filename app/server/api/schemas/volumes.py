"""The cached cluster view as /volumes serves it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.decision.policy import VolumeStatus
from app.decision.view import DecisionView
from app.server.api.schemas.decision import VolumeEntry, metadata_entry, volume_entry
from app.timefmt import iso_instant


class CachedVolume(VolumeEntry):
    age_seconds: float = Field(description="Seconds since this observation was made")
    broker_active: bool = Field(
        description="The broker was listed by DescribeCluster in the latest round"
    )
    expires_at: str = Field(
        description="When this observation leaves the view unless a round renews it (a fenced broker's is renewed by "
        "every round that lists it, with the keep policy)"
    )
    error: str | None = Field(
        description="Kafka error reported for this log dir (e.g. KAFKA_STORAGE_ERROR)"
    )
    status: VolumeStatus
    observed_by: Literal["admin-api", "node-report"] = Field(
        "admin-api",
        description="Where the observation in the view came from. admin-api: DescribeLogDirs (a data volume, judged by the "
        "storage limits); node-report: the node's own shim (PUT /nodes/{node_id}/volumes): a data volume whose report is "
        "newer than its DescribeLogDirs answer (or the more conservative while they disagree), judged by the storage "
        "limits, or a metadata volume, judged by the metadata limits",
    )


class VolumesView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "observed_at": "2026-11-21T16:40:00.000Z",
                    "rendered_at": "2026-11-21T16:40:03.200Z",
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
                            "holds": ["data"],
                            "observed_by": "admin-api",
                        }
                    ],
                }
            ]
        }
    )

    observed_at: str | None
    rendered_at: str = Field(
        description="When this view was rendered, which every age_seconds counts to: it is rendered again when what it "
        "shows changes (a round, a node's report, an expiry, the decision), not for every request"
    )
    validity_seconds: float
    active_brokers: list[int]
    missing_brokers: list[int]
    volumes: list[CachedVolume]
    reporting_nodes: list[int] = Field(
        [],
        description="The nodes whose own report of their volumes is in the view (their metadata volumes are listed)",
    )


def volumes_view(decider: DecisionView, now: float) -> VolumesView:
    entries = [
        CachedVolume(
            **volume_entry(
                volume.verdict,
                (volume.observation.broker_id,) if volume.broker_fenced else (),
                volume.time_to_full,
            ).model_dump(),
            age_seconds=round(max(0.0, now - volume.observation.observed_at), 3),
            broker_active=volume.broker_active,
            expires_at=iso_instant(volume.expires_at) or "",
            error=volume.observation.error,
            status=volume.verdict.status,
            observed_by=volume.observation.observed_by,
        )
        for volume in decider.volumes(now)
    ]
    metadata = decider.metadata_at(now)
    active = set(decider.active_brokers)
    entries += [
        CachedVolume(
            **metadata_entry(volume, decider.fenced_now).model_dump(),
            age_seconds=round(max(0.0, now - volume.verdict.volume.observed_at), 3),
            broker_active=volume.verdict.volume.broker_id in active,
            expires_at=iso_instant(volume.expires_at) or "",
            error=None,
            status=volume.verdict.status,
            observed_by="node-report",
        )
        for volume in metadata.volumes
    ]
    latest = decider.latest_round
    return VolumesView(
        observed_at=iso_instant(latest.finished_at) if latest else None,
        rendered_at=iso_instant(now) or "",
        validity_seconds=decider.validity_seconds,
        active_brokers=sorted(decider.active_brokers),
        missing_brokers=sorted(latest.missing_brokers) if latest else [],
        volumes=entries,
        reporting_nodes=sorted({v.verdict.volume.broker_id for v in metadata.volumes}),
    )
