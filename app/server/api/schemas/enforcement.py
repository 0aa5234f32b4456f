"""Enforcement as served and changed over HTTP (GET/PUT/DELETE /enforcement)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.decision.enforcement import Enforcement


def _whole_number(value: object) -> object:
    """JSON Schema's integer is any number without a fraction: 3.0 is the broker 3."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


# Kafka's broker.id is an int32; strict: no booleans, no numeric strings.
BrokerId = Annotated[int, Field(ge=0, le=2**31 - 1, strict=True), BeforeValidator(_whole_number)]


class EnforcementBody(BaseModel):
    """The enforcement to keep in the quota store (it wins over the settings until DELETE)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"mode": "shadow"},
                {"mode": "enforce", "canary_brokers": [1]},
                {"mode": "enforce", "canary_brokers": []},
            ]
        },
    )

    mode: Literal["enforce", "shadow"] = Field(
        description="enforce: the shims apply the factor; shadow: none does"
    )
    canary_brokers: list[BrokerId] = Field(
        default_factory=list,
        description="With mode enforce, the only brokers whose shims apply the factor (each registered in the cluster view "
        "now); empty or absent: every broker",
    )


class EnforcementSetting(BaseModel):
    mode: Literal["enforce", "shadow"]
    canary_brokers: list[int]


class EnforcementModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "mode": "enforce",
                    "canary_brokers": [1],
                    "enforced": True,
                    "source": "store",
                    "settings": {"mode": "shadow", "canary_brokers": []},
                }
            ]
        }
    )

    mode: Literal["enforce", "shadow"] = Field(description="The mode in force")
    canary_brokers: list[int] = Field(
        description="In enforce mode, the only brokers that enforce; empty: every broker"
    )
    enforced: bool = Field(
        description="Whether enforcement is on (mode enforce), as /throttle-factor and /quotas say"
    )
    source: Literal["settings", "store"] = Field(
        description="store: set with PUT /enforcement and kept in the quota store, which wins over the settings; "
        "settings: throttle.service.enforcement and its canary list (nothing stored, or returned with DELETE)"
    )
    settings: EnforcementSetting = Field(
        description="What the settings say; in force again after DELETE /enforcement"
    )

    @classmethod
    def of(cls, enforcement: Enforcement, source: str, configured: Enforcement) -> EnforcementModel:
        return cls(
            mode=enforcement.mode.value,
            canary_brokers=list(enforcement.canary_brokers),
            enforced=enforcement.enforced,
            source=source,  # type: ignore[arg-type]
            settings=EnforcementSetting(
                mode=configured.mode.value, canary_brokers=list(configured.canary_brokers)
            ),
        )
