"""Quota resolution with Kafka's KIP-55 precedence, groups, excluded principals and the factor.

Pure functions. The broker shim implements the same rules; the shared test vectors in
tests/quota_vectors.json keep the two in step.

Order, most specific first, each quota type resolved on its own (a level that sets only a
fetch quota does not stop the search for a produce quota):
  (user, client-id), (user, default client-id), (user),
  a quota group naming the user or the client id,
  (default user, client-id), (default user, default client-id), (default user),
  (client-id), (default client-id),
  the defaults from the settings (one quota per broker, shared by all such clients),
  otherwise unlimited.
Excluded principals come before all of it: never throttled, tags of their own.

Metric tags follow Kafka's DefaultQuotaCallback: clients resolved at the same level and
entity share tags, and so share the quota; a default entity gives each user / client id
a quota of its own."""

from __future__ import annotations

from dataclasses import dataclass

from app.quotas.model import DEFAULT, EntityName, Level, QuotaEntity, QuotaGroup, QuotaTable, QuotaType

GROUP_LEVEL = "group"
EXCLUDED_LEVEL = "excluded principal"
DEFAULTS_LEVEL = "defaults"
UNLIMITED_LEVEL = "unlimited"
GROUP_TAG = "quota-group"


@dataclass(frozen=True, slots=True)
class Resolution:
    quota_type: QuotaType
    level: str
    entity: QuotaEntity | None
    group: str | None
    base_limit: float | None  # None: unlimited
    factor: float  # the factor applied to this type (1.0 when it does not apply)
    limit: float | None  # the effective limit the broker enforces; None: unlimited
    tags: dict[str, str]


_GROUP_STEP = None  # where quota groups are consulted in the precedence order
Candidate = tuple[EntityName, EntityName]


def _steps(user: str, client_id: str) -> list[Candidate | None]:
    """The (user, client id) entity that would match at each KIP-55 level, in precedence
    order, with the group step between the user's own levels and the default-user levels.
    An empty user or client id cannot be named by an entity; only defaults match it."""
    steps: list[Candidate | None] = []
    if user:
        if client_id:
            steps.append((user, client_id))
        steps += [(user, DEFAULT), (user, None)]
    steps.append(_GROUP_STEP)
    if client_id:
        steps.append((DEFAULT, client_id))
    steps += [(DEFAULT, DEFAULT), (DEFAULT, None)]
    if client_id:
        steps.append((None, client_id))
    steps.append((None, DEFAULT))
    return steps


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


def apply_factor(table: QuotaTable, quota_type: QuotaType, base: float | None, factor: float) -> tuple[float, float | None]:
    """(factor applied, effective limit). A throttled limit never falls below the floor
    (Kafka divides by it), nor is raised above the base by it."""
    if quota_type not in table.factor_types or factor >= 1.0:
        return 1.0, base
    floor = table.floors[quota_type]
    if base is None:
        # Unlimited scaled by a factor is still unlimited, except that a pause must pause.
        return factor, floor if factor <= 0.0 else None
    return factor, max(base * factor, min(floor, base))


def resolve(table: QuotaTable, user: str, client_id: str, quota_type: QuotaType, factor: float) -> Resolution:
    """The quota that applies to one client of one user for one quota type."""
    if user in table.excluded_principals:
        return Resolution(quota_type, EXCLUDED_LEVEL, None, None, None, 1.0, None, {"user": user, "client-id": client_id})

    def found(level: str, entity: QuotaEntity | None, group: str | None, base: float | None, tags: dict[str, str]) -> Resolution:
        applied, limit = apply_factor(table, quota_type, base, factor)
        return Resolution(quota_type, level, entity, group, base, applied, limit, tags)

    for step in _steps(user, client_id):
        if step is _GROUP_STEP:
            group = _group_of(table, user, client_id)
            if group is not None and quota_type in group.limits:
                tags = {"user": "", "client-id": "", GROUP_TAG: group.name}
                return found(GROUP_LEVEL, None, group.name, group.limits[quota_type], tags)
            continue
        match = table.override_index.get(step)
        if match is not None and quota_type in match[1]:
            entity, limits = match
            return found(entity.level.value, entity, None, limits[quota_type], _tags(entity.level, user, client_id))
    shared = {"user": "", "client-id": ""}
    if quota_type in table.defaults:
        return found(DEFAULTS_LEVEL, None, None, table.defaults[quota_type], shared)
    return found(UNLIMITED_LEVEL, None, None, None, shared)
