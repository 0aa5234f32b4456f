"""Quota overrides and groups as a log of records: what the Kafka-backed store writes to its
compacted topic, and the table every replica builds by applying the same records in the same
order. Pure: no I/O.

A record's key names an override's entity or a group; its value holds the quotas (and a
group's members), or is empty (a tombstone) for a delete. Compaction keeps the latest record
of each key, so the topic stays as small as the table.

Replicas apply the log in offset order, so they agree on everything, also when two of them
accept conflicting changes at the same time: a group record that would give a member a second
group is not applied (the member's first group keeps it), on every replica alike, and the
replica that wrote it tells its client so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.decision.enforcement import Enforcement
from app.quotas.model import DEFAULT, EntityName, QuotaEntity, QuotaGroup, QuotaType, QuotaValues

OVERRIDE = "override"
GROUP = "group"
ENFORCEMENT = "enforcement"  # one key: the enforcement set through the API (a tombstone returns to the settings)


def _name_json(name: EntityName) -> str | dict[str, bool] | None:
    # The default entity is not a name: a user called "<default>" stays a user.
    if name is None or isinstance(name, str):
        return name
    return {"default": True}


def _name_from_json(value: object) -> EntityName:
    if isinstance(value, dict):
        if value != {"default": True}:
            raise ValueError(
                f"an entity name is a string, null or {{'default': true}}, not {value!r}"
            )
        return DEFAULT
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"an entity name is a string, null or {{'default': true}}, not {value!r}")


def _encode(data: object) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _values_json(values: QuotaValues) -> dict[str, float]:
    return {
        quota_type.value: value
        for quota_type, value in sorted(values.items(), key=lambda item: item[0].value)
    }


def _values_from_json(data: dict[str, float]) -> QuotaValues:
    return {QuotaType(name): float(value) for name, value in data.items()}


def override_key(entity: QuotaEntity) -> bytes:
    return _encode(
        {
            "kind": OVERRIDE,
            "user": _name_json(entity.user),
            "client_id": _name_json(entity.client_id),
        }
    )


def group_key(name: str) -> bytes:
    return _encode({"kind": GROUP, "name": name})


def enforcement_key() -> bytes:
    return _encode({"kind": ENFORCEMENT})


def enforcement_value(enforcement: Enforcement) -> bytes:
    return _encode(
        {"mode": enforcement.mode.value, "canary_brokers": list(enforcement.canary_brokers)}
    )


def override_value(values: QuotaValues) -> bytes:
    return _encode({"quotas": _values_json(values)})


def group_value(group: QuotaGroup) -> bytes:
    return _encode(
        {
            "users": sorted(group.users),
            "client_ids": sorted(group.client_ids),
            "quotas": _values_json(group.limits),
        }
    )


@dataclass(frozen=True)
class Applied:
    """What applying one record did."""

    key: bytes
    accepted: bool
    reason: str = ""


@dataclass
class QuotaLog:
    """The overrides and groups that the records applied so far make."""

    overrides: dict[QuotaEntity, QuotaValues] = field(default_factory=dict)
    groups: dict[str, QuotaGroup] = field(default_factory=dict)
    enforcement: Enforcement | None = None  # None: the settings' enforcement holds

    def apply(self, key: bytes, value: bytes | None) -> Applied:
        """Apply one record (``value`` None: a tombstone). A record the service cannot read
        (another writer, another version) is skipped, not fatal: it is reported."""
        try:
            header = json.loads(key)
            kind = header["kind"]
            if kind == OVERRIDE:
                entity = QuotaEntity(
                    _name_from_json(header["user"]), _name_from_json(header["client_id"])
                )
                if value is None:
                    self.overrides.pop(entity, None)
                else:
                    self.overrides[entity] = _values_from_json(json.loads(value)["quotas"])
                return Applied(key, True)
            if kind == GROUP:
                name = header["name"]
                if not isinstance(name, str) or not name:
                    raise ValueError("a group needs a name")
                if value is None:
                    self.groups.pop(name, None)
                    return Applied(key, True)
                data = json.loads(value)
                group = QuotaGroup(
                    name,
                    frozenset(data["users"]),
                    frozenset(data["client_ids"]),
                    _values_from_json(data["quotas"]),
                )
                conflict = self._membership_conflict(group)
                if conflict:
                    return Applied(key, False, conflict)
                self.groups[name] = group
                return Applied(key, True)
            if kind == ENFORCEMENT:
                if value is None:
                    self.enforcement = None
                else:
                    data = json.loads(value)
                    brokers = data["canary_brokers"]
                    if not isinstance(brokers, list) or not all(
                        isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in brokers
                    ):
                        raise ValueError(
                            f"canary brokers must be a list of broker ids, not {brokers!r}"
                        )
                    self.enforcement = Enforcement.of(data["mode"], brokers)
                return Applied(key, True)
            raise ValueError(f"unknown record kind {kind!r}")
        except (ValueError, KeyError, TypeError) as exc:
            return Applied(key, False, f"unreadable record: {exc}")

    def _membership_conflict(self, group: QuotaGroup) -> str:
        for other in self.groups.values():
            if other.name == group.name:
                continue
            for user in sorted(group.users & other.users):
                return f"user {user!r} already belongs to group {other.name!r}"
            for client_id in sorted(group.client_ids & other.client_ids):
                return f"client id {client_id!r} already belongs to group {other.name!r}"
        return ""
