"""History files: JSON lines in date-partitioned folders, bounded by age and total size.

Layout: ``<dir>/date=YYYY-MM-DD/history-HH.jsonl``, one file per UTC hour of the rows' time,
so Spark reads the folder with partition discovery (``date``) and prunes by date.

Crash safety: each round's lines go to the file in one ``write`` on a file opened for
appending, then ``fsync``; a process killed mid-write leaves at most one truncated last line.
Before appending to a file that does not end in a newline (the previous process died
mid-line), a newline is written first, so the truncated line stays alone and readers skip it.

Closed hours are compressed: when a new file is begun (and at start-up, for the hours before
the current one) each plain file but the one being written becomes ``history-HH.jsonl.bz2``
(bzip2, the default) or ``history-HH.jsonl.gz`` (gzip; ``history.compression``), which Spark
and Python read as they are. The compressed copy is written to a hidden
staging file and synced before the plain file is deleted, and put in place after: a crash at
any step leaves either the plain file or a complete staging copy, which the next start puts in
place. A truncated last line is ended with a newline in the copy, as when appending.

Retention is applied at start-up and whenever a new file is begun: files older than the
age limit go, then the oldest files until the total fits the size limit (compressed files
count by their compressed size). The file being written is never deleted.
"""

from __future__ import annotations

import bz2
import gzip
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from app.clock import Clock, system_clock
from app.history.schema import (
    COMPRESSED_SUFFIXES,
    FILE_PREFIX,
    FILE_SUFFIX,
    PARTITION_PREFIX,
    Codec,
)

SECONDS_PER_DAY = 86400.0


def file_for(directory: Path, epoch_seconds: float) -> Path:
    moment = datetime.fromtimestamp(epoch_seconds, tz=UTC)
    return (
        directory
        / f"{PARTITION_PREFIX}{moment:%Y-%m-%d}"
        / f"{FILE_PREFIX}{moment:%H}{FILE_SUFFIX}"
    )


def _hour_of(path: Path) -> float | None:
    """The epoch second at which the file's hour began, from its folder and file name."""
    try:
        day = path.parent.name.removeprefix(PARTITION_PREFIX)
        hour = path.name.removeprefix(FILE_PREFIX)
        for suffix in (*COMPRESSED_SUFFIXES, FILE_SUFFIX):
            hour = hour.removesuffix(suffix)
        return datetime.strptime(f"{day} {hour}", "%Y-%m-%d %H").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class Retention:
    max_age_days: float
    max_total_bytes: int


class HistoryFiles:
    """Appends batches of encoded lines. Used from one thread (the history writer)."""

    def __init__(
        self,
        directory: Path,
        retention: Retention,
        wall_clock: Clock = system_clock,
        codec: Codec = Codec.BZIP2,
    ) -> None:
        self.directory = directory
        self.retention = retention
        self.codec = codec
        self._wall_clock = wall_clock
        self._path: Path | None = None
        self._fd: int | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self._finish_staged()
        hour_began = self._wall_clock() // 3600 * 3600
        self._compress_closed(lambda path: (_hour_of(path) or 0.0) < hour_began)
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
        self._compress_closed(lambda plain: plain != path)
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
        """Every history file, plain and compressed, oldest first (names sort by time)."""
        pattern = f"{PARTITION_PREFIX}*/{FILE_PREFIX}*"
        return sorted(
            p
            for p in self.directory.glob(pattern)
            if p.name.endswith((FILE_SUFFIX, *COMPRESSED_SUFFIXES))
        )

    def _plain_files(self) -> list[Path]:
        return sorted(self.directory.glob(f"{PARTITION_PREFIX}*/{FILE_PREFIX}*{FILE_SUFFIX}"))

    def _compress_closed(self, closed) -> None:
        """Compress every plain file ``closed`` says is closed (never the one being written)."""
        for path in self._plain_files():
            if path != self._path and closed(path):
                compress(path, self.codec)

    def _finish_staged(self) -> None:
        """Put in place the compressed copies a crash left staged after their plain file went;
        drop those whose plain file is still there (the copy may be incomplete: done again)."""
        for staged in self.directory.glob(f"{PARTITION_PREFIX}*/.{FILE_PREFIX}*.tmp"):
            target = staged.with_name(staged.name[1:].removesuffix(".tmp"))
            if not target.name.endswith(COMPRESSED_SUFFIXES):
                continue
            plain = target.with_name(target.name.rsplit(".", 1)[0])
            if plain.exists():
                staged.unlink()
            else:
                _put_in_place(staged, target)

    def apply_retention(self) -> None:
        files = [(path, path.stat().st_size) for path in self.files() if path != self._path]
        current_size = (
            self._path.stat().st_size if self._path is not None and self._path.exists() else 0
        )
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


def file_bytes(path: Path) -> bytes:
    """A history file's lines, whichever codec compressed it (every stream of it) or none."""
    data = path.read_bytes()
    if path.name.endswith(Codec.BZIP2.suffix):
        return bz2.decompress(data)
    if path.name.endswith(Codec.GZIP.suffix):
        return gzip.decompress(data)
    return data


def _compressor(codec: Codec, raw: BinaryIO) -> bz2.BZ2File | gzip.GzipFile:
    if codec is Codec.BZIP2:
        return bz2.BZ2File(raw, "wb", compresslevel=9)
    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0)


def compress(path: Path, codec: Codec = Codec.BZIP2) -> Path:
    """``history-HH.jsonl`` -> ``history-HH.jsonl.bz2`` (or ``.gz``), crash-safe (the module's
    docstring); when the hour was compressed before (a round of an hour already closed came
    late), its lines are added as a second stream (a gzip member), which every reader of the
    codec, Spark's among them, reads on."""
    target = path.with_name(path.name[: -len(FILE_SUFFIX)] + codec.suffix)
    staged = path.with_name(f".{target.name}.tmp")
    with path.open("rb") as source, staged.open("wb") as raw:
        with _compressor(codec, raw) as out:
            shutil.copyfileobj(source, out, 1 << 20)
            size = source.tell()
            if size > 0 and _last_byte(path, size) != b"\n":
                out.write(b"\n")
        raw.flush()
        os.fsync(raw.fileno())
    path.unlink()
    _sync_dir(path.parent)
    _put_in_place(staged, target)
    return target


def _put_in_place(staged: Path, target: Path) -> None:
    if target.exists():
        with target.open("ab") as out, staged.open("rb") as member:
            shutil.copyfileobj(member, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
        staged.unlink()
    else:
        os.replace(staged, target)
    _sync_dir(target.parent)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _last_byte(path: Path, size: int) -> bytes:
    with path.open("rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)
