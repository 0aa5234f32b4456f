"""The parsed-history cache (``--cache DIR``): each day's partition of the history parsed and
checked once, kept as Parquet, and read again only when its files change.

A day is known by a key over its files: each file's name, size and modification time (to the
nanosecond). The service only appends to the current hour's file (its size grows) and
retention deletes whole files (the list changes); an edit by hand changes the modification
time. The key is cheap: it reads no file's content, so a warm run costs a listing of the
history's folders, not a read of its bytes (hashing the content would read all of them again
each run, the very cost the cache is there to save). A file rewritten in place to the same
size within the same nanosecond would go unnoticed; nothing the service does rewrites.

Layout: ``DIR/date=YYYY-MM-DD/<key>/`` holds that day's lines as ``checked_lines`` gives them
(kept and skipped, with their reason). A day whose key changed is parsed again and its older
copy deleted; days no longer in the history (retention) are deleted from the cache too.
The cache works on a history folder the driver reads as files (a local or mounted path)."""

from __future__ import annotations

import hashlib
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from app.history.schema import FIELD_NAMES, PARTITION_PREFIX

# What a cached day holds; a day whose files hold no line is kept as this empty marker.
EMPTY_DAY = "EMPTY"
_STAGING = "staging-"


@dataclass(frozen=True)
class Day:
    date: str  # YYYY-MM-DD
    folder: Path  # the history's partition
    key: str  # over its files' names, sizes and modification times


@dataclass(frozen=True)
class CachedRead:
    lines: DataFrame  # every line of the days read, as ``checked_lines`` gives them
    parsed_days: tuple[str, ...]  # the days parsed in this run (new or changed)
    reused_days: tuple[str, ...]  # the days read from the cache


def history_days(path: str, since: datetime | None = None, until: datetime | None = None) -> list[Day]:
    """The date partitions of the history at ``path`` within [since, until] (by day)."""
    days = []
    for folder in sorted(Path(path).glob(f"{PARTITION_PREFIX}*")):
        date = folder.name.removeprefix(PARTITION_PREFIX)
        if not folder.is_dir() or (since is not None and date < since.date().isoformat()) or (until is not None and date > until.date().isoformat()):
            continue
        digest = hashlib.sha256()
        digest.update(",".join(FIELD_NAMES).encode() + b"\n")  # a day parsed before a field was declared lacks it
        for file in sorted(folder.iterdir()):
            if file.is_file() and not file.name.startswith((".", "_")):
                status = file.stat()
                digest.update(f"{file.name}\0{status.st_size}\0{status.st_mtime_ns}\n".encode())
        days.append(Day(date, folder, digest.hexdigest()[:32]))
    return days


def _cached(cache: Path, day: Day) -> Path:
    return cache / f"{PARTITION_PREFIX}{day.date}" / day.key


def read_cached(spark: SparkSession, path: str, cache_dir: str, parse, since: datetime | None = None, until: datetime | None = None) -> CachedRead:
    """The lines of the history at ``path``, from the cache at ``cache_dir``; the days not in it
    (or changed) are parsed first, all in one Spark job, by ``parse`` (a function from the JSON
    reader of some folders to ``checked_lines``, keeping the partition column)."""
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    days = history_days(path, since, until)
    stale = [day for day in days if not _cached(cache, day).exists()]
    if stale:
        staging = cache / f"{_STAGING}{uuid.uuid4().hex}"
        parsed: DataFrame = parse([str(day.folder) for day in stale])
        column = PARTITION_PREFIX.rstrip("=")
        parsed.withColumn(column, F.col(column).cast("string")).write.partitionBy(column).parquet(str(staging))
        for day in stale:
            target = _cached(cache, day)
            shutil.rmtree(target.parent, ignore_errors=True)  # the day's older copies
            target.parent.mkdir(parents=True)
            written = staging / f"{PARTITION_PREFIX}{day.date}"
            if written.exists():
                written.rename(target)
            else:
                target.mkdir()
                (target / EMPTY_DAY).touch()
        shutil.rmtree(staging)
    present = {f"{PARTITION_PREFIX}{day.date}" for day in days}
    if since is None and until is None:  # days retention removed from the history
        for folder in cache.glob(f"{PARTITION_PREFIX}*"):
            if folder.name not in present:
                shutil.rmtree(folder)
    for leftover in cache.glob(f"{_STAGING}*"):  # from a run that was stopped
        shutil.rmtree(leftover, ignore_errors=True)
    with_lines = [str(_cached(cache, day)) for day in days if not (_cached(cache, day) / EMPTY_DAY).exists()]
    stale_dates = {day.date for day in stale}
    return CachedRead(
        spark.read.parquet(*with_lines) if with_lines else None,
        tuple(sorted(stale_dates)),
        tuple(day.date for day in days if day.date not in stale_dates),
    )
