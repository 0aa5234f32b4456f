"""The parsed-history cache (``--cache DIR``): each file of the history parsed and checked once,
kept as Parquet together with the partial results the report derives from it, and read again
only when the file changes.

A file is known by a key over its path in the history, its size and its modification time (to
the nanosecond), and the fields the reader declares. The service only appends to the current
hour's file (its size grows) and retention deletes whole files (they leave the listing); an
edit by hand changes the modification time. The key is cheap: it reads no file's content, so
a run over an unchanged history costs a listing of its folders, not a read of its bytes
(hashing the content would read all of them again each run, the very cost the cache is there
to save). A file rewritten in place to the same size within the same nanosecond would go
unnoticed; nothing the service does rewrites.

Layout: ``DIR/<table>/chunk=<key>/`` holds one table of one file: ``lines`` (every line as
``checked_lines`` gives it, kept and skipped, with its reason) and each table the report
derives per file (``analysis.partials``). ``DIR/done/<key>`` marks a file whose tables are
all in place: a run stopped half-way leaves no file half-cached. The files not in the history
any more (retention) leave the cache too. Without ``--cache`` the same layout is built in a
scratch folder of the output and deleted at the end. ``DIR/lock`` names the run using the
folder (host, process, since when): a second run at the same time stops with that name
instead of deleting the first one's files.

The history and the cache go through Hadoop's FileSystem, as Spark's own reads and writes do."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JJavaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from app.history.schema import FIELD_NAMES, PARTITION_PREFIX
from spark.reading.frames import release

# What a cached file holds changed: every file is parsed again once.
CACHE_VERSION = "9"
CHUNK = "chunk"  # the column naming the file a row came from (its key)
LINES = "lines"
_DONE = "done"
REPORTS = "reports"  # the last report made from the cache (``reading.reuse``)
PACKS = "packs"  # a closed day's files' shares of some tables as one (``Pack``)
PACK = "pack"  # the column (and folder) naming a pack
# Parquet's row groups in a pack at most this big (its default: 128 MiB, a day's table in one):
# a query of a few volumes skips the groups whose bounds leave them out.
PACK_ROW_GROUP_BYTES = 256 * 1024
_LOCK = "lock"
_STAGING = "staging-"
_SCHEMAS = "schemas-"
_SCRATCH = "scratch"
_MAX_TEXT = 60_000  # what create_new's writeUTF takes: at most 65,535 bytes
_FILE_PATH = "file_path"

# From some files to their ``checked_lines``, keeping the FILE_PATH column each line came
# from; given a scratch folder of its own to write in (deleted after the parse).
Parse = Callable[[list[str], str], DataFrame]
# From the lines of some files (with CHUNK) to the tables derived per file, each with CHUNK; the
# frames it persists to make them go to the list given, for the caller to unpersist (none are
# persisted without a list).
Derive = Callable[[DataFrame, list[DataFrame] | None], dict[str, DataFrame]]


@dataclass(frozen=True)
class Pack:
    """Some derived ``tables`` of a closed day's files as one share: ``make`` takes each of them
    over the files of some days, with PACK (the day's pack), and gives them per PACK, fewer rows
    standing for the same (what makes them exact, and when, is the caller's:
    ``analysis.partials.PACKING``)."""

    tables: tuple[str, ...]
    make: Callable[[dict[str, DataFrame]], dict[str, DataFrame]]


class UnusablePath(Exception):
    """A path the report cannot read its history from or write to (missing, a file where a
    folder must be, not writable): said in one line, before any work is done."""


@dataclass(frozen=True)
class HistoryFile:
    path: str  # as Hadoop's FileSystem and Spark's readers take it
    uri: str  # as Spark's ``_metadata.file_path`` names it (escaped)
    date: str | None  # YYYY-MM-DD of its date partition; None for a file outside one
    key: str  # over its place in the history, size and modification time
    size: int  # bytes


@dataclass(frozen=True)
class Cached:
    tables: dict[
        str, DataFrame
    ]  # LINES and each derived table, over every file, with CHUNK (empty when none has rows)
    files: tuple[HistoryFile, ...]
    parsed: tuple[HistoryFile, ...]  # the files parsed in this run (new or changed)
    # The tables a ``Pack`` makes, each day packed as one share and the other files' per file;
    # None when the run packs nothing (no ``Pack``, or a part of the history only).
    packed: dict[str, DataFrame] | None = None
    units: dict[str, str] | None = None  # each packed file's pack, by its key (CHUNK)

    @property
    def parsed_days(self) -> tuple[str, ...]:
        """The days with at least one file parsed in this run."""
        return tuple(sorted({f.date for f in self.parsed if f.date is not None}))

    @property
    def reused_days(self) -> tuple[str, ...]:
        """The days whose every file came from the cache."""
        parsed = set(self.parsed_days)
        return tuple(sorted({f.date for f in self.files if f.date is not None} - parsed))


class FileSystem:
    """Hadoop's FileSystem, the one Spark reads and writes with: the history and the cache may
    be local folders or shared storage (hdfs://, s3a://, ...) alike."""

    def __init__(self, spark: SparkSession, path: str) -> None:
        # reached through PySpark's JVM gateway
        context = spark.sparkContext
        jvm, jsc = context._jvm, context._jsc  # noqa: SLF001
        if jvm is None or jsc is None:
            raise RuntimeError("the Spark session has stopped")
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._jvm = jvm
        self._conf = jsc.hadoopConfiguration()
        self._fs = self._Path(path).getFileSystem(self._conf)
        self.local = self._fs.getUri().getScheme() == "file"

    def path(self, path: str):
        return self._fs.makeQualified(self._Path(path))

    def list(self, path: str) -> list:
        """The entries of a folder, by name; [] when it is not there."""
        folder = self.path(path)
        if not self._fs.exists(folder):
            return []
        return sorted(self._fs.listStatus(folder), key=lambda status: status.getPath().getName())

    def names(self, path: str) -> tuple[str, ...]:
        """The names in a folder, sorted; none when it is not there. A local folder's come from the
        operating system's listing: through the JVM gateway, each name costs round trips (the
        cache's folders hold a name per history file and table, 720 each for 30 days)."""
        if not self.local:
            return tuple(status.getPath().getName() for status in self.list(path))
        try:
            return tuple(sorted(os.listdir(self.path(path).toUri().getPath())))
        except (FileNotFoundError, NotADirectoryError):
            return ()

    def uri(self, path: str) -> str:
        return str(self._Path(path).toUri().toString())

    def status(self, path: str):
        """The file's or folder's FileStatus; None when it is not there."""
        return self._fs.getFileStatus(self.path(path)) if self.exists(path) else None

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self.path(path)))

    def move(self, source: str, target: str) -> None:
        self._fs.delete(self.path(target), True)
        self._fs.mkdirs(self.path(target).getParent())
        if not self._fs.rename(self.path(source), self.path(target)):
            raise OSError(f"could not move {source} to {target}")

    def delete(self, path: str) -> None:
        self._fs.delete(self.path(path), True)

    def copy(self, source: str, target: str) -> None:
        """Copy a file or a folder (with what it holds) to ``target`` (on this store or another),
        replacing what is there."""
        to = self._Path(target).getFileSystem(self._conf)
        where = to.makeQualified(self._Path(target))
        to.delete(where, True)
        copied = self._jvm.org.apache.hadoop.fs.FileUtil.copy(
            self._fs, self.path(source), to, where, False, self._conf
        )
        if not copied:
            raise OSError(f"could not copy {source} to {target}")

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write a file holding ``data`` (replacing one that is there)."""
        stream = self._fs.create(self.path(path), True)
        try:
            stream.write(bytearray(data))
        finally:
            stream.close()

    def read_bytes(self, path: str) -> bytes | None:
        """What a file holds; None when it is not there."""
        try:
            stream = self._fs.open(self.path(path))
        except Py4JJavaError:
            return None
        try:
            return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()

    def touch(self, path: str) -> None:
        self._fs.create(self.path(path), True).close()

    def mkdirs(self, path: str) -> bool:
        return bool(self._fs.mkdirs(self.path(path)))

    def create_new(self, path: str, text: str) -> bool:
        """Write a file holding ``text`` where none is; False when one is."""
        try:
            stream = self._fs.create(self.path(path), False)
        except Py4JJavaError:
            if self.exists(path):
                return False
            raise
        try:
            stream.writeUTF(text)
        finally:
            stream.close()
        return True

    def read_text(self, path: str) -> str | None:
        """The text of a file ``create_new`` wrote; None when it holds none (its writer stopped
        before writing it) or is gone."""
        try:
            stream = self._fs.open(self.path(path))
        except Py4JJavaError:
            return None
        try:
            return str(stream.readUTF())
        except Py4JJavaError:
            return None
        finally:
            stream.close()

    def same(self, one: str, other: str) -> bool:
        return bool(self.path(one).equals(self.path(other)))


def make_folder(spark: SparkSession, path: str, what: str) -> None:
    """Make sure ``path`` is a folder the report can write in (made when missing), or raise
    UnusablePath naming ``what`` it is for."""
    fs = FileSystem(spark, path)
    status = fs.status(path)
    if status is not None and not status.isDirectory():
        raise UnusablePath(f"{what} {path} is a file, not a folder")
    try:
        made = fs.mkdirs(path)
    except Py4JJavaError as exc:
        raise UnusablePath(
            f"{what} {path} cannot be made a folder: {exc.java_exception.getMessage()}"
        ) from None
    if not made:
        raise UnusablePath(f"{what} {path} cannot be made a folder")


def _alive_here(owner: str) -> bool:
    """Whether the run named by a lock's ``owner`` ("<host> <pid> <since>") may still be
    running: on another machine it may; on this one, while its process is."""
    host, pid, *_ = [*owner.split(" "), "", ""]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if (
        int(pid) == os.getpid()
    ):  # this process holds no lock yet: one left by an earlier life (a restarted container)
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def lock(spark: SparkSession, folder: str, what: str) -> Callable[[], None]:
    """Hold ``folder`` (a cache, or a run's scratch copy; ``what`` names it) for this run, or
    raise UnusablePath when another run holds it: a second run would delete the first one's
    staged files, or the cached files it is still reading. A lock left by a run on this machine
    whose process has ended is taken over. Returns the release."""
    fs = FileSystem(spark, folder)
    path = f"{folder.rstrip('/')}/{_LOCK}"
    owner = (
        f"{socket.gethostname()} {os.getpid()} {datetime.now(UTC).isoformat(timespec='seconds')}"
    )
    if not fs.create_new(path, owner):
        holder = fs.read_text(path)
        if holder is None or _alive_here(holder):
            raise UnusablePath(
                f"{what} {folder} is in use by another run of the report ({holder or 'unnamed'}); if no run is using it, remove {path}"
            )
        fs.delete(path)  # its run has ended
        if not fs.create_new(path, owner):
            raise UnusablePath(
                f"{what} {folder} is in use by another run of the report; if no run is using it, remove {path}"
            )
    return lambda: fs.delete(path)


def check_folders(spark: SparkSession, history: str, output: str, cache: str | None) -> None:
    """The output and the cache are folders of their own: in the history's folder their files
    would be read as history files by the next run, and a cache in the output's folder would
    take the report's tables for files gone from the history."""
    fs = FileSystem(spark, history)
    if fs.same(history, output):
        raise UnusablePath(
            f"the output {output} is the history's folder: give the report a folder of its own"
        )
    if cache is not None and (fs.same(cache, history) or fs.same(cache, output)):
        raise UnusablePath(
            f"the cache {cache} is the {'history' if fs.same(cache, history) else 'output'}'s folder: give the cache a folder of its own"
        )


def _visible(name: str) -> bool:
    return not name.startswith((".", "_"))  # Spark's rule for hidden files


def _in_range(date: str, since: datetime | None, until: datetime | None) -> bool:
    return not (
        (since is not None and date < since.date().isoformat())
        or (until is not None and date > until.date().isoformat())
    )


def _modified(fs: FileSystem, status) -> int:
    """The file's modification time: to the nanosecond on a local disk, else as the store keeps it."""
    if fs.local:
        return os.stat(status.getPath().toUri().getPath()).st_mtime_ns
    return int(status.getModificationTime())


def history_files(
    spark: SparkSession, path: str, since: datetime | None = None, until: datetime | None = None
) -> list[HistoryFile]:
    """The files of the history at ``path`` (one file, or a folder of files and of
    date=YYYY-MM-DD partitions), in order; only the partitions within [since, until] by day."""
    fs = FileSystem(spark, path)
    found: list[tuple[Any, str, str | None]] = []  # Hadoop's FileStatus, through the JVM gateway
    top = fs.status(path)
    if top is None:
        raise UnusablePath(f"the history {path} does not exist")
    if top.isFile():
        found.append((top, top.getPath().getName(), None))
    for entry in fs.list(path) if top.isDirectory() else []:
        name = entry.getPath().getName()
        if not _visible(name):
            continue
        if entry.isFile():
            found.append((entry, name, None))
        elif entry.isDirectory() and name.startswith(PARTITION_PREFIX):
            date = name.removeprefix(PARTITION_PREFIX)
            if _in_range(date, since, until):
                folder = entry.getPath().toString()
                found += [
                    (file, f"{name}/{file.getPath().getName()}", date)
                    for file in fs.list(folder)
                    if file.isFile() and _visible(file.getPath().getName())
                ]
    files = []
    for status, relative, date in found:
        digest = hashlib.sha256(
            f"{CACHE_VERSION}\n{','.join(FIELD_NAMES)}\n{relative}\0{status.getLen()}\0{_modified(fs, status)}".encode()
        )
        # A letter first: a key is never read back as a number.
        path = (
            status.getPath().toString()
        )  # the reader is given this text, and names the file by its URI
        files.append(
            HistoryFile(
                path, fs.uri(path), date, "k" + digest.hexdigest()[:32], int(status.getLen())
            )
        )
    return files


def _chunk_dir(cache: str, table: str, key: str) -> str:
    return f"{cache}/{table}/{CHUNK}={key}"


def _parse_into(
    spark: SparkSession,
    staging: str,
    stale: list[HistoryFile],
    parse: Parse,
    derive: Derive,
    lines_schema: T.StructType,
) -> None:
    """Parse the stale files into ``staging``: their lines, and the tables derived from them
    (none when no file has a line). The lines are read back with ``lines_schema``, the schema
    they were written with: Spark would otherwise run a job to read it from the files' footers."""
    keys = spark.createDataFrame(
        [(f.uri, f.key) for f in stale], f"{_FILE_PATH} string, {CHUNK} string"
    )
    parsed = parse([f.path for f in stale], f"{staging}/{_SCRATCH}").join(
        F.broadcast(keys), _FILE_PATH, "left"
    )
    unknown = F.raise_error(F.concat(F.lit("a line of a file not listed: "), F.col(_FILE_PATH)))
    parsed = parsed.withColumn(CHUNK, F.coalesce(F.col(CHUNK), unknown)).drop(_FILE_PATH)
    spark.sparkContext.setJobDescription(f"parse {len(stale)} history files")
    parsed.write.partitionBy(CHUNK).parquet(f"{staging}/{LINES}")
    if not FileSystem(spark, staging).exists(f"{staging}/{LINES}"):
        return
    persisted: list[DataFrame] = []
    try:
        for name, table in derive(
            spark.read.schema(lines_schema).parquet(f"{staging}/{LINES}"), persisted
        ).items():
            spark.sparkContext.setJobDescription(f"derive {name} of {len(stale)} history files")
            table.write.partitionBy(CHUNK).parquet(f"{staging}/{name}")
    finally:
        release(persisted)


def empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


def staging_folder(cache: str) -> str:
    """A new folder's path in the cache to stage files in before they are moved to their place
    (a run stopped half-way leaves it, and the next run removes it)."""
    return f"{cache}/{_STAGING}{uuid.uuid4().hex}"


def _clear_staging(fs: FileSystem, cache: str) -> None:
    """Remove the staging folders a run that was stopped left in the cache."""
    for leftover in fs.names(cache):
        if leftover.startswith(_STAGING):
            fs.delete(f"{cache}/{leftover}")


@functools.lru_cache(maxsize=8)
def source_digest(packages: tuple[str, ...], *texts: str) -> str:
    """A key over ``texts`` and the source of the ``packages`` (every ``.py`` file under each).
    Worked out once per process (a run asks for the code's key more than once): the code a
    process runs is the code it imported, whatever its files become later."""
    digest = hashlib.sha256("\n".join(texts).encode())
    for package in packages:
        folder = Path(importlib.import_module(package).__file__ or "").parent
        for source in sorted(folder.rglob("*.py")):
            digest.update(source.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(source.read_bytes())
    return digest.hexdigest()[:32]


def _code_key(lines_schema: T.StructType) -> str:
    """A key over what decides the derived tables' schemas: the cache's version, the lines'
    schema and the source of the report's code (this package's and the history format's)."""
    return source_digest(("spark", "app.history"), CACHE_VERSION, lines_schema.json())


def _table_schemas(
    spark: SparkSession,
    fs: FileSystem,
    cache: str,
    derive: Derive,
    lines_schema: T.StructType,
) -> dict[str, T.StructType]:
    """Every table with the schema it is written with: read back without Spark reading the
    files' footers to find it (a job per table). Working them out plans every derived table
    (seconds of the driver's time), so they are kept in the cache, under a key over the code
    that decides them (``_code_key``); other keys' files are removed."""
    name = f"{_SCHEMAS}{_code_key(lines_schema)}.json"
    kept = fs.read_text(f"{cache}/{name}")
    if kept is not None:
        try:
            return {
                table: T.StructType.fromJson(schema) for table, schema in json.loads(kept).items()
            }
        except (ValueError, KeyError, TypeError):
            pass  # not what this code writes: worked out again
    schemas = {
        LINES: lines_schema,
        **{
            table: frame.schema for table, frame in derive(empty(spark, lines_schema), None).items()
        },
    }
    for other in fs.names(cache):
        if other.startswith(_SCHEMAS):  # other code's, or this key's unreadable
            fs.delete(f"{cache}/{other}")
    text = json.dumps({table: schema.jsonValue() for table, schema in schemas.items()})
    if len(text.encode()) < _MAX_TEXT:  # else worked out each run
        fs.create_new(f"{cache}/{name}", text)
    return schemas


def _cache_stale(
    spark: SparkSession,
    fs: FileSystem,
    cache: str,
    stale: list[HistoryFile],
    parse: Parse,
    derive: Derive,
    lines_schema: T.StructType,
    tables: list[str],
) -> None:
    """Parse the ``stale`` files and move each of their ``tables`` into the cache (a table a
    file has no row of leaves the cache), then mark each file done."""
    staged = staging_folder(cache)
    _parse_into(spark, staged, stale, parse, derive, lines_schema)
    for name in tables:
        for f in stale:
            written = _chunk_dir(staged, name, f.key)
            if fs.exists(written):
                fs.move(written, _chunk_dir(cache, name, f.key))
            else:
                fs.delete(_chunk_dir(cache, name, f.key))
    for f in stale:
        fs.touch(f"{cache}/{_DONE}/{f.key}")
    fs.delete(staged)


def _cached_tables(
    spark: SparkSession,
    fs: FileSystem,
    cache: str,
    files: list[HistoryFile],
    schemas: dict[str, T.StructType],
    prune: bool,
) -> dict[str, DataFrame]:
    """The tables of ``files`` in the cache (with ``prune``, the chunks of other files leave it)."""
    current = {f"{CHUNK}={f.key}" for f in files}
    tables = {}
    for table in (
        status.getPath().getName()
        for status in fs.list(cache)
        if status.isDirectory() and status.getPath().getName() not in (_DONE, REPORTS, PACKS)
    ):
        chunks = set(fs.names(f"{cache}/{table}"))
        if prune:
            for gone in chunks - current:
                fs.delete(f"{cache}/{table}/{gone}")
        present = [_chunk_dir(cache, table, f.key) for f in files if f"{CHUNK}={f.key}" in chunks]
        if table in schemas and present:  # not the tables a run of another version left
            # Every file's chunk of the table is one of the history's (so after pruning): the
            # table's folder read whole, one listing instead of a path to check per file.
            whole = prune or chunks <= current
            tables[table] = _read_parts(
                spark,
                f"{cache}/{table}",
                schemas[table],
                [f"{cache}/{table}"] if whole else present,
            )
    return tables


def _read_parts(
    spark: SparkSession, base: str, schema: T.StructType, paths: list[str]
) -> DataFrame:
    """The Parquet ``paths`` under ``base`` (whose partition folders give their columns), read
    with ``schema``: Spark reads no footer to find it."""
    return spark.read.option("basePath", base).schema(schema).parquet(*paths)


# The stale files are parsed in batches of consecutive files, at most BATCH_FILES files (a week
# of the service's hourly files) and BATCH_BYTES of them (a file more only when the batch is
# empty). What a parse holds grows with its files: the derived tables broadcast a row per volume
# and hour of them, so 30 days of 1,000 x 12 in one parse (8.6M such rows) ran the driver out of
# memory. A history's bytes grow with its volumes and hours (format 2 writes every volume at
# least each keyframe): 96 MiB of bzip2 hours of 1,000 x 12 is 3.5 days, about 1M of those rows.
# Each batch is in the cache once parsed: a run stopped half-way keeps the batches it finished.
BATCH_FILES = 168
BATCH_BYTES = 96 * 1024 * 1024


def batches(stale: list[HistoryFile]) -> list[list[HistoryFile]]:
    """The ``stale`` files in batches (in the history's order: by day, then path) of at most
    BATCH_FILES files and BATCH_BYTES bytes, each file in one."""
    found: list[list[HistoryFile]] = []
    held = 0
    for f in sorted(stale, key=lambda f: (f.date or "", f.path)):
        if not found or len(found[-1]) >= BATCH_FILES or held + f.size > BATCH_BYTES:
            found.append([])
            held = 0
        found[-1].append(f)
        held += f.size
    return found


def read_cached(
    spark: SparkSession,
    files: list[HistoryFile],
    cache: str,
    parse: Parse,
    derive: Derive,
    lines_schema: T.StructType,
    prune: bool = True,
    pack: Pack | None = None,
) -> Cached:
    """The history's ``files`` from the cache at ``cache``: the files not in it (or changed)
    are parsed first, in batches (``batches``), by ``parse``, and their tables derived by
    ``derive`` (always all of them: a file is in the cache with every table or not at all).
    ``lines_schema``: what ``parse`` gives, with CHUNK. ``prune``: ``files`` is the whole
    history, so files no longer in it leave the cache. ``pack`` (with ``prune``): the tables it
    makes are also given with each closed day's files as one share (``Cached.packed``), kept in
    ``DIR/packs/``."""
    cache = cache.rstrip("/")
    fs = FileSystem(spark, cache)
    fs.mkdirs(f"{cache}/{_DONE}")
    done = set(fs.names(f"{cache}/{_DONE}"))
    stale = [f for f in files if f.key not in done]
    _clear_staging(fs, cache)
    schemas = _table_schemas(spark, fs, cache, derive, lines_schema)
    for batch in batches(stale):
        _cache_stale(spark, fs, cache, batch, parse, derive, lines_schema, list(schemas))
    spark.sparkContext.setJobDescription("read the cached history")
    tables = _cached_tables(spark, fs, cache, files, schemas, prune)
    if prune:
        for key in done - {f.key for f in files}:
            fs.delete(f"{cache}/{_DONE}/{key}")
    # A table no file has a row of is empty.
    whole = {
        name: tables[name] if name in tables else empty(spark, schema)
        for name, schema in schemas.items()
    }
    if pack is None or not prune:
        return Cached(whole, tuple(files), tuple(stale))
    packs = _day_packs(files, _code_key(lines_schema))
    packed = _packed_tables(spark, fs, cache, files, whole, schemas, packs, pack)
    units = {f.key: name for name, day in packs.items() for f in day}
    return Cached(whole, tuple(files), tuple(stale), packed, units)


def _day_packs(files: list[HistoryFile], code: str) -> dict[str, list[HistoryFile]]:
    """The packs of the history's files: one per day but the first and the last (the service
    appends to the last day's current hour, and retention deletes the first day's hours one at
    a time: their packs would be made again every run), named after its day and a key over its
    files' keys and the code."""
    days: dict[str, list[HistoryFile]] = {}
    for f in files:
        if f.date is not None:
            days.setdefault(f.date, []).append(f)
    packs = {}
    for day in sorted(days)[1:-1]:
        key = hashlib.sha256("\n".join([code, *sorted(f.key for f in days[day])]).encode())
        packs[f"{day}-{key.hexdigest()[:16]}"] = days[day]
    return packs


def _packed_tables(
    spark: SparkSession,
    fs: FileSystem,
    cache: str,
    files: list[HistoryFile],
    whole: dict[str, DataFrame],
    schemas: dict[str, T.StructType],
    packs: dict[str, list[HistoryFile]],
    pack: Pack,
) -> dict[str, DataFrame]:
    """The tables ``pack`` makes: each pack's as kept in the cache (made first when missing),
    with the per-file shares of the files in no pack. The packs of days no longer in the history
    (or of files since changed) leave the cache."""
    folder = f"{cache}/{PACKS}"
    done = set(fs.names(f"{folder}/{_DONE}"))
    missing = [name for name in packs if name not in done]
    names = pack.tables
    if missing:
        members = spark.createDataFrame(
            [(f.key, name) for name in missing for f in packs[name]],
            f"{CHUNK} string, {PACK} string",
        )
        of_missing = {name: whole[name].join(F.broadcast(members), CHUNK) for name in names}
        staged = staging_folder(cache)
        spark.sparkContext.setJobDescription(f"pack {len(missing)} days of the history")
        for name, table in pack.make(of_missing).items():
            table.write.option("parquet.block.size", PACK_ROW_GROUP_BYTES).partitionBy(
                PACK
            ).parquet(f"{staged}/{name}")
        for name in names:
            for made in missing:
                written = f"{staged}/{name}/{PACK}={made}"
                if fs.exists(written):
                    fs.move(written, f"{folder}/{name}/{PACK}={made}")
        for made in missing:
            fs.touch(f"{folder}/{_DONE}/{made}")
        fs.delete(staged)
    for gone in done - set(packs):
        fs.delete(f"{folder}/{_DONE}/{gone}")
    current = {f"{PACK}={made}" for made in packs}
    in_packs = {f.key for day in packs.values() for f in day}
    loose = [f for f in files if f.key not in in_packs]
    packed = {}
    for name in names:
        present = set(fs.names(f"{folder}/{name}"))
        for other in present - current:  # of days gone or changed, or of a run stopped early
            fs.delete(f"{folder}/{name}/{other}")
        parts = [f"{folder}/{name}/{PACK}={made}" for made in packs if f"{PACK}={made}" in present]
        chunks = set(fs.names(f"{cache}/{name}"))
        own = [_chunk_dir(cache, name, f.key) for f in loose if f"{CHUNK}={f.key}" in chunks]
        with_pack = T.StructType([*schemas[name].fields, T.StructField(PACK, T.StringType())])
        frames = [
            *(
                [_read_parts(spark, f"{folder}/{name}", with_pack, parts).drop(PACK)]
                if parts
                else []
            ),
            *([_read_parts(spark, f"{cache}/{name}", schemas[name], own)] if own else []),
        ]
        packed[name] = (
            functools.reduce(DataFrame.unionByName, frames)
            if frames
            else empty(spark, schemas[name])
        )
    return packed
