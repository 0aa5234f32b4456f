"""The online backup of the SQLite quota store: a consistent copy taken while a service
writes to it, restorable by copying the file into the place of the store."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from app.quotas.generation import Generation
from app.quotas.store import (
    StoreRefused,
    damaged_store,
    held_generation,
    integrity_problem,
    sqlite_refusal,
)

# Errors that are the store's (a damaged file, a lock held too long); any other is the copy's.
_STORE_ERRORS = ("SQLITE_NOTADB", "SQLITE_CORRUPT", "SQLITE_BUSY", "SQLITE_LOCKED")


def backup(store: Path, target: Path) -> Generation:
    """Copy ``store`` into ``target``; returns the generation the copy holds.

    SQLite's backup API copies every page in one step, inside one read transaction: one
    snapshot, taken without holding up the service's writes (in WAL mode a reader does not
    block the writer). The copy is written beside ``target``, made one self-contained file (a
    rollback journal instead of WAL, not marked in use), checked, synced and only then renamed
    to ``target``: ``target`` is a whole backup, or is left as it was. Raises StoreRefused for
    a store that is missing or damaged, OSError when ``target`` cannot be written."""
    if not store.is_file():
        raise StoreRefused(
            f"quota store {store} does not exist",
            "nothing to back up: check throttle.service.data.dir",
        )
    if not target.parent.is_dir():
        raise NotADirectoryError(f"{target.parent} is not a directory")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    try:
        held = _copy(store, partial)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        if getattr(exc, "sqlite_errorname", "").startswith(_STORE_ERRORS):
            raise sqlite_refusal(store, exc) from None
        raise OSError(str(exc)) from None
    except StoreRefused:
        partial.unlink(missing_ok=True)
        raise
    with partial.open("rb+") as file:
        os.fsync(file.fileno())
    os.replace(partial, target)
    directory = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the backup is there once the command has said so
    finally:
        os.close(directory)
    return held


def _copy(store: Path, partial: Path) -> Generation:
    source = sqlite3.connect(store, isolation_level=None)
    try:
        source.execute("PRAGMA busy_timeout=5000")
        source.execute("PRAGMA query_only=ON")
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")
            held, in_use = held_generation(copy)
            if in_use:
                copy.execute("UPDATE store_state SET in_use = 0")
            found = integrity_problem(copy)
        finally:
            copy.close()
    finally:
        source.close()
    if found is not None:
        raise damaged_store(store, f"integrity check of its copy: {found}")
    return held
