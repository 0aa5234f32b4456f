"""History files: JSON lines in date-partitioned folders, bounded by age and total size.

Layout: ``<dir>/date=YYYY-MM-DD/history-HH.jsonl``, one file per UTC hour of the rows' time,
so Spark reads the folder with partition discovery (``date``) and prunes by date.

Crash safety: each round's lines go to the file in one ``write`` on a file opened for
appending, then ``fsync``; a process killed mid-write leaves at most one truncated last line.
Before appending to a file that does not end in a newline (the previous process died
mid-line), a newline is written first, so the truncated line stays alone and readers skip it.

Retention is applied at start-up and whenever a new file is begun: files older than the
age limit go, then the oldest files until the total fits the size limit. The file being
written is never deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.clock import Clock, system_clock
from app.history.schema import FILE_PREFIX, FILE_SUFFIX, PARTITION_PREFIX

SECONDS_PER_DAY = 86400.0


def file_for(directory: Path, epoch_seconds: float) -> Path:
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return directory / f"{PARTITION_PREFIX}{moment:%Y-%m-%d}" / f"{FILE_PREFIX}{moment:%H}{FILE_SUFFIX}"


def _hour_of(path: Path) -> float | None:
    """The epoch second at which the file's hour began, from its folder and file name."""
    try:
        day = path.parent.name.removeprefix(PARTITION_PREFIX)
        hour = path.name.removeprefix(FILE_PREFIX).removesuffix(FILE_SUFFIX)
        return datetime.strptime(f"{day} {hour}", "%Y-%m-%d %H").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Retention:
    max_age_days: float
    max_total_bytes: int


class HistoryFiles:
    """Appends batches of encoded lines. Used from one thread (the history writer)."""

    def __init__(self, directory: Path, retention: Retention, wall_clock: Clock = system_clock) -> None:
        self.directory = directory
        self.retention = retention
        self._wall_clock = wall_clock
        self._path: Path | None = None
        self._fd: int | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.apply_retention()

    def append(self, lines: bytes, at: float) -> None:
        """Append ``lines`` (whole lines, each ending in a newline) to the file of time ``at``."""
        path = file_for(self.directory, at)
        if path != self._path:
            self._open(path)
        assert self._fd is not None
        view = memoryview(lines)
        while view:  # one write call in practice; a short write is continued, never re-sent
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def _open(self, path: Path) -> None:
        self.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        size = os.fstat(fd).st_size
        if size > 0 and _last_byte(path, size) != b"\n":
            os.write(fd, b"\n")  # end the line a killed process left truncated
        self._fd = fd
        self._path = path
        self.apply_retention()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._path = None

    def files(self) -> list[Path]:
        """Every history file, oldest first (names sort by time)."""
        return sorted(self.directory.glob(f"{PARTITION_PREFIX}*/{FILE_PREFIX}*{FILE_SUFFIX}"))

    def apply_retention(self) -> None:
        files = [(path, path.stat().st_size) for path in self.files() if path != self._path]
        current_size = self._path.stat().st_size if self._path is not None and self._path.exists() else 0
        oldest_kept = self._wall_clock() - self.retention.max_age_days * SECONDS_PER_DAY
        total = current_size + sum(size for _, size in files)
        for path, size in files:
            began = _hour_of(path)
            too_old = began is not None and began + 3600 <= oldest_kept
            if too_old or total > self.retention.max_total_bytes:
                path.unlink(missing_ok=True)
                total -= size
                if not any(path.parent.iterdir()):
                    path.parent.rmdir()


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)
