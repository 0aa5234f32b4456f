"""Client quotas as Kafka defines them: the four quota types, entities and KIP-55 levels."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Self


class QuotaType(str, enum.Enum):
    """Kafka's ClientQuotaType, in Kafka's units."""

    PRODUCE = "produce"  # bytes/s per broker
    FETCH = "fetch"  # bytes/s per broker
    REQUEST = "request"  # percent of one request handler / network thread
    CONTROLLER_MUTATION = "controller_mutation"  # partition mutations/s (KIP-599)


class _Default:
    """The default entity of a kind (Kafka's ``<default>``, kafka-configs' --entity-default)."""

    _instance: _Default | None = None

    def __new__(cls) -> Self:
        instance = cls._instance
        if not isinstance(instance, cls):
            instance = cls._instance = super().__new__(cls)
        return instance

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT = _Default()
EntityName = str | _Default | None  # a name, the default entity, or not part of the entity


class Level(str, enum.Enum):
    """Where a quota can come from, in the order resolution tries them, most specific first:
    the eight KIP-55 entity levels, with quota groups between a user's own levels and the
    default-user levels, excluded principals before everything and the settings' defaults
    after. The broker shim receives this order in the quota table and follows it."""

    EXCLUDED = "excluded principal"
    USER_CLIENT = "user, client-id"
    USER_DEFAULT_CLIENT = "user, default client-id"
    USER = "user"
    GROUP = "group"
    DEFAULT_USER_CLIENT = "default user, client-id"
    DEFAULT_USER_DEFAULT_CLIENT = "default user, default client-id"
    DEFAULT_USER = "default user"
    CLIENT = "client-id"
    DEFAULT_CLIENT = "default client-id"
    DEFAULTS = "defaults"
    UNLIMITED = "unlimited"


PRECEDENCE: tuple[Level, ...] = tuple(Level)  # the declaration order above


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    user: EntityName = None
    client_id: EntityName = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("an entity names a user, a client id, or both")
        for name in (self.user, self.client_id):
            if isinstance(name, str) and not name:
                raise ValueError("entity names must not be empty")

    @property
    def level(self) -> Level:
        user, client = self.user, self.client_id
        if isinstance(user, str):
            if isinstance(client, str):
                return Level.USER_CLIENT
            return Level.USER_DEFAULT_CLIENT if client is DEFAULT else Level.USER
        if user is DEFAULT:
            if isinstance(client, str):
                return Level.DEFAULT_USER_CLIENT
            return Level.DEFAULT_USER_DEFAULT_CLIENT if client is DEFAULT else Level.DEFAULT_USER
        return Level.CLIENT if isinstance(client, str) else Level.DEFAULT_CLIENT


QuotaValues = dict[QuotaType, float]  # a missing type means: no quota of that type here


@dataclass(frozen=True)
class QuotaGroup:
    """Several users and/or client ids sharing one quota (the KIP-257 scenario)."""

    name: str
    users: frozenset[str] = frozenset()
    client_ids: frozenset[str] = frozenset()
    limits: QuotaValues = field(default_factory=dict)


@dataclass(frozen=True)
class QuotaTable:
    """Everything needed to resolve any (user, client id, type), on the service or in a shim."""

    defaults: QuotaValues
    overrides: dict[QuotaEntity, QuotaValues]
    groups: dict[str, QuotaGroup]
    excluded_principals: frozenset[str]  # user names, without the "User:" prefix
    factor_types: frozenset[QuotaType]
    floors: dict[QuotaType, float]
    # member -> group name, derived from ``groups`` (a member belongs to one group at most)
    user_groups: dict[str, str] = field(init=False, repr=False, compare=False)
    client_groups: dict[str, str] = field(init=False, repr=False, compare=False)
    # (user, client id) -> (entity, limits): resolution looks up plain tuples, which is
    # several times cheaper than building an entity per candidate level
    override_index: dict[tuple[EntityName, EntityName], tuple[QuotaEntity, QuotaValues]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "override_index",
            {(e.user, e.client_id): (e, v) for e, v in self.overrides.items()},
        )
        object.__setattr__(
            self, "user_groups", {u: g.name for g in self.groups.values() for u in g.users}
        )
        object.__setattr__(
            self, "client_groups", {c: g.name for g in self.groups.values() for c in g.client_ids}
        )
