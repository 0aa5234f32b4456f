"""Liveness and readiness."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.health import Health, Readiness
from app.server.api.state import service_state

routes = RouteSet(tags=["health"])


@routes.get("/healthz", response_model=Health, summary="Liveness: the process serves HTTP")
async def healthz() -> Health:
    return Health(status="ok")


@routes.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness: a first observation succeeded, or the fallback is in force",
    responses={
        503: {"model": Readiness, "description": "Not ready yet: no observation has succeeded"}
    },
)
async def readyz(request: Request) -> JSONResponse:
    now = service_state(request).readiness()
    readiness = Readiness(ready=now.ready, source=now.source, rounds=now.rounds)
    return JSONResponse(
        readiness.model_dump(mode="json"), status_code=200 if readiness.ready else 503
    )
