"""The quota table and its parts as JSON: the contract the broker shim and clients rely on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.json_schema import JsonDict
from pydantic_core import PydanticCustomError

from app.decision.enforcement import ENFORCE_EVERYWHERE, Enforcement
from app.decision.factor import FactorReading, FactorSource
from app.decision.policy import LimitKind, State
from app.decision.report_levels import LimitLevels, ReportOn
from app.quotas.change_rules import DEFAULT_NAME, NAME_MAX_BYTES, member_name_problem, name_pattern
from app.quotas.model import (
    DEFAULT,
    PRECEDENCE,
    EntityName,
    QuotaEntity,
    QuotaGroup,
    QuotaTable,
    QuotaType,
    QuotaValues,
)
from app.quotas.resolution import Resolution
from app.settings.model import QUOTA_MAX
from app.timefmt import iso_instant

PRECEDENCE_NAMES = [level.value for level in PRECEDENCE]

# A quota: a double (format double, so that generated clients read it as one: without it
# openapi-generator's Go client takes float32 and reads 123456789 as 123456792), finite,
# positive and at most QUOTA_MAX. A quota to set is also at or above the floor of its type.
DOUBLE: JsonDict = {"format": "double"}
Quota = Annotated[float, Field(gt=0, le=QUOTA_MAX, allow_inf_nan=False, json_schema_extra=DOUBLE)]
Limit = Annotated[Quota | None, Field()]


class QuotaLimits(BaseModel):
    """Quotas per type in Kafka's units; null or absent: no quota of that type at this level."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"produce": 1048576, "fetch": 2097152}]}
    )

    produce: Limit = Field(None, description="bytes/s per broker")
    fetch: Limit = Field(None, description="bytes/s per broker")
    request: Limit = Field(None, description="percent of one request handler / network thread")
    controller_mutation: Limit = Field(None, description="partition mutations/s (KIP-599)")

    def to_limits(self) -> QuotaValues:
        return {
            QuotaType(name): value for name, value in self.model_dump().items() if value is not None
        }

    @classmethod
    def of(cls, limits: QuotaValues) -> QuotaLimits:
        return cls(**{quota_type.value: value for quota_type, value in limits.items()})


# A quota to set: a JSON number (strict: no booleans, no numeric strings); the floor of its
# type, a setting, is checked where the settings are known and written into the document there
# (app.server.api.schemas.bounds).
StrictQuota = Annotated[Quota, Field(strict=True)]


def _limits_body_schema(schema: dict[str, Any]) -> None:
    schema.update({"examples": [{"produce": 1048576}], "minProperties": 1})
    for quota in schema["properties"].values():
        quota.pop("default", None)  # absent means no quota of the type; null is refused


class QuotaLimitsBody(QuotaLimits):
    """Quotas to set, at least one of them (absent: no quota of that type), each a JSON
    number at or above the floor of its type (`floors` in GET /quotas) and at most
    9007199254740991 (2^53 - 1); the service answers 422 otherwise."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_limits_body_schema)

    # Absent is None, but a null given is refused: the type leaves None out so that pydantic
    # refuses it, and the default (never validated) puts it back. Pydantic's Field is typed to
    # return its default's type, so the type checker cannot be told; hence the ignores.
    produce: StrictQuota = Field(None, description="bytes/s per broker")  # type: ignore[assignment]
    fetch: StrictQuota = Field(None, description="bytes/s per broker")  # type: ignore[assignment]
    request: StrictQuota = Field(
        None, description="percent of one request handler / network thread"
    )  # type: ignore[assignment]
    controller_mutation: StrictQuota = Field(None, description="partition mutations/s (KIP-599)")  # type: ignore[assignment]


def entity_name(text: str | None) -> EntityName:
    if text is None:
        return None
    return DEFAULT if text == DEFAULT_NAME else text


def entity_text(name: EntityName) -> str | None:
    if name is None:
        return None
    return DEFAULT_NAME if name is DEFAULT else str(name)


class EntityModel(BaseModel):
    user: str | None = Field(
        None, description="A user principal name, or <default>; null: not part of the entity"
    )
    client_id: str | None = Field(
        None, description="A client id, or <default>; null: not part of the entity"
    )

    @classmethod
    def of(cls, entity: QuotaEntity) -> EntityModel:
        return cls(user=entity_text(entity.user), client_id=entity_text(entity.client_id))


class OverrideModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "entity": {"user": "alice", "client_id": "<default>"},
                    "level": "user, default client-id",
                    "limits": {"produce": 1048576},
                }
            ]
        }
    )

    entity: EntityModel
    level: str = Field(description="The KIP-55 level this entity defines")
    limits: QuotaLimits


NAME_RULES = (
    f"at most {NAME_MAX_BYTES} bytes in UTF-8 (maxLength counts characters: the service counts bytes), no control, "
    "invisible format or separator characters, no whitespace at either end"
)


def name_schema(users: bool, members: bool) -> Callable[[dict[str, Any]], None]:
    """Completes the schema of a name with the change rules (when the document is generated:
    the pattern takes a pass over every Unicode character)."""

    def complete(schema: dict[str, Any]) -> None:
        schema.update(
            {
                "type": "string",
                "minLength": 1,
                "maxLength": NAME_MAX_BYTES,
                "pattern": name_pattern(users, members),
            }
        )

    return complete


def _member(users: bool) -> Any:
    return Annotated[str, Field(min_length=1, json_schema_extra=name_schema(users, members=True))]


# "At least one user or client id": when users is absent or empty, client_ids is not. As if/then,
# not a top-level anyOf, which openapi-generator's Java generators turn into a wrapper type.
_SOME_MEMBER: JsonDict = {
    "if": {"properties": {"users": {"maxItems": 0}}},
    "then": {"required": ["client_ids"], "properties": {"client_ids": {"minItems": 1}}},
}


class GroupBody(BaseModel):
    """A group's members, at least one user or client id, and the quotas they share; each of
    users and client_ids lists at most throttle.service.quota.group.max.members names."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"users": ["alice", "bob"], "client_ids": ["etl"], "limits": {"produce": 5242880}}
            ],
            **_SOME_MEMBER,
        },
    )

    users: list[_member(users=True)] = Field(  # type: ignore[valid-type]
        default_factory=list,
        description=f"User principal names, without User:, not {DEFAULT_NAME}; {NAME_RULES}",
    )
    client_ids: list[_member(users=False)] = Field(  # type: ignore[valid-type]
        default_factory=list, description=f"Client ids, not {DEFAULT_NAME}; {NAME_RULES}"
    )
    limits: QuotaLimitsBody

    @field_validator("users", "client_ids")
    @classmethod
    def _member_names(cls, names: list[str], info: ValidationInfo) -> list[str]:
        for name in names:
            problem = member_name_problem(name, users=info.field_name == "users")
            if problem:
                raise PydanticCustomError(
                    "member_name",
                    "{name}: {problem}",
                    {"name": repr(name[:64]), "problem": problem},
                )
        return names

    @model_validator(mode="after")
    def _some_member(self) -> GroupBody:
        if not self.users and not self.client_ids:
            raise PydanticCustomError("no_member", "a group needs at least one user or client id")
        return self


class GroupModel(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "analytics",
                    "users": ["alice", "bob"],
                    "client_ids": ["etl"],
                    "limits": {"produce": 5242880},
                }
            ]
        }
    )

    name: str
    users: list[str]
    client_ids: list[str]
    limits: QuotaLimits

    @classmethod
    def of(cls, group: QuotaGroup) -> GroupModel:
        return cls(
            name=group.name,
            users=sorted(group.users),
            client_ids=sorted(group.client_ids),
            limits=QuotaLimits.of(group.limits),
        )


class LimitLevelsModel(BaseModel):
    """A limit as a shim compares its volumes with it: for a volume of total T and usable U, the
    bytes kind compares U with a level, the ratio kind U/T. Crossing downward is at the level,
    upward at the level plus the hysteresis."""

    kind: LimitKind
    levels: list[float] = Field(
        description="The hard level, then the soft level when one is set", min_length=1
    )
    hysteresis: float = Field(ge=0, description="In the kind's unit", json_schema_extra=DOUBLE)

    @classmethod
    def of(cls, levels: LimitLevels) -> LimitLevelsModel:
        return cls.model_construct(
            kind=levels.kind, levels=list(levels.levels), hysteresis=levels.hysteresis
        )


class ReportOnModel(BaseModel):
    """When a node's shim sends its volume report (PUT /nodes/{id}/volumes) at once rather than
    at its poll interval: when a volume crosses a level that changes the decision, or its usable
    bytes moved by more than move_share of its total since the report it last sent (at most one
    such report a second), paced as the service takes them: burst reports in a row, then one per
    min_interval_ms (a shim keeps a report in hand for a crossing)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "kind": "min-available-ratio",
                    "levels": [0.05, 0.15],
                    "hysteresis": 0.01,
                    "metadata": {
                        "kind": "min-available-bytes",
                        "levels": [1073741824],
                        "hysteresis": 0,
                    },
                    "move_share": 0.01,
                    "min_interval_ms": 250,
                    "burst": 4,
                    "take_hold": {"1": {"/var/lib/kafka/data-0": 21474836480}},
                }
            ]
        }
    )

    kind: LimitKind = Field(description="The data limit's kind")
    levels: list[float] = Field(
        description="The data limit's levels: the hard level, then the soft level when one is set",
        min_length=1,
    )
    hysteresis: float = Field(ge=0, description="In the kind's unit", json_schema_extra=DOUBLE)
    metadata: LimitLevelsModel | None = Field(
        description="The metadata limit, for the dirs that hold the metadata log; null when none is set"
    )
    move_share: float = Field(gt=0, le=1, json_schema_extra=DOUBLE)
    min_interval_ms: int = Field(
        ge=0,
        description="The service takes one report per node per this interval, once the burst is spent",
    )
    burst: int = Field(
        ge=1,
        description="How many reports in a row the service takes from a node before it paces them by min_interval_ms "
        "(a token bucket: one token per min_interval_ms, at most this many kept)",
    )
    take_hold: dict[str, dict[str, int]] = Field(
        description="Per node id and log dir, the usable bytes below which the time-to-full rule would take hold of "
        "the volume at its current fill rate: only volumes within twice the horizon of full, at most 2,000"
    )

    @classmethod
    def of(cls, report_on: ReportOn) -> ReportOnModel:
        take_hold: dict[str, dict[str, int]] = {}
        for (broker_id, log_dir), level in sorted(report_on.take_hold.items()):
            take_hold.setdefault(str(broker_id), {})[log_dir] = level
        data = report_on.data
        return cls.model_construct(
            kind=data.kind,
            levels=list(data.levels),
            hysteresis=data.hysteresis,
            metadata=None
            if report_on.metadata is None
            else LimitLevelsModel.of(report_on.metadata),
            move_share=report_on.move_share,
            min_interval_ms=report_on.min_interval_ms,
            burst=report_on.burst,
            take_hold=take_hold,
        )


class QuotaTableModel(BaseModel):
    """Everything a broker shim needs to resolve quotas locally, and the factor in force."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "defaults": {"produce": 10485760},
                    "overrides": [
                        {
                            "entity": {"user": "alice", "client_id": None},
                            "level": "user",
                            "limits": {"produce": 2097152},
                        }
                    ],
                    "groups": [
                        {
                            "name": "analytics",
                            "users": ["bob"],
                            "client_ids": ["etl"],
                            "limits": {"produce": 5242880},
                        }
                    ],
                    "excluded_principals": ["User:CN=operator,O=example"],
                    "precedence": [*PRECEDENCE_NAMES],
                    "factor": 0.5,
                    "mutation_factor": 1.0,
                    "factor_types": ["produce"],
                    "floors": {
                        "produce": 65536,
                        "fetch": 65536,
                        "request": 1,
                        "controller_mutation": 1,
                    },
                    "state": "THROTTLE",
                    "source": "observed",
                    "valid_until": "2026-11-21T16:45:00.000Z",
                    "enforced": True,
                    "canary_brokers": [],
                    "report_on": {
                        "kind": "min-available-ratio",
                        "levels": [0.05],
                        "hysteresis": 0.0,
                        "metadata": None,
                        "move_share": 0.01,
                        "min_interval_ms": 250,
                        "take_hold": {},
                    },
                }
            ]
        }
    )

    defaults: QuotaLimits = Field(
        description="Per-broker quotas shared by clients that match nothing more specific"
    )
    overrides: list[OverrideModel]
    groups: list[GroupModel]
    excluded_principals: list[str] = Field(description="Principals never throttled, as User:<name>")
    precedence: list[str] = Field(
        description="Resolution order, most specific first: a client's quota of a type comes from the first of these levels "
        "that sets one. The broker shim resolves in this order."
    )
    factor: float = Field(
        ge=0, le=1, description="The throttle factor in force", json_schema_extra=DOUBLE
    )
    mutation_factor: float = Field(
        1.0,
        ge=0,
        le=1,
        description="What CONTROLLER_MUTATION quotas are multiplied by: the metadata volumes' factor (0: partition "
        "mutations refused, their hard limit reached; 1 when none is in breach or no metadata limit is set). A table "
        "without it means 1",
        json_schema_extra=DOUBLE,
    )
    factor_types: list[QuotaType]
    floors: QuotaLimits = Field(
        description="The lowest limit the factor brings a quota to, per type"
    )
    state: State
    source: FactorSource
    valid_until: str | None = Field(
        description="When the factor expires unless renewed (see /throttle-factor)"
    )
    enforced: bool = Field(
        description="Whether shims apply the factor: false (shadow mode) means every shim applies its quotas unscaled and "
        "reports what it would apply"
    )
    canary_brokers: list[int] = Field(
        description="When enforced, the only brokers whose shims apply the factor; a shim whose broker is not listed stays in "
        "shadow. Empty: every broker"
    )
    report_on: ReportOnModel | None = Field(
        None,
        description="When each node's shim reports its volumes at once (see ReportOnModel); absent or null: at its "
        "poll interval only",
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
    base_limit: Quota | None = Field(
        description="The configured quota before the factor; null: unlimited"
    )
    factor: float = Field(
        ge=0,
        le=1,
        description="The factor applied to this quota type (1.0 when it does not apply)",
        json_schema_extra=DOUBLE,
    )
    limit: Quota | None = Field(
        description="The effective limit the broker enforces; null: unlimited"
    )
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
    overrides = sorted(
        table.overrides.items(), key=lambda item: (PRECEDENCE.index(item[0].level), repr(item[0]))
    )
    return {
        "defaults": QuotaLimits.of(table.defaults),
        "overrides": [
            OverrideModel(
                entity=EntityModel.of(entity),
                level=entity.level.value,
                limits=QuotaLimits.of(limits),
            )
            for entity, limits in overrides
        ],
        "groups": [GroupModel.of(table.groups[name]) for name in sorted(table.groups)],
        "excluded_principals": [f"User:{name}" for name in sorted(table.excluded_principals)],
        "precedence": PRECEDENCE_NAMES,
        "factor_types": sorted(table.factor_types, key=lambda t: t.value),
        "floors": QuotaLimits.of(table.floors),
    }


_READING_FIELDS = (
    "factor",
    "mutation_factor",
    "state",
    "source",
    "valid_until",
    "enforced",
    "canary_brokers",
)


def _reading_fields(reading: FactorReading, enforcement: Enforcement) -> dict[str, Any]:
    """The fields of the table model that come from the factor reading and the enforcement
    (_READING_FIELDS)."""
    values = (
        reading.factor,
        reading.mutation_factor,
        State.of(reading.factor),
        reading.source,
        iso_instant(reading.valid_until),
        enforcement.enforced,
        list(enforcement.canary_brokers),
    )
    return dict(zip(_READING_FIELDS, values, strict=True))


TABLE_FIELDS = frozenset(QuotaTableModel.model_fields) - frozenset(_READING_FIELDS) - {"report_on"}


def table_model(
    table: QuotaTable,
    reading: FactorReading,
    enforcement: Enforcement = ENFORCE_EVERYWHERE,
    report_on: ReportOnModel | None = None,
) -> QuotaTableModel:
    return QuotaTableModel(
        **_table_fields(table), **_reading_fields(reading, enforcement), report_on=report_on
    )


def table_from_json(data: dict) -> QuotaTable:
    """The inverse of table_model for the table part (the shape of GET /quotas)."""
    return QuotaTable(
        defaults=QuotaLimits(**data.get("defaults", {})).to_limits(),
        overrides={
            QuotaEntity(
                entity_name(o["entity"].get("user")), entity_name(o["entity"].get("client_id"))
            ): QuotaLimits(**o["limits"]).to_limits()
            for o in data.get("overrides", [])
        },
        groups={
            g["name"]: QuotaGroup(
                g["name"],
                frozenset(g.get("users", [])),
                frozenset(g.get("client_ids", [])),
                QuotaLimits(**g["limits"]).to_limits(),
            )
            for g in data.get("groups", [])
        },
        excluded_principals=frozenset(
            p.removeprefix("User:") for p in data.get("excluded_principals", [])
        ),
        factor_types=frozenset(QuotaType(t) for t in data.get("factor_types", [])),
        floors=QuotaLimits(**data["floors"]).to_limits(),
    )


# What a change of /quotas' ETag means: everything a shim resolves with; not the validity and
# source, which move with the rounds (the validity travels in headers), except whether the table
# expires at all (a shim holding a table that expires must learn when it no longer does).
TABLE_ETAG_FIELDS = "every field but valid_until and source (enforced, canary_brokers, mutation_factor and report_on included); valid_until going from a time to null or back"


def table_etag_basis(
    model: QuotaTableModel, table_digest: str, report_on_digest: str | None = None
) -> bytes:
    """What the ETag covers: the table's fields (``table_digest``, the digest of them), the
    factor and state, whether it expires, and what the shims report on (``report_on_digest``,
    the digest of report_on, when there is one)."""
    basis: dict[str, Any] = {
        "table": table_digest,
        "factor": model.factor,
        "state": model.state.value,
        "expires": model.valid_until is not None,
        "enforced": model.enforced,
        "canary_brokers": model.canary_brokers,
    }
    if (
        model.mutation_factor != 1.0
    ):  # left out at 1: a service without metadata limits keeps its ETags
        basis["mutation_factor"] = model.mutation_factor
    if report_on_digest is not None:
        basis["report_on"] = report_on_digest
    return json.dumps(basis, sort_keys=True).encode()


def report_on_digest(model: ReportOnModel) -> str:
    return hashlib.blake2b(model.model_dump_json().encode(), digest_size=16).hexdigest()


def _table_digest(model: QuotaTableModel) -> str:
    table = json.dumps(
        model.model_dump(mode="json", include=set(TABLE_FIELDS)), sort_keys=True
    ).encode()
    return hashlib.blake2b(table, digest_size=16).hexdigest()


class QuotaTableRenderer:
    """The table model and its ETag basis for each reading. Every round renders the table anew
    (its validity moves); the table's own fields, and their digest, are converted once per
    table: 10,000 overrides take a third of a second to convert and a tenth to digest."""

    def __init__(self) -> None:
        self._table: QuotaTable | None = None  # held, so that ``is`` compares with a live object
        self._fields: dict[str, Any] = {}
        self._digest = ""
        # report_on, converted and digested once per ReportOn (a new one only when it changed)
        self._report_on: ReportOn | None = None
        self._report_on_model: ReportOnModel | None = None
        self._report_on_digest: str | None = None

    def render(
        self,
        table: QuotaTable,
        reading: FactorReading,
        enforcement: Enforcement = ENFORCE_EVERYWHERE,
        report_on: ReportOn | None = None,
    ) -> tuple[QuotaTableModel, bytes]:
        if report_on is not self._report_on:
            self._report_on = report_on
            self._report_on_model = None if report_on is None else ReportOnModel.of(report_on)
            self._report_on_digest = (
                None if self._report_on_model is None else report_on_digest(self._report_on_model)
            )
        if table is not self._table:
            model = table_model(table, reading, enforcement, self._report_on_model)
            self._table, self._fields, self._digest = (
                table,
                {name: getattr(model, name) for name in TABLE_FIELDS},
                _table_digest(model),
            )
        else:
            # The table's fields were validated when converted; the reading's are of their types.
            model = QuotaTableModel.model_construct(
                **self._fields,
                **_reading_fields(reading, enforcement),
                report_on=self._report_on_model,
            )
        return model, table_etag_basis(model, self._digest, self._report_on_digest)
