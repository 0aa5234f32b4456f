"""Where the decider's state outlives the process: a file in the data dir (one replica, the
SQLite quota store), or a compacted topic that every replica shares (the Kafka quota store,
app/server/runtime/shared_state.py).

The loop hands over a snapshot (bytes, taken on the event loop in the round: nothing live
crosses threads) after every round and, at most once a second, after node reports changed the
state; a thread of its own writes it, so the event loop never waits on a disk. Only the newest
snapshot waiting is written: a slow disk skips snapshots, never queues them.

The file is replaced atomically (written beside it, fsynced, renamed, the folder fsynced):
after kill -9 or a power loss it holds the last snapshot written whole, never a torn one."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger("app.state")

STATE_FILE = "decider-state.bin"
# Node reports change the state between rounds; their snapshot waits at most this long.
REPORT_SAVE_DELAY_SECONDS = 1.0


class SavedState(Protocol):
    """Keeps the newest snapshot of the decider's state where the next process finds it."""

    def load(self) -> bytes | None:
        """The newest snapshot kept, if any (blocking: at start-up only)."""
        ...

    def save(self, snapshot: bytes) -> None:
        """Keep ``snapshot`` (returns at once; written in the background)."""
        ...

    def close(self) -> None:
        """Write what is waiting, then stop."""
        ...

    @property
    def loaded(self) -> bool:
        """What was kept has been read (serving before that would serve a decision it lacks)."""
        ...

    @property
    def failures(self) -> int:
        """Snapshots (and, shared, node reports) that could not be kept."""
        ...


class _LatestOnly:
    """One thread writing the newest of the snapshots handed to it."""

    def __init__(self, write: Callable[[bytes], None], name: str) -> None:
        self._write = write
        self._pending: bytes | None = None
        self._closed = False
        self._ready = threading.Condition()
        self.written = 0
        self.failures = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, snapshot: bytes) -> None:
        with self._ready:
            self._pending = snapshot
            self._ready.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._pending is not None or self._closed)
                snapshot, self._pending = self._pending, None
                if snapshot is None:
                    return  # closed, nothing waiting
            try:
                self._write(snapshot)
                self.written += 1
                if self.last_error is not None:
                    log.info("decider state saved again")
                self.last_error = None
            # e.g. a full or read-only disk: the next snapshot tries again; blind, because an
            # exception leaving this thread would end it and every later save with it.
            except Exception as exc:  # noqa: BLE001
                self.failures += 1
                if self.last_error is None:
                    log.warning("cannot save the decider state: %s: %s", type(exc).__name__, exc)
                self.last_error = f"{type(exc).__name__}: {exc}"


class StateFile:
    """The decider's state in ``data_dir/decider-state.bin``."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / STATE_FILE
        self._writer = _LatestOnly(self._write, "state-writer")

    def load(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def save(self, snapshot: bytes) -> None:
        self._writer.put(snapshot)

    loaded = True  # read before the service serves

    def close(self) -> None:
        self._writer.close()

    @property
    def failures(self) -> int:
        return self._writer.failures

    def set_aside(self) -> Path | None:
        """Move an unreadable file out of the way (kept for a look, not read again)."""
        aside = self.path.with_name(self.path.name + ".unreadable")
        try:
            os.replace(self.path, aside)
        except FileNotFoundError:
            return None
        return aside

    def _write(self, snapshot: bytes) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(snapshot)
            while view:
                view = view[os.write(descriptor, view) :]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, self.path)
        folder = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
