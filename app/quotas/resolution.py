"""Quota resolution with Kafka's KIP-55 precedence, groups, excluded principals and the factor.

Pure functions. The broker shim implements the same rules; the shared test vectors in
tests/quota_vectors.json keep the two in step.

The order is ``PRECEDENCE`` (app/quotas/model.py), each quota type resolved on its own (a
level that sets only a fetch quota does not stop the search for a produce quota). Excluded
principals come before all of it: never throttled, tags of their own.

Metric tags follow Kafka's DefaultQuotaCallback: clients resolved at the same level and
entity share tags, and so share the quota; a default entity gives each user / client id
a quota of its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.quotas.model import (
    DEFAULT,
    PRECEDENCE,
    EntityName,
    Level,
    QuotaEntity,
    QuotaGroup,
    QuotaTable,
    QuotaType,
)

GROUP_TAG = "quota-group"


@dataclass(frozen=True, slots=True)
class Resolution:
    quota_type: QuotaType
    level: Level
    entity: QuotaEntity | None
    group: str | None
    base_limit: float | None  # None: unlimited
    factor: float  # the factor applied to this type (1.0 when it does not apply)
    limit: float | None  # the effective limit the broker enforces; None: unlimited
    tags: dict[str, str]


Candidate = tuple[EntityName, EntityName]

# The (user, client id) entity that would match a client at each entity level. An empty user
# or client id cannot be named by an entity; only defaults match it.
_CANDIDATES: dict[Level, Callable[[str, str], Candidate | None]] = {
    Level.USER_CLIENT: lambda user, client_id: (user, client_id) if user and client_id else None,
    Level.USER_DEFAULT_CLIENT: lambda user, client_id: (user, DEFAULT) if user else None,
    Level.USER: lambda user, client_id: (user, None) if user else None,
    Level.DEFAULT_USER_CLIENT: lambda user, client_id: (DEFAULT, client_id) if client_id else None,
    Level.DEFAULT_USER_DEFAULT_CLIENT: lambda user, client_id: (DEFAULT, DEFAULT),
    Level.DEFAULT_USER: lambda user, client_id: (DEFAULT, None),
    Level.CLIENT: lambda user, client_id: (None, client_id) if client_id else None,
    Level.DEFAULT_CLIENT: lambda user, client_id: (None, DEFAULT),
}
_STEPS = tuple((level, _CANDIDATES.get(level)) for level in PRECEDENCE)
_SHARED_TAGS = {"user": "", "client-id": ""}


def _tags(level: Level, user: str, client_id: str) -> dict[str, str]:
    if level in (Level.USER, Level.DEFAULT_USER):
        return {"user": user, "client-id": ""}
    if level in (Level.CLIENT, Level.DEFAULT_CLIENT):
        return {"user": "", "client-id": client_id}
    return {"user": user, "client-id": client_id}


def _group_of(table: QuotaTable, user: str, client_id: str) -> QuotaGroup | None:
    """The group naming the user, else the group naming the client id."""
    name = table.user_groups.get(user) or table.client_groups.get(client_id)
    return table.groups[name] if name else None


def apply_factor(
    table: QuotaTable, quota_type: QuotaType, base: float | None, factor: float
) -> tuple[float, float | None]:
    """(factor applied, effective limit). A throttled limit never falls below the floor
    (Kafka divides by it), nor is raised above the base by it."""
    if quota_type not in table.factor_types or factor >= 1.0:
        return 1.0, base
    floor = table.floors[quota_type]
    if base is None:
        # Unlimited scaled by a factor is still unlimited, except that a pause must pause.
        return factor, floor if factor <= 0.0 else None
    return factor, max(base * factor, min(floor, base))


def resolve(
    table: QuotaTable, user: str, client_id: str, quota_type: QuotaType, factor: float
) -> Resolution:
    """The quota that applies to one client of one user for one quota type: the first level
    of PRECEDENCE that sets a quota of this type."""

    def found(
        level: Level,
        entity: QuotaEntity | None,
        group: str | None,
        base: float | None,
        tags: dict[str, str],
    ) -> Resolution:
        applied, limit = apply_factor(table, quota_type, base, factor)
        return Resolution(quota_type, level, entity, group, base, applied, limit, tags)

    for level, candidate_of in _STEPS:
        if candidate_of is not None:  # an entity level: the most common case first
            candidate = candidate_of(user, client_id)
            match = table.override_index.get(candidate) if candidate is not None else None
            if match is not None and quota_type in match[1]:
                entity, values = match
                return found(level, entity, None, values[quota_type], _tags(level, user, client_id))
        elif level is Level.EXCLUDED:
            if user in table.excluded_principals:
                return Resolution(
                    quota_type,
                    level,
                    None,
                    None,
                    None,
                    1.0,
                    None,
                    {"user": user, "client-id": client_id},
                )
        elif level is Level.GROUP:
            group = _group_of(table, user, client_id)
            if group is not None and quota_type in group.limits:
                return found(
                    level,
                    None,
                    group.name,
                    group.limits[quota_type],
                    {"user": "", "client-id": "", GROUP_TAG: group.name},
                )
        elif level is Level.DEFAULTS:
            if quota_type in table.defaults:
                return found(level, None, None, table.defaults[quota_type], dict(_SHARED_TAGS))
        else:
            break  # unlimited
    return found(Level.UNLIMITED, None, None, None, dict(_SHARED_TAGS))
