"""Liveness and readiness answers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from app.decision.factor import FactorSource


class Health(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: str


class Readiness(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"ready": True, "source": "observed", "rounds": 42}]}
    )

    ready: bool
    source: FactorSource = Field(description="Source of the factor in force (see /throttle-factor)")
    rounds: int = Field(description="Observation rounds completed since start")
