"""Quota overrides and groups persisted in SQLite (WAL), loaded once and kept in memory.

Every change is committed with synchronous=FULL before it is acknowledged, so an
acknowledged write survives kill -9 (and power loss). Reads never touch the database:
the service serves the in-memory table.

The store never comes back silently damaged, empty or older than what it acknowledged.
Opening it checks, before anything is written:

- the file's integrity (``PRAGMA integrity_check``) and schema version;
- its generation (the number of changes committed to it) against the generation file kept
  beside it: fewer means changes were lost (emptied, deleted, its -wal file lost, an older
  copy put in place);
- with no generation file beside it (a file copied to another host), whether it was copied
  without its -wal file while a service had it open: a mark set in the file itself (and
  checkpointed into it) while it is open, cleared when it is closed.

A damaged file or a newer schema is always refused; a store that lost changes only until the
operator accepts it as it is (``accept_loss``), which makes it the generation to expect."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from app.decision.enforcement import Enforcement
from app.quotas.generation import (
    Generation,
    GenerationUnreadable,
    generation_path,
    read_generation,
    write_generation,
)
from app.quotas.model import DEFAULT, EntityName, QuotaEntity, QuotaGroup, QuotaType, QuotaValues

QUOTA_STORE_FILE = "quotas.sqlite3"
SCHEMA_VERSION = 3  # 2 added store_state: the generation and the mark of use; 3 the enforcement
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
CREATE TABLE IF NOT EXISTS store_state (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
    generation INTEGER NOT NULL,
    in_use INTEGER NOT NULL
);
INSERT OR IGNORE INTO store_state VALUES (0, 0, 0);
CREATE TABLE IF NOT EXISTS enforcement (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 0),
    mode TEXT NOT NULL,
    canary_brokers TEXT NOT NULL,
    updated_at REAL NOT NULL
);
"""
_BACKUP_HINT = "a backup made with `throttle-service backup`"
_ACCEPT_HINT = "start once with --accept-empty-store"

log = logging.getLogger(__name__)


def store_file(data_dir: str | Path) -> Path:
    return Path(data_dir) / QUOTA_STORE_FILE


def wal_file(store: Path) -> Path:
    return store.with_name(store.name + "-wal")


class StoreRefused(Exception):
    """The store cannot be used as it is: ``problem`` says what is wrong, naming the file,
    ``remedy`` what to do."""

    def __init__(self, problem: str, remedy: str) -> None:
        super().__init__(f"{problem}: {remedy}")
        self.problem = problem
        self.remedy = remedy


def damaged_store(path: Path, what: str) -> StoreRefused:
    return StoreRefused(
        f"quota store {path} is damaged ({what})",
        f"move it aside, then copy {_BACKUP_HINT} into its place, or {_ACCEPT_HINT} to begin with an empty store",
    )


def sqlite_refusal(path: Path, exc: sqlite3.Error) -> StoreRefused:
    """SQLite's own error, as what is wrong with the file and what to do."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return damaged_store(path, str(exc))
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StoreRefused(
            f"quota store {path} is locked by another process ({exc})",
            "stop the other throttle-service using this data dir, or give this one a data dir of its own (throttle.service.data.dir)",
        )
    return StoreRefused(
        f"quota store {path} cannot be used ({exc})",
        "check the file, its -wal file and their permissions",
    )


def integrity_problem(db: sqlite3.Connection) -> str | None:
    """What ``PRAGMA integrity_check`` finds wrong, on one line; None when the file is whole.
    The full check, not quick_check: it also compares every index with its table, and takes
    well under a second for a hundred thousand overrides."""
    findings = [row[0] for row in db.execute("PRAGMA integrity_check(3)")]
    if findings == ["ok"]:
        return None
    return "; ".join(
        line.strip() for finding in findings for line in finding.splitlines() if line.strip()
    )[:300]


def _rollback_journal_header(path: Path) -> bool:
    """Whether the file's header says rollback journal, not WAL (bytes 18 and 19 are 1): a
    backup's. The store itself is in WAL mode from its first opening on."""
    with suppress(OSError), path.open("rb") as file:
        header = file.read(20)
        return header.startswith(b"SQLite format 3\x00") and header[18:20] == b"\x01\x01"
    return False


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    return (
        db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        is not None
    )


def held_generation(db: sqlite3.Connection) -> tuple[Generation, bool]:
    """The generation the database holds, and whether it is marked in use; a new database (or
    one of schema 1) has committed no counted change."""
    overrides = (
        db.execute("SELECT count(*) FROM overrides").fetchone()[0]
        if _has_table(db, "overrides")
        else 0
    )
    groups = (
        db.execute("SELECT count(*) FROM quota_groups").fetchone()[0]
        if _has_table(db, "quota_groups")
        else 0
    )
    number, in_use = 0, False
    if _has_table(db, "store_state"):
        number, in_use = db.execute("SELECT generation, in_use FROM store_state").fetchone()
    return Generation(number, overrides, groups), bool(in_use)


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
    return json.dumps(
        {t.value: v for t, v in sorted(limits.items(), key=lambda item: item[0].value)}
    )


def _decode_limits(text: str) -> QuotaValues:
    return {QuotaType(t): float(v) for t, v in json.loads(text).items()}


class QuotaStore:
    def __init__(self, path: Path, accept_loss: bool = False) -> None:
        """Open the store at ``path`` (created if missing), checked as the module says; raises
        StoreRefused. ``accept_loss`` takes a store that lost changes as it is;
        ``accepted_loss`` then says what was accepted."""
        self.path = path
        self.generation_path = generation_path(path)
        self.accepted_loss: str | None = None
        self._lock = threading.RLock()
        self._recording_failed = False
        recorded = self._recorded()
        wal = wal_file(path)
        wal_holds_frames = wal.is_file() and wal.stat().st_size > 0
        if wal_holds_frames and _rollback_journal_header(path):
            raise self._foreign_wal()
        loss = self._lost_file(recorded)  # before SQLite creates or initialises anything
        if loss is not None and not accept_loss:
            raise loss
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise sqlite_refusal(path, exc) from None
        try:
            self._db.execute("PRAGMA busy_timeout=5000")
            self.generation = self._checked_generation(
                recorded, wal_holds_frames, loss, accept_loss
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA.strip().split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                self._db.execute(
                    "UPDATE store_state SET generation = ?, in_use = 1", (self.generation.number,)
                )
            # The mark of use goes into the file itself, so that a copy of the file alone says so.
            self._db.execute("PRAGMA wal_checkpoint(FULL)")
        except sqlite3.Error as exc:
            self._db.close()
            raise sqlite_refusal(path, exc) from None
        except StoreRefused:
            self._db.close()
            raise
        self._record(self.generation)

    # -- the checks at opening -----------------------------------------------------------------
    def _recorded(self) -> Generation | None:
        try:
            return read_generation(self.generation_path)
        except GenerationUnreadable as exc:
            # It is written without a sync: a power cut may leave it so. The mark of use in the
            # file still tells a file copied without its -wal file.
            log.warning(
                "%s cannot be read (%s): checking the quota store without it",
                self.generation_path,
                exc,
            )
            return None

    def _foreign_wal(self) -> StoreRefused:
        """A -wal file beside a file in rollback-journal mode: the file is a backup put in place
        of a store that was not stopped cleanly, and the -wal file is that store's. SQLite
        would apply it to the backup: the old store's pages over the restored ones."""
        wal, shm = wal_file(self.path), self.path.with_name(self.path.name + "-shm")
        return StoreRefused(
            f"quota store {self.path} is a copy made by `throttle-service backup`, but {wal.name} beside it belongs to the store it replaced",
            f"delete {wal.name} and {shm.name} (restoring means: stop the service, delete both, copy the backup into place), then start again",
        )

    def _lost_file(self, recorded: Generation | None) -> StoreRefused | None:
        if not self.path.exists():
            if recorded is None or recorded.empty:
                return None  # a new store, or one that held nothing
            return StoreRefused(
                f"quota store {self.path} is missing, but {self.generation_path.name} beside it records {recorded.holding()} (change {recorded.number})",
                f"put the file back, or copy {_BACKUP_HINT} into its place, or {_ACCEPT_HINT} to begin with an empty store",
            )
        if self.path.stat().st_size == 0 and (recorded is None or not recorded.empty):
            # SQLite writes a header into every file it creates (and drops the -wal file of an
            # empty one): an empty file was emptied.
            recorded_text = (
                f", but {self.generation_path.name} beside it records {recorded.holding()}"
                if recorded
                else ""
            )
            return StoreRefused(
                f"quota store {self.path} is empty (0 bytes){recorded_text}",
                f"copy {_BACKUP_HINT} into its place, or {_ACCEPT_HINT} to begin with an empty store",
            )
        return None

    def _checked_generation(
        self,
        recorded: Generation | None,
        wal_holds_frames: bool,
        loss: StoreRefused | None,
        accept_loss: bool,
    ) -> Generation:
        """Check the open file; returns the generation to go on from: a new one, past both the
        file's and the recorded one, when a loss is accepted."""
        found = integrity_problem(self._db)
        if found is not None:
            raise damaged_store(self.path, f"integrity check: {found}")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreRefused(
                f"quota store {self.path} was written by a newer throttle-service (schema {version}; this one reads up to {SCHEMA_VERSION})",
                f"run that version, or copy {_BACKUP_HINT} of this version into its place",
            )
        held, in_use = held_generation(self._db)
        if loss is None:
            loss = self._lost_changes(held, in_use, recorded, wal_holds_frames)
        if loss is None:
            return held
        if not accept_loss:
            raise loss
        self.accepted_loss = loss.problem
        return Generation(
            max(held.number, recorded.number if recorded else 0) + 1, held.overrides, held.groups
        )

    def _lost_changes(
        self, held: Generation, in_use: bool, recorded: Generation | None, wal_holds_frames: bool
    ) -> StoreRefused | None:
        if recorded is not None:
            if held.number >= recorded.number or (held.empty and recorded.empty):
                return None
            return StoreRefused(
                f"quota store {self.path} holds {held.holding()} (change {held.number}), but {self.generation_path.name} beside it "
                f"records {recorded.holding()} at change {recorded.number}, so it came back older (its -wal file lost, or an older copy put in place)",
                f"put the latest copy back with its -wal file; to use it as it is (a backup restored on purpose), {_ACCEPT_HINT}",
            )
        if in_use and not wal_holds_frames:
            return StoreRefused(
                f"quota store {self.path} was copied without its -wal file while a service had it open, so it may lack the latest changes",
                f"copy the {wal_file(self.path).name} file beside it, or use {_BACKUP_HINT}; to use it as it is, {_ACCEPT_HINT}",
            )
        return None

    # -- transactions ---------------------------------------------------------------------------
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

    @contextmanager
    def _change(self) -> Iterator[None]:
        """A quota change: committed with the next generation, which is then recorded beside
        the file (under the lock, so the file follows the commits in their order)."""
        with self._lock:
            with self._transaction():
                yield
                self._db.execute("UPDATE store_state SET generation = generation + 1")
                counts = self._db.execute(
                    "SELECT generation, (SELECT count(*) FROM overrides), (SELECT count(*) FROM quota_groups) FROM store_state"
                ).fetchone()
            self.generation = Generation(*counts)
            self._record(self.generation)

    def _record(self, generation: Generation) -> None:
        """Write the generation file. The change is committed whatever happens here: a failure
        leaves the previous, lower generation, which refuses nothing, so it is logged (once
        until a write succeeds again) rather than failing the change."""
        try:
            write_generation(self.generation_path, generation)
        except OSError as exc:
            if not self._recording_failed:
                log.warning(
                    "could not record the quota store's generation in %s: %s",
                    self.generation_path,
                    exc,
                )
            self._recording_failed = True
            return
        if self._recording_failed:
            log.warning("recording the quota store's generation in %s again", self.generation_path)
        self._recording_failed = False

    # Nobody else writes this file: it is whole once open, and has no changes to follow.
    shared = False
    loaded = True
    lag = 0
    error: str | None = None

    def follow(self, listener: Callable[[], object]) -> None:
        """Nothing to follow: every change to this store is made through this replica."""

    def close(self) -> None:
        """Clear the mark of use; closing the last connection then checkpoints the WAL into the
        file and removes the -wal file, so the file alone is the whole store."""
        with self._lock:
            with suppress(sqlite3.Error):  # a store that broke while open is closed all the same
                self._db.execute("UPDATE store_state SET in_use = 0")
            self._db.close()

    def integrity_ok(self) -> bool:
        with self._lock:
            return integrity_problem(self._db) is None

    # -- reads (start-up only) -----------------------------------------------------------
    def load_overrides(self) -> dict[QuotaEntity, QuotaValues]:
        with self._lock:
            rows = self._db.execute(
                "SELECT user_kind, user_name, client_kind, client_name, limits FROM overrides"
            ).fetchall()
        return {
            QuotaEntity(_decode_name(uk, un), _decode_name(ck, cn)): _decode_limits(limits)
            for uk, un, ck, cn, limits in rows
        }

    def load_groups(self) -> dict[str, QuotaGroup]:
        with self._lock:
            rows = self._db.execute(
                "SELECT name, users, client_ids, limits FROM quota_groups"
            ).fetchall()
        return {
            name: QuotaGroup(
                name,
                frozenset(json.loads(users)),
                frozenset(json.loads(clients)),
                _decode_limits(limits),
            )
            for name, users, clients, limits in rows
        }

    def load_enforcement(self) -> Enforcement | None:
        """The enforcement set through the API; None: never set, or returned to the settings."""
        with self._lock:
            row = self._db.execute("SELECT mode, canary_brokers FROM enforcement").fetchone()
        return None if row is None else Enforcement.of(row[0], json.loads(row[1]))

    # -- writes ------------------------------------------------------------------------------
    def put_enforcement(self, enforcement: Enforcement, at: float) -> None:
        with self._change():
            self._db.execute(
                "INSERT OR REPLACE INTO enforcement VALUES (0, ?, ?, ?)",
                (enforcement.mode.value, json.dumps(list(enforcement.canary_brokers)), at),
            )

    def delete_enforcement(self) -> bool:
        with self._change():
            return self._db.execute("DELETE FROM enforcement").rowcount > 0

    def put_override(self, entity: QuotaEntity, limits: QuotaValues, at: float) -> None:
        with self._change():
            self._db.execute(
                "INSERT OR REPLACE INTO overrides VALUES (?, ?, ?, ?, ?, ?)",
                (
                    *_encode_name(entity.user),
                    *_encode_name(entity.client_id),
                    _encode_limits(limits),
                    at,
                ),
            )

    def delete_override(self, entity: QuotaEntity) -> bool:
        with self._change():
            cursor = self._db.execute(
                "DELETE FROM overrides WHERE user_kind=? AND user_name=? AND client_kind=? AND client_name=?",
                (*_encode_name(entity.user), *_encode_name(entity.client_id)),
            )
            return cursor.rowcount > 0

    def put_group(self, group: QuotaGroup, at: float) -> None:
        with self._change():
            self._db.execute(
                "INSERT OR REPLACE INTO quota_groups VALUES (?, ?, ?, ?, ?)",
                (
                    group.name,
                    json.dumps(sorted(group.users)),
                    json.dumps(sorted(group.client_ids)),
                    _encode_limits(group.limits),
                    at,
                ),
            )

    def delete_group(self, name: str) -> bool:
        with self._change():
            return self._db.execute("DELETE FROM quota_groups WHERE name=?", (name,)).rowcount > 0
