"""Quota overrides and groups persisted in SQLite (WAL), loaded once and kept in memory.

Every change is committed with synchronous=FULL before it is acknowledged, so an
acknowledged write survives kill -9 (and power loss). Reads never touch the database:
the service serves the in-memory table."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.quotas.model import DEFAULT, EntityName, QuotaValues, QuotaEntity, QuotaGroup, QuotaType

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS overrides (
    user_kind TEXT NOT NULL CHECK (user_kind IN ('name', 'default', 'none')),
    user_name TEXT NOT NULL,
    client_kind TEXT NOT NULL CHECK (client_kind IN ('name', 'default', 'none')),
    client_name TEXT NOT NULL,
    limits TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (user_kind, user_name, client_kind, client_name)
);
CREATE TABLE IF NOT EXISTS quota_groups (
    name TEXT PRIMARY KEY,
    users TEXT NOT NULL,
    client_ids TEXT NOT NULL,
    limits TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""


def _encode_name(name: EntityName) -> tuple[str, str]:
    if name is None:
        return "none", ""
    if name is DEFAULT:
        return "default", ""
    return "name", str(name)


def _decode_name(kind: str, name: str) -> EntityName:
    if kind == "name":
        return name
    return DEFAULT if kind == "default" else None


def _encode_limits(limits: QuotaValues) -> str:
    return json.dumps({t.value: v for t, v in sorted(limits.items(), key=lambda item: item[0].value)})


def _decode_limits(text: str) -> QuotaValues:
    return {QuotaType(t): float(v) for t, v in json.loads(text).items()}


class QuotaStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=5000")
        with self._transaction():
            for statement in _SCHEMA.strip().split(";"):
                if statement.strip():
                    self._db.execute(statement)
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            elif version > SCHEMA_VERSION:
                raise RuntimeError(f"{path} was written by a newer version (schema {version})")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def integrity_ok(self) -> bool:
        with self._lock:
            return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    # -- reads (start-up only) -----------------------------------------------------------
    def load_overrides(self) -> dict[QuotaEntity, QuotaValues]:
        with self._lock:
            rows = self._db.execute("SELECT user_kind, user_name, client_kind, client_name, limits FROM overrides").fetchall()
        return {QuotaEntity(_decode_name(uk, un), _decode_name(ck, cn)): _decode_limits(limits) for uk, un, ck, cn, limits in rows}

    def load_groups(self) -> dict[str, QuotaGroup]:
        with self._lock:
            rows = self._db.execute("SELECT name, users, client_ids, limits FROM quota_groups").fetchall()
        return {
            name: QuotaGroup(name, frozenset(json.loads(users)), frozenset(json.loads(clients)), _decode_limits(limits))
            for name, users, clients, limits in rows
        }

    # -- writes ------------------------------------------------------------------------------
    def put_override(self, entity: QuotaEntity, limits: QuotaValues, at: float) -> None:
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO overrides VALUES (?, ?, ?, ?, ?, ?)",
                (*_encode_name(entity.user), *_encode_name(entity.client_id), _encode_limits(limits), at),
            )

    def delete_override(self, entity: QuotaEntity) -> bool:
        with self._transaction():
            cursor = self._db.execute(
                "DELETE FROM overrides WHERE user_kind=? AND user_name=? AND client_kind=? AND client_name=?",
                (*_encode_name(entity.user), *_encode_name(entity.client_id)),
            )
            return cursor.rowcount > 0

    def put_group(self, group: QuotaGroup, at: float) -> None:
        with self._transaction():
            self._db.execute(
                "INSERT OR REPLACE INTO quota_groups VALUES (?, ?, ?, ?, ?)",
                (group.name, json.dumps(sorted(group.users)), json.dumps(sorted(group.client_ids)), _encode_limits(group.limits), at),
            )

    def delete_group(self, name: str) -> bool:
        with self._transaction():
            return self._db.execute("DELETE FROM quota_groups WHERE name=?", (name,)).rowcount > 0
