"""The quota table and its parts as JSON: the contract the broker shim and clients rely on."""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from app.quotas.change_rules import name_problem, user_name_problem
from app.quotas.model import DEFAULT, PRECEDENCE, EntityName, QuotaValues, QuotaEntity, QuotaGroup, QuotaTable, QuotaType
from app.quotas.resolution import Resolution
from app.decision.enforcement import ENFORCE_EVERYWHERE, Enforcement
from app.decision.factor import FactorReading, FactorSource
from app.decision.policy import State
from app.timefmt import iso_instant

DEFAULT_NAME = "<default>"  # Kafka's name for the default entity of a kind
PRECEDENCE_NAMES = [level.value for level in PRECEDENCE]

Limit = Annotated[float | None, Field(gt=0, allow_inf_nan=False)]


class QuotaLimits(BaseModel):
    """Quotas per type in Kafka's units; null or absent: no quota of that type at this level."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"produce": 1048576, "fetch": 2097152}]})

    produce: Limit = Field(None, description="bytes/s per broker")
    fetch: Limit = Field(None, description="bytes/s per broker")
    request: Limit = Field(None, description="percent of one request handler / network thread")
    controller_mutation: Limit = Field(None, description="partition mutations/s (KIP-599)")

    def to_limits(self) -> QuotaValues:
        return {QuotaType(name): value for name, value in self.model_dump().items() if value is not None}

    @classmethod
    def of(cls, limits: QuotaValues) -> QuotaLimits:
        return cls(**{quota_type.value: value for quota_type, value in limits.items()})


# A quota to set: a JSON number (strict: no booleans, no numeric strings), finite and positive;
# the floor of its type, a setting, is checked where the settings are known.
StrictLimit = Annotated[float | None, Field(gt=0, allow_inf_nan=False, strict=True)]


class QuotaLimitsBody(QuotaLimits):
    """Quotas to set, at least one of them (null or absent: no quota of that type), each a JSON
    number at or above the floor of its type (`floors` in GET /quotas); the service answers 422
    otherwise."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"produce": 1048576}], "minProperties": 1})

    produce: StrictLimit = Field(None, description="bytes/s per broker")
    fetch: StrictLimit = Field(None, description="bytes/s per broker")
    request: StrictLimit = Field(None, description="percent of one request handler / network thread")
    controller_mutation: StrictLimit = Field(None, description="partition mutations/s (KIP-599)")


def entity_name(text: str | None) -> EntityName:
    if text is None:
        return None
    return DEFAULT if text == DEFAULT_NAME else text


def entity_text(name: EntityName) -> str | None:
    if name is None:
        return None
    return DEFAULT_NAME if name is DEFAULT else str(name)


class EntityModel(BaseModel):
    user: str | None = Field(None, description="A user principal name, or <default>; null: not part of the entity")
    client_id: str | None = Field(None, description="A client id, or <default>; null: not part of the entity")

    @classmethod
    def of(cls, entity: QuotaEntity) -> EntityModel:
        return cls(user=entity_text(entity.user), client_id=entity_text(entity.client_id))


class OverrideModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"entity": {"user": "alice", "client_id": "<default>"}, "level": "user, default client-id", "limits": {"produce": 1048576}}]
        }
    )

    entity: EntityModel
    level: str = Field(description="The KIP-55 level this entity defines")
    limits: QuotaLimits


MEMBER_NAMES = "no control or invisible format characters, no whitespace at either end"


class GroupBody(BaseModel):
    """A group's members, at least one user or client id, and the quotas they share."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"users": ["alice", "bob"], "client_ids": ["etl"], "limits": {"produce": 5242880}}]},
    )

    users: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description=f"User principal names, without User:; {MEMBER_NAMES}"
    )
    client_ids: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list, description=f"Client ids; {MEMBER_NAMES}")
    limits: QuotaLimitsBody

    @field_validator("users", "client_ids")
    @classmethod
    def _member_names(cls, names: list[str], info: ValidationInfo) -> list[str]:
        problem_of = user_name_problem if info.field_name == "users" else name_problem
        for name in names:
            problem = f"{DEFAULT_NAME} cannot be a group member" if name == DEFAULT_NAME else problem_of(name)
            if problem:
                raise PydanticCustomError("member_name", "{name}: {problem}", {"name": repr(name), "problem": problem})
        return names


class GroupModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "analytics", "users": ["alice", "bob"], "client_ids": ["etl"], "limits": {"produce": 5242880}}]}
    )

    name: str
    users: list[str]
    client_ids: list[str]
    limits: QuotaLimits

    @classmethod
    def of(cls, group: QuotaGroup) -> GroupModel:
        return cls(name=group.name, users=sorted(group.users), client_ids=sorted(group.client_ids), limits=QuotaLimits.of(group.limits))


class QuotaTableModel(BaseModel):
    """Everything a broker shim needs to resolve quotas locally, and the factor in force."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "defaults": {"produce": 10485760},
                    "overrides": [{"entity": {"user": "alice", "client_id": None}, "level": "user", "limits": {"produce": 2097152}}],
                    "groups": [{"name": "analytics", "users": ["bob"], "client_ids": ["etl"], "limits": {"produce": 5242880}}],
                    "excluded_principals": ["User:CN=operator,O=example"],
                    "precedence": PRECEDENCE_NAMES,
                    "factor": 0.5,
                    "factor_types": ["produce"],
                    "floors": {"produce": 65536, "fetch": 65536, "request": 1, "controller_mutation": 1},
                    "state": "THROTTLE",
                    "source": "observed",
                    "valid_until": "2026-11-21T16:45:00.000Z",
                    "enforced": True,
                    "canary_brokers": [],
                }
            ]
        }
    )

    defaults: QuotaLimits = Field(description="Per-broker quotas shared by clients that match nothing more specific")
    overrides: list[OverrideModel]
    groups: list[GroupModel]
    excluded_principals: list[str] = Field(description="Principals never throttled, as User:<name>")
    precedence: list[str] = Field(
        description="Resolution order, most specific first: a client's quota of a type comes from the first of these levels "
        "that sets one. The broker shim resolves in this order."
    )
    factor: float = Field(ge=0, le=1, description="The throttle factor in force")
    factor_types: list[QuotaType]
    floors: QuotaLimits = Field(description="The lowest limit the factor brings a quota to, per type")
    state: State
    source: FactorSource
    valid_until: str | None = Field(description="When the factor expires unless renewed (see /throttle-factor)")
    enforced: bool = Field(
        description="Whether shims apply the factor: false (shadow mode) means every shim applies its quotas unscaled and "
        "reports what it would apply"
    )
    canary_brokers: list[int] = Field(
        description="When enforced, the only brokers whose shims apply the factor; a shim whose broker is not listed stays in "
        "shadow. Empty: every broker"
    )


class ResolutionModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "user": "alice",
                    "client_id": "billing",
                    "type": "produce",
                    "level": "user",
                    "entity": {"user": "alice", "client_id": None},
                    "group": None,
                    "base_limit": 2097152,
                    "factor": 0.5,
                    "limit": 1048576,
                    "tags": {"user": "alice", "client-id": ""},
                }
            ]
        }
    )

    user: str
    client_id: str
    type: QuotaType
    level: str = Field(description="The precedence level that matched (see /quotas precedence)")
    entity: EntityModel | None = Field(description="The override entity that matched, if any")
    group: str | None = Field(description="The quota group that matched, if any")
    base_limit: float | None = Field(description="The configured quota before the factor; null: unlimited")
    factor: float = Field(description="The factor applied to this quota type (1.0 when it does not apply)")
    limit: float | None = Field(description="The effective limit the broker enforces; null: unlimited")
    tags: dict[str, str] = Field(description="Metric tags: clients with equal tags share one quota")

    @classmethod
    def of(cls, user: str, client_id: str, resolution: Resolution) -> ResolutionModel:
        return cls(
            user=user,
            client_id=client_id,
            type=resolution.quota_type,
            level=resolution.level.value,
            entity=EntityModel.of(resolution.entity) if resolution.entity else None,
            group=resolution.group,
            base_limit=resolution.base_limit,
            factor=resolution.factor,
            limit=resolution.limit,
            tags=resolution.tags,
        )


def _table_fields(table: QuotaTable) -> dict[str, Any]:
    """The fields of the table model that come from the quota table."""
    overrides = sorted(table.overrides.items(), key=lambda item: (PRECEDENCE.index(item[0].level), repr(item[0])))
    return {
        "defaults": QuotaLimits.of(table.defaults),
        "overrides": [OverrideModel(entity=EntityModel.of(e), level=e.level.value, limits=QuotaLimits.of(l)) for e, l in overrides],
        "groups": [GroupModel.of(table.groups[name]) for name in sorted(table.groups)],
        "excluded_principals": [f"User:{name}" for name in sorted(table.excluded_principals)],
        "precedence": PRECEDENCE_NAMES,
        "factor_types": sorted(table.factor_types, key=lambda t: t.value),
        "floors": QuotaLimits.of(table.floors),
    }


_READING_FIELDS = ("factor", "state", "source", "valid_until", "enforced", "canary_brokers")


def _reading_fields(reading: FactorReading, enforcement: Enforcement) -> dict[str, Any]:
    """The fields of the table model that come from the factor reading and the enforcement
    (_READING_FIELDS)."""
    values = (
        reading.factor, State.of(reading.factor), reading.source, iso_instant(reading.valid_until),
        enforcement.enforced, list(enforcement.canary_brokers),
    )
    return dict(zip(_READING_FIELDS, values, strict=True))


TABLE_FIELDS = frozenset(QuotaTableModel.model_fields) - frozenset(_READING_FIELDS)


def table_model(table: QuotaTable, reading: FactorReading, enforcement: Enforcement = ENFORCE_EVERYWHERE) -> QuotaTableModel:
    return QuotaTableModel(**_table_fields(table), **_reading_fields(reading, enforcement))


def table_from_json(data: dict) -> QuotaTable:
    """The inverse of table_model for the table part (the shape of GET /quotas)."""
    return QuotaTable(
        defaults=QuotaLimits(**data.get("defaults", {})).to_limits(),
        overrides={
            QuotaEntity(entity_name(o["entity"].get("user")), entity_name(o["entity"].get("client_id"))): QuotaLimits(**o["limits"]).to_limits()
            for o in data.get("overrides", [])
        },
        groups={
            g["name"]: QuotaGroup(g["name"], frozenset(g.get("users", [])), frozenset(g.get("client_ids", [])), QuotaLimits(**g["limits"]).to_limits())
            for g in data.get("groups", [])
        },
        excluded_principals=frozenset(p.removeprefix("User:") for p in data.get("excluded_principals", [])),
        factor_types=frozenset(QuotaType(t) for t in data.get("factor_types", [])),
        floors=QuotaLimits(**data["floors"]).to_limits(),
    )


# What a change of /quotas' ETag means: everything a shim resolves with; not the validity and
# source, which move with the rounds (the validity travels in headers), except whether the table
# expires at all (a shim holding a table that expires must learn when it no longer does).
TABLE_ETAG_FIELDS = "every field but valid_until and source (enforced and canary_brokers included); valid_until going from a time to null or back"


def table_etag_basis(model: QuotaTableModel, table_digest: str) -> bytes:
    """What the ETag covers: the table's fields (``table_digest``, the digest of them), the
    factor and state, whether it expires."""
    basis = {
        "table": table_digest,
        "factor": model.factor,
        "state": model.state.value,
        "expires": model.valid_until is not None,
        "enforced": model.enforced,
        "canary_brokers": model.canary_brokers,
    }
    return json.dumps(basis, sort_keys=True).encode()


def _table_digest(model: QuotaTableModel) -> str:
    table = json.dumps(model.model_dump(mode="json", include=set(TABLE_FIELDS)), sort_keys=True).encode()
    return hashlib.blake2b(table, digest_size=16).hexdigest()


class QuotaTableRenderer:
    """The table model and its ETag basis for each reading. Every round renders the table anew
    (its validity moves); the table's own fields, and their digest, are converted once per
    table: 10,000 overrides take a third of a second to convert and a tenth to digest."""

    def __init__(self) -> None:
        self._table: QuotaTable | None = None  # held, so that ``is`` compares with a live object
        self._fields: dict[str, Any] = {}
        self._digest = ""

    def render(self, table: QuotaTable, reading: FactorReading, enforcement: Enforcement = ENFORCE_EVERYWHERE) -> tuple[QuotaTableModel, bytes]:
        if table is not self._table:
            model = table_model(table, reading, enforcement)
            self._table, self._fields, self._digest = table, {name: getattr(model, name) for name in TABLE_FIELDS}, _table_digest(model)
        else:
            # The table's fields were validated when converted; the reading's are of their types.
            model = QuotaTableModel.model_construct(**self._fields, **_reading_fields(reading, enforcement))
        return model, table_etag_basis(model, self._digest)
