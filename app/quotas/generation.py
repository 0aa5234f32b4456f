"""The generation file kept beside the SQLite quota store: how many changes the store has
committed, and what it held after the last one.

The store counts its committed changes inside the database too; a database whose count is
below the file's has lost changes (emptied, deleted, its -wal file lost, an older copy put in
place). The file is written after each commit, so it never runs ahead of a database that
kept what it acknowledged."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Generation:
    number: int  # quota changes committed to the store, ever
    overrides: int
    groups: int

    @property
    def empty(self) -> bool:
        return self.overrides == 0 and self.groups == 0

    def holding(self) -> str:
        return f"{self.overrides} overrides and {self.groups} groups"


RECORD_BYTES = 128  # within one 512-byte sector


class GenerationUnreadable(ValueError):
    pass


def generation_path(store: Path) -> Path:
    return store.with_name(store.name + ".generation")


def read_generation(path: Path) -> Generation | None:
    """The recorded generation; None when there is no file (a new store, or one from before
    generations were kept)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        generation = Generation(record["generation"], record["overrides"], record["groups"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise GenerationUnreadable(f"{type(exc).__name__}: {exc}") from None
    if not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0
        for n in (generation.number, generation.overrides, generation.groups)
    ):
        raise GenerationUnreadable(f"not a generation: {record!r}")
    return generation


def write_generation(path: Path, generation: Generation) -> None:
    """Overwrite the record in place: one write of one fixed-size record into the file's first
    disk sector, which a disk replaces whole. Neither renamed nor synced, so an acknowledged
    change still costs one sync (bench/bench_store.py: a new file renamed over the old one
    doubled the time of a change, a synced one tripled it). The database's commit was synced
    before, so this record never runs ahead of it; a power cut can leave it behind or torn,
    and an unreadable record only makes the store check the file without it."""
    record = json.dumps(
        {
            "generation": generation.number,
            "overrides": generation.overrides,
            "groups": generation.groups,
        }
    )
    data = record.encode("ascii").ljust(RECORD_BYTES - 1) + b"\n"
    assert len(data) == RECORD_BYTES, record
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(descriptor, data, 0)
        os.ftruncate(descriptor, RECORD_BYTES)
    finally:
        os.close(descriptor)
