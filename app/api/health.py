"""Liveness and readiness."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from app.api.dependencies import get_observer
from app.observer import Observer

router = APIRouter(tags=["health"])


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: str


class Readiness(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"ready": True, "source": "observed", "rounds": 42}]})

    ready: bool
    source: str = Field(description="Source of the factor in force (see /throttle-factor)")
    rounds: int = Field(description="Observation rounds completed since start")


@router.get("/healthz", response_model=Health, summary="Liveness: the process serves HTTP")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness: a first observation succeeded, or the fallback is in force",
    responses={503: {"model": Readiness, "description": "Not ready yet: no observation has succeeded"}},
)
async def readyz(observer: Annotated[Observer, Depends(get_observer)]) -> JSONResponse:
    readiness = Readiness(ready=observer.ready, source=observer.board.current().model.source, rounds=observer.rounds)
    return JSONResponse(readiness.model_dump(), status_code=200 if readiness.ready else 503)
