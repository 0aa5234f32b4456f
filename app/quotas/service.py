"""The quota table in force: settings + persisted overrides and groups + the throttle factor.

Mutations are written to the store first and applied to the in-memory table only once
committed; readers always see a complete, immutable table."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable

from app.clock import Clock
from app.decision.enforcement import Enforcement
from app.decision.factor import FactorReading
from app.quotas.change_rules import FLOOR_SETTINGS, table_size_problem
from app.quotas.kafka_store import ChangeRefused
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaTable, QuotaType, QuotaValues
from app.quotas.resolution import Resolution, resolve
from app.quotas.storage import QuotaStorage
from app.settings import Settings
from app.settings.model import QUOTA_MAX

log = logging.getLogger("app.decision")


class MembershipConflict(ValueError):
    pass


class TableFull(ValueError):
    """The change would take the table past its cap (throttle.service.quota.table.max.entries)."""


def table_from_settings(
    settings: Settings, overrides: dict[QuotaEntity, QuotaValues], groups: dict[str, QuotaGroup]
) -> QuotaTable:
    defaults = {
        quota_type: value
        for quota_type, value in (
            (QuotaType.PRODUCE, settings.produce),
            (QuotaType.FETCH, settings.fetch),
            (QuotaType.REQUEST, settings.request),
            (QuotaType.CONTROLLER_MUTATION, settings.controller_mutation),
        )
        if value is not None
    }
    return QuotaTable(
        defaults=defaults,
        overrides={entity: _at_most_the_maximum(limits) for entity, limits in overrides.items()},
        groups={
            name: dataclasses.replace(group, limits=_at_most_the_maximum(group.limits))
            for name, group in groups.items()
        },
        excluded_principals=settings.excluded_principals,
        factor_types=frozenset(QuotaType(t) for t in settings.factor_types),
        floors={
            quota_type: getattr(settings, field) for quota_type, field in FLOOR_SETTINGS.items()
        },
    )


def _at_most_the_maximum(limits: QuotaValues) -> QuotaValues:
    """A quota stored above QUOTA_MAX before changes were held to it (1e39, say) is served as
    QUOTA_MAX: Kafka treats both alike, and clients read no larger double than the document
    allows."""
    if all(value <= QUOTA_MAX for value in limits.values()):
        return limits
    return {quota_type: min(value, QUOTA_MAX) for quota_type, value in limits.items()}


class QuotaService:
    """``store`` is the SQLite store (this replica's own) or the Kafka-backed one (shared by
    every replica): this service follows it, so changes made through other replicas arrive from
    it, and the table is always the store's."""

    def __init__(
        self,
        settings: Settings,
        store: QuotaStorage,
        reading: Callable[[float], FactorReading],
        clock: Clock,
    ) -> None:
        self.store = store
        self.clock = clock
        self._settings = settings
        self._reading = reading
        self.table = table_from_settings(settings, store.load_overrides(), store.load_groups())
        self._writes = asyncio.Lock()
        self._listeners: list[Callable[[], object]] = []
        self._enforcement_listeners: list[Callable[[], object]] = []
        self.stored_enforcement: Enforcement | None = store.load_enforcement()
        self.write_failures = 0  # writes the store did not take (unreachable, refused, timed out)
        loop = asyncio.get_running_loop()
        store.follow(lambda: loop.call_soon_threadsafe(self.reload))

    @property
    def ready(self) -> bool:
        """The table is the store's: a Kafka-backed store has been read to its end."""
        return self.store.loaded

    @property
    def store_lag(self) -> int:
        """Records of the Kafka store's topic not yet applied by this replica (0 for SQLite)."""
        return self.store.lag

    async def _stored(self, write: Callable[..., object], *args: object) -> None:
        """Run a store write on a worker thread, counting the failures that are the store's."""
        try:
            await asyncio.to_thread(write, *args)
        except ChangeRefused:
            raise  # the change was taken and judged, not a failure of the store
        except Exception:
            self.write_failures += 1
            raise

    def on_change(self, listener: Callable[[], object]) -> None:
        self._listeners.append(listener)

    def on_enforcement_change(self, listener: Callable[[], object]) -> None:
        self._enforcement_listeners.append(listener)

    @property
    def enforcement(self) -> Enforcement:
        """The enforcement in force: the store's once set through the API, else the settings'."""
        stored = self.stored_enforcement
        return self._settings.initial_enforcement if stored is None else stored

    @property
    def enforcement_source(self) -> str:
        return "settings" if self.stored_enforcement is None else "store"

    def reload(self) -> None:
        """Take the table and the enforcement from the store (a followed store changed)."""
        table = table_from_settings(
            self._settings, self.store.load_overrides(), self.store.load_groups()
        )
        if (table.overrides, table.groups) != (self.table.overrides, self.table.groups):
            self.table = table
            for listener in self._listeners:
                listener()
        self._take_enforcement(self.store.load_enforcement())

    def _take_enforcement(self, stored: Enforcement | None) -> None:
        before = self.enforcement
        self.stored_enforcement = stored
        if self.enforcement != before:
            source = "the settings" if stored is None else "the quota store"
            log.warning(
                "enforcement %s, was %s (from %s)",
                self.enforcement.describe(),
                before.describe(),
                source,
            )
            for listener in self._enforcement_listeners:
                listener()

    async def set_enforcement(self, enforcement: Enforcement) -> None:
        """Keep ``enforcement`` in the store: it wins over the settings from now on."""
        async with self._writes:
            await self._stored(self.store.put_enforcement, enforcement, self.clock())
            self._take_enforcement(
                self.store.load_enforcement() if self.store.shared else enforcement
            )

    async def clear_enforcement(self) -> bool:
        """Remove the stored enforcement: the settings' holds again. False when none was stored."""
        async with self._writes:
            if self.stored_enforcement is None:
                return False
            await self._stored(self.store.delete_enforcement)
            self._take_enforcement(self.store.load_enforcement() if self.store.shared else None)
            return True

    def _replace(
        self,
        overrides: dict[QuotaEntity, QuotaValues] | None = None,
        groups: dict[str, QuotaGroup] | None = None,
    ) -> None:
        if self.store.shared:
            self.reload()  # what the store applied, other replicas' changes included
            return
        self.table = dataclasses.replace(
            self.table,
            overrides=self.table.overrides if overrides is None else overrides,
            groups=self.table.groups if groups is None else groups,
        )
        for listener in self._listeners:
            listener()

    def factor_reading(self, now: float | None = None) -> FactorReading:
        return self._reading(self.clock() if now is None else now)

    def resolve(self, user: str, client_id: str, quota_type: QuotaType) -> Resolution:
        return resolve(self.table, user, client_id, quota_type, self.factor_reading().factor)

    async def put_override(self, entity: QuotaEntity, limits: QuotaValues) -> None:
        async with self._writes:
            self._check_size(entity=entity)
            await self._stored(self.store.put_override, entity, limits, self.clock())
            self._replace(overrides={**self.table.overrides, entity: dict(limits)})

    def _check_size(
        self, entity: QuotaEntity | None = None, group: QuotaGroup | None = None
    ) -> None:
        problem = table_size_problem(
            self.table, self._settings.quota_table_max_entries, entity, group
        )
        if problem:
            raise TableFull(problem)

    async def delete_override(self, entity: QuotaEntity) -> bool:
        async with self._writes:
            if entity not in self.table.overrides:
                return False
            await self._stored(self.store.delete_override, entity)
            self._replace(overrides={e: v for e, v in self.table.overrides.items() if e != entity})
            return True

    async def put_group(self, group: QuotaGroup) -> None:
        async with self._writes:
            for user in group.users:
                owner = self.table.user_groups.get(user)
                if owner not in (None, group.name):
                    raise MembershipConflict(f"user {user!r} already belongs to group {owner!r}")
            for client_id in group.client_ids:
                owner = self.table.client_groups.get(client_id)
                if owner not in (None, group.name):
                    raise MembershipConflict(
                        f"client id {client_id!r} already belongs to group {owner!r}"
                    )
            self._check_size(group=group)
            try:
                await self._stored(self.store.put_group, group, self.clock())
            except ChangeRefused as exc:  # another replica's group took the member first
                self.reload()
                raise MembershipConflict(str(exc)) from None
            self._replace(groups={**self.table.groups, group.name: group})

    async def delete_group(self, name: str) -> bool:
        async with self._writes:
            if name not in self.table.groups:
                return False
            await self._stored(self.store.delete_group, name)
            self._replace(groups={n: g for n, g in self.table.groups.items() if n != name})
            return True
