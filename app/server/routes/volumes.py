"""GET /volumes: the cached cluster view, one entry per (broker, log dir), with its age."""

from __future__ import annotations

from fastapi import Request

from app.server.routes.route_set import RouteSet
from app.server.schemas.decision import volume_entry
from app.server.schemas.volumes import CachedVolume, VolumesView
from app.server.state import service_state
from app.timefmt import iso_instant

routes = RouteSet(tags=["volumes"])


@routes.get("/volumes", response_model=VolumesView, summary="The cached cluster view of every log dir volume")
async def volumes(request: Request) -> VolumesView:
    state = service_state(request)
    decider, now = state.decider, state.clock()
    entries = [
        CachedVolume(
            **volume_entry(volume.verdict, (volume.observation.broker_id,) if volume.broker_fenced else (), volume.time_to_full).model_dump(),
            age_seconds=round(max(0.0, now - volume.observation.observed_at), 3),
            broker_active=volume.broker_active,
            expires_at=iso_instant(volume.expires_at) or "",
            error=volume.observation.error,
            status=volume.verdict.status,
        )
        for volume in decider.volumes(now)
    ]
    latest = decider.latest_round
    return VolumesView(
        observed_at=iso_instant(latest.finished_at) if latest else None,
        validity_seconds=decider.validity_seconds,
        active_brokers=sorted(decider.active_brokers),
        missing_brokers=sorted(latest.missing_brokers) if latest else [],
        volumes=entries,
    )
