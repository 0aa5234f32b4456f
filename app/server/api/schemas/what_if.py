"""POST /what-if: a candidate set of limits, and what it would decide on the live view.

The body names the limits as the settings do, grouped as /throttle-factor's ``limits`` shows
them: ``hard`` (required), ``soft`` and ``hysteresis``, each in bytes or as a ratio, and the
time-to-full ``horizon``. Each field stands for one setting (``FIELD_SETTINGS``; the horizon
for ``throttle.service.ramp.horizon``), and the set is checked by the settings' own rules
(app/settings/limits.py; the horizon's by the route, against the service's check interval)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from app.server.api.schemas.decision import ThrottleDecision
from app.server.api.schemas.volumes import VolumesView


def _json_number(value: Any) -> Any:
    """A JSON number, integral for bytes (5 and 5.0 alike, as JSON Schema reads them), never a
    boolean or a numeric string."""
    if isinstance(value, bool | str):
        # pydantic reports a ValueError as a 422 field error; a TypeError would escape it as a 500
        raise ValueError("a JSON number")  # noqa: TRY004
    return value


# Kafka-sized byte counts, and ratios of usable/total; JSON numbers only, never null: a field
# left out sets nothing.
# The bounds before the validator, so the document carries them as minimum and maximum.
Bytes = Annotated[int, Field(ge=0, le=2**63 - 1), BeforeValidator(_json_number)]
Ratio = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]


def _one_kind(schema: dict[str, Any]) -> None:
    """A limit names one kind, bytes or ratio: the document says it as the service checks it."""
    schema["maxProperties"] = 1


def _exactly_one_kind(schema: dict[str, Any]) -> None:
    schema.update({"minProperties": 1, "maxProperties": 1})


# The ISO-8601 durations the settings take (app/settings/durations.py: PnDTnHnMn.nS, any case,
# at least one part, ASCII digits), as a pattern the document states and the body is held to.
_SECONDS = r"[0-9]+(?:\.[0-9]{1,9})?[Ss]"
_TIME = rf"[Tt](?:[0-9]+[Hh](?:[0-9]+[Mm])?(?:{_SECONDS})?|[0-9]+[Mm](?:{_SECONDS})?|{_SECONDS})"
HORIZON_PATTERN = rf"^[Pp](?:[0-9]+[Dd](?:{_TIME})?|{_TIME})$"


class LimitLevel(BaseModel):
    """One level, of one kind: usable bytes or usable/total ratio."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_kind)

    min_available_bytes: Bytes = Field(
        default=None, description="Breached at or below this many usable bytes"
    )  # type: ignore[assignment]
    min_available_ratio: Ratio = Field(
        default=None, description="Breached at or below this usable/total ratio, in [0, 1]"
    )  # type: ignore[assignment]


class HardLimit(LimitLevel):
    """The hard limit: exactly one of its two kinds."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_exactly_one_kind)


class HysteresisLevel(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=_one_kind)

    bytes: Bytes = Field(
        default=None,
        description="With a bytes hard limit: a breaching volume stays so until above limit + this",
    )  # type: ignore[assignment]
    ratio: Ratio = Field(
        default=None,
        description="With a ratio hard limit: a breaching volume stays so until above limit + this",
    )  # type: ignore[assignment]


class CandidateLimits(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "hard": {"min_available_ratio": 0.1},
                    "soft": {"min_available_ratio": 0.2},
                    "hysteresis": {"ratio": 0.02},
                },
                {"hard": {"min_available_bytes": 8388608}},
                {"hard": {"min_available_ratio": 0.1}, "horizon": "PT30M"},
            ]
        },
    )

    hard: HardLimit = Field(description="The hard limit: exactly one of its two kinds")
    # Objects, not nullable: an empty (or absent) one sets nothing, and generated clients get plain types.
    soft: LimitLevel = Field(
        default_factory=LimitLevel,
        description="The soft limit (optional): the hard limit's kind, strictly looser (a rule across fields, answered 422 when broken)",
    )
    hysteresis: HysteresisLevel = Field(
        default_factory=HysteresisLevel,
        description="Hysteresis (optional), in the hard limit's unit (a rule across fields, answered 422 when broken)",
    )
    horizon: str = Field(  # type: ignore[assignment]
        None,
        strict=True,
        json_schema_extra={
            "pattern": HORIZON_PATTERN
        },  # held to by the route, which names the setting
        description=(
            "Time to full (optional), as throttle.service.ramp.horizon: an ISO-8601 duration such as PT30M, at least PT1M "
            "and 12 of the service's check intervals. Judged on the fill trends the service keeps, so only a service "
            "with a horizon of its own can try one (422 otherwise). Left out: the candidate has no time rule"
        ),
    )


# body field -> the setting it stands for
FIELD_SETTINGS: dict[str, str] = {
    "hard.min_available_bytes": "storage_per_volume_limit_min_available_bytes",
    "hard.min_available_ratio": "storage_per_volume_limit_min_available_ratio",
    "soft.min_available_bytes": "storage_per_volume_soft_limit_min_available_bytes",
    "soft.min_available_ratio": "storage_per_volume_soft_limit_min_available_ratio",
    "hysteresis.bytes": "storage_per_volume_limit_hysteresis_bytes",
    "hysteresis.ratio": "storage_per_volume_limit_hysteresis_ratio",
}


def limit_values(body: CandidateLimits) -> dict[str, Any]:
    """Setting field name -> value, for the fields the body sets."""
    values: dict[str, Any] = {}
    for path, setting in FIELD_SETTINGS.items():
        group, name = path.split(".")
        value = getattr(getattr(body, group), name)
        if value is not None:
            values[setting] = value
    return values


def _example(model: type[BaseModel]) -> dict[str, Any]:
    extra = model.model_config.get("json_schema_extra")
    assert isinstance(extra, dict)
    examples = extra["examples"]
    assert isinstance(examples, list) and isinstance(examples[0], dict)
    return examples[0]


class WhatIf(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"decision": _example(ThrottleDecision), "volumes": _example(VolumesView)}]
        }
    )

    decision: ThrottleDecision = Field(
        description="What /throttle-factor would answer under the candidate limits"
    )
    volumes: VolumesView = Field(
        description="What /volumes would answer under the candidate limits"
    )
