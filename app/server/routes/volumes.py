"""GET /volumes: the cached cluster view, one entry per (broker, log dir), with its age."""

from __future__ import annotations

from fastapi import Request

from app.server.routes.route_set import RouteSet
from app.server.schemas.volumes import VolumesView, volumes_view
from app.server.state import service_state

routes = RouteSet(tags=["volumes"])


@routes.get("/volumes", response_model=VolumesView, summary="The cached cluster view of every log dir volume")
async def volumes(request: Request) -> VolumesView:
    state = service_state(request)
    return volumes_view(state.decider, state.clock())
