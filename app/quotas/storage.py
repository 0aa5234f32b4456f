"""What the quota service asks of a quota store: the SQLite store of one replica
(app/quotas/store.py) and the Kafka-backed store every replica shares (app/quotas/kafka_store.py)
both are one. A store that others may change tells its followers (``follow``); one that must be
read before its table is whole says so (``loaded``, ``lag``, ``error``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from app.decision.enforcement import Enforcement
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaValues


class QuotaStorage(Protocol):
    # Others write to it too: after a write, what it holds is read back (other replicas' changes
    # included) rather than the change applied to the table in memory.
    shared: bool

    @property
    def loaded(self) -> bool:
        """The table read from the store is whole (a topic read to its end at start-up)."""
        ...

    @property
    def lag(self) -> int:
        """Changes made elsewhere not yet read (0 where nobody else writes)."""
        ...

    @property
    def error(self) -> str | None:
        """The latest reason the store could not be read, if any."""
        ...

    def follow(self, listener: Callable[[], object]) -> None:
        """Call ``listener`` (on any thread) after every change made elsewhere is read."""
        ...

    def close(self) -> None: ...

    def load_overrides(self) -> dict[QuotaEntity, QuotaValues]: ...

    def load_groups(self) -> dict[str, QuotaGroup]: ...

    def load_enforcement(self) -> Enforcement | None: ...

    def put_enforcement(self, enforcement: Enforcement, at: float) -> None: ...

    def delete_enforcement(self) -> bool: ...

    def put_override(self, entity: QuotaEntity, limits: QuotaValues, at: float) -> None: ...

    def delete_override(self, entity: QuotaEntity) -> bool: ...

    def put_group(self, group: QuotaGroup, at: float) -> None: ...

    def delete_group(self, name: str) -> bool: ...
