"""The SQLite quota store: the cost of one acknowledged change, of opening a checked store,
and of backing it up.

Run: .venv/bin/python bench/bench_store.py [--changes 1000] [--overrides 1000,100000] [--dir DIR]
Baseline in the same run, on the same store: the same row committed alone (WAL,
synchronous=FULL), the write path before the store counted and recorded its changes.
Put --dir on the disk the service's data dir lives on: the numbers are fsyncs."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from app.quotas.backup import backup
from app.quotas.model import QuotaEntity, QuotaType
from app.quotas.store import QuotaStore


def change_latencies(path: Path, changes: int) -> tuple[list[float], list[float]]:
    """Seconds per change, on one store: the bare commit of the row, and the store's change
    of it (the row, the generation, the generation file), taken in turns so that a slow
    moment of the disk falls on both."""
    store = QuotaStore(path)
    bare_times, store_times = [], []
    for n in range(changes):
        start = time.perf_counter()
        with store._transaction():
            store._db.execute("INSERT OR REPLACE INTO overrides VALUES ('name', ?, 'none', '', ?, 0)", (f"user-{n % 50}", f'{{"produce": {1e6 + n}}}'))
        bare_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        store.put_override(QuotaEntity(f"user-{n % 50}", None), {QuotaType.PRODUCE: 1e6 + n}, 0.0)
        store_times.append(time.perf_counter() - start)
    store.close()
    return bare_times, store_times


def opening(path: Path, overrides: int) -> tuple[float, float, float]:
    """Seconds to open a store of ``overrides`` rows (checked), a bare connection's first
    read, and ``throttle-service backup``'s copy of the store."""
    store = QuotaStore(path)
    store._db.execute("BEGIN")  # seeded in one transaction: the bench is about opening
    store._db.executemany(
        "INSERT INTO overrides VALUES ('name', ?, 'none', '', ?, 0)", ((f"user-{n}", f'{{"produce": {1e6 + n}}}') for n in range(overrides))
    )
    store._db.execute("COMMIT")
    store.close()
    start = time.perf_counter()
    db = sqlite3.connect(path)
    db.execute("SELECT count(*) FROM overrides").fetchone()
    db.close()
    bare = time.perf_counter() - start
    start = time.perf_counter()
    QuotaStore(path).close()
    checked = time.perf_counter() - start
    start = time.perf_counter()
    backup(path, path.with_name("backup.sqlite3"))
    return checked, bare, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--overrides", default="1000,100000")
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    try:
        bare, store = change_latencies(work / "changes" / "quotas.sqlite3", args.changes)
        median_bare, median_store = statistics.median(bare) * 1e3, statistics.median(store) * 1e3
        p99_bare = statistics.quantiles(bare, n=100)[98] * 1e3
        p99_store = statistics.quantiles(store, n=100)[98] * 1e3
        print(f"{len(store)} changes each, in {work}")
        print(f"baseline (the row alone, committed: WAL, synchronous=FULL): median {median_bare:.2f} ms, p99 {p99_bare:.2f} ms")
        print(f"QuotaStore.put_override (commit + generation file): median {median_store:.2f} ms, p99 {p99_store:.2f} ms, "
              f"{median_store / median_bare:.2f}x the baseline")
        for count in (int(n) for n in args.overrides.split(",")):
            checked, bare_open, copied = opening(work / f"open-{count}" / "quotas.sqlite3", count)
            print(f"a store of {count} overrides: opened and checked in {checked * 1e3:.1f} ms (a bare connection's first count: "
                  f"{bare_open * 1e3:.1f} ms), backed up in {copied * 1e3:.1f} ms")
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
