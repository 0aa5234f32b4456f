"""A node's report of its own volumes (PUT /nodes/{node_id}/volumes), as the shim sends it."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import CoreSchema, InitErrorDetails, SchemaValidator, core_schema

from app.observation.node_reports import (
    BROKER_ROLE,
    DATA,
    NodeReport,
    NodeVolume,
    node_report,
    node_volume,
    report_holds,
    report_roles,
)
from app.server.edge.json_bodies import keys_counted_once, refuse_duplicate_keys
from app.server.edge.problems import InvalidRequest

MAX_NODE_VOLUMES = 64
MAX_LOG_DIR_CHARS = 4096  # Linux's PATH_MAX
# Kafka's node.id is an int32; byte counts are a Java long's (FileStore's).
NodeId = Annotated[int, Field(ge=0, le=2**31 - 1)]
ByteCount = Annotated[int, Field(ge=0, le=2**63 - 1, strict=True)]


class NodeVolumeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log_dir: str = Field(
        min_length=2,
        max_length=MAX_LOG_DIR_CHARS,
        pattern=r"^/",
        description="The directory as configured (absolute path)",
    )
    total_bytes: ByteCount = Field(
        description="The file store's total space (FileStore.getTotalSpace())"
    )
    usable_bytes: ByteCount = Field(
        description="The file store's usable space (FileStore.getUsableSpace()), at most total_bytes"
    )
    holds: list[Literal["data", "metadata"]] = Field(
        min_length=1,
        max_length=2,
        description="What the directory holds, each once: the metadata log, data (a broker's log dir; only on a node with the "
        "broker role), or both",
    )

    def problem(self) -> str | None:
        """What makes this entry inconsistent, if anything (NodeVolumesBody checks every entry
        in one pass: a validator of each entry's own costs a call into Python per entry)."""
        if self.usable_bytes > self.total_bytes:
            return "usable_bytes must not exceed total_bytes"
        holds = self.holds
        if len(holds) == 2 and holds[0] == holds[1]:  # at most two entries (the field's bound)
            return "holds lists an entry twice"
        return None


class NodeVolumesBody(BaseModel):
    """What a node's shim sends once per poll interval: its roles and one entry per distinct
    configured directory (metadata.log.dir and the log.dirs entries)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "roles": ["controller"],
                    "volumes": [
                        {
                            "log_dir": "/var/lib/kafka/meta",
                            "total_bytes": 68719476736,
                            "usable_bytes": 1234567890,
                            "holds": ["metadata"],
                        }
                    ],
                }
            ]
        },
    )

    # Each role and each holds entry once: said in the descriptions and answered 422, not as
    # uniqueItems, which openapi-generator's Java client turns into a Set it cannot compile.
    roles: list[Literal["broker", "controller"]] = Field(
        min_length=1, max_length=2, description="The node's process.roles, each once"
    )
    volumes: list[NodeVolumeEntry] = Field(
        max_length=MAX_NODE_VOLUMES,
        description=f"At most {MAX_NODE_VOLUMES} entries, each log_dir once; an entry holding data needs the broker role among roles",
    )

    @model_validator(mode="after")
    def _consistent(self) -> NodeVolumesBody:
        # Each entry's problem at the entry (volumes.<i>), as a validator of the entry's own
        # would place it; the body's own only when every entry is consistent.
        volumes = self.volumes
        problems = [
            (index, volume, problem)
            for index, volume in enumerate(volumes)
            if (problem := volume.problem()) is not None
        ]
        if problems:
            raise ValidationError.from_exception_data(
                type(self).__name__,
                [
                    InitErrorDetails(
                        type="value_error",
                        loc=("volumes", index),
                        input=volume.model_dump(),
                        ctx={"error": ValueError(problem)},
                    )
                    for index, volume, problem in problems
                ],
            )
        roles = self.roles
        if len(roles) == 2 and roles[0] == roles[1]:  # at most two (the field's bound)
            raise ValueError("roles lists a role twice")
        if len({v.log_dir for v in volumes}) != len(volumes):
            raise ValueError("volumes lists a log_dir twice")
        if BROKER_ROLE not in roles and any(DATA in v.holds for v in volumes):
            raise ValueError("only a node with the broker role holds data")
        return self

    def json_keys(self) -> int:
        """The keys this body and its entries were given, each counted once (no other key is
        taken): with app/server/edge/json_bodies.py's ``keys_counted_once``, a cheap proof that
        the JSON gave none twice. Every field of both models is required and no other key is
        taken, so a valid body was given exactly each field of each."""
        return _BODY_KEYS + _ENTRY_KEYS * len(self.volumes)

    def report(self, node_id: int, received_at: float) -> NodeReport:
        return node_report(
            node_id,
            self.roles,
            tuple(
                [
                    node_volume(v.log_dir, v.total_bytes, v.usable_bytes, v.holds)
                    for v in self.volumes
                ]
            ),
            received_at,
        )


def _required_fields(model: type[BaseModel]) -> int:
    fields = model.model_fields
    # json_keys counts on it: a field with a default would be given or not.
    assert all(field.is_required() for field in fields.values()), model.__name__
    assert model.model_config.get("extra") == "forbid", model.__name__
    return len(fields)


_BODY_KEYS, _ENTRY_KEYS = _required_fields(NodeVolumesBody), _required_fields(NodeVolumeEntry)


def _field_schema(model: type[BaseModel], name: str) -> CoreSchema:
    """The core schema of ``model``'s field ``name``: its type with every constraint of its own."""
    field = model.model_fields[name]
    annotated: Any = Annotated[(field.annotation, *field.metadata)]
    return TypeAdapter(annotated).core_schema


_VOLUME_FIELDS = ("log_dir", "total_bytes", "usable_bytes", "holds")
assert tuple(NodeVolumeEntry.model_fields) == _VOLUME_FIELDS
# A body as NodeVolumesBody takes it, each entry made a NodeVolume at once (its ``holds`` the
# list as given, replaced by its set once read): no model, no entry object in between.
_PLAIN_BODY = SchemaValidator(
    core_schema.typed_dict_schema(
        {
            "roles": core_schema.typed_dict_field(_field_schema(NodeVolumesBody, "roles")),
            "volumes": core_schema.typed_dict_field(
                core_schema.list_schema(
                    core_schema.dataclass_schema(
                        NodeVolume,
                        core_schema.dataclass_args_schema(
                            NodeVolume.__name__,
                            [
                                core_schema.dataclass_field(
                                    name, _field_schema(NodeVolumeEntry, name)
                                )
                                for name in _VOLUME_FIELDS
                            ],
                            extra_behavior="forbid",
                        ),
                        list(_VOLUME_FIELDS),
                        slots=True,
                        frozen=True,
                    ),
                    max_length=MAX_NODE_VOLUMES,
                )
            ),
        },
        extra_behavior="forbid",
    )
)
_set_holds = vars(NodeVolume)["holds"].__set__  # the slot's descriptor


def plain_report(body: bytes) -> tuple[frozenset[str], tuple[NodeVolume, ...]] | None:
    """A node report's roles and volumes read straight from its JSON ``body``, when
    NodeVolumesBody takes the body and the report it makes is this one; None when the body
    is anything else (not JSON, refused by the model, a key given twice, or only not shown
    here to be none of those), to be judged by the model and answered as the app answers it.

    Every report of every node goes through here (1,000 nodes every second): the model's
    checks, the entries' consistency and the duplicate-key proof in one pass, without the
    body's and entries' model objects or a second copy of the entries."""
    try:
        parsed = _PLAIN_BODY.validate_json(body)
    except ValueError:  # a ValidationError, or not JSON
        return None
    roles = report_roles(parsed["roles"])
    volumes = parsed["volumes"]
    if roles is None or not _plain_volumes(volumes, BROKER_ROLE in roles):
        return None
    if not keys_counted_once(body, _BODY_KEYS + _ENTRY_KEYS * len(volumes)):
        try:
            refuse_duplicate_keys(body)
        except InvalidRequest:
            return None
    return roles, tuple(volumes)


def _plain_volumes(volumes: list[NodeVolume], broker: bool) -> bool:
    """Whether the entries are consistent as NodeVolumesBody judges them (each volume's holds
    set in place of its list)."""
    log_dirs = set()
    for volume in volumes:
        holds = report_holds(volume.holds)
        if (
            holds is None
            or volume.usable_bytes > volume.total_bytes
            or (not broker and DATA in holds)
        ):
            return False
        _set_holds(volume, holds)
        log_dirs.add(volume.log_dir)
    return len(log_dirs) == len(volumes)
