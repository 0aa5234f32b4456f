"""A thousand broker shims long-polling the quota table: what an idle cluster costs, and how fast
a decision reaches every shim.

The service holds ``--overrides`` quota overrides (written into its SQLite store before it
starts) and observes a simulated cluster (devtools.simcluster) every ``--interval``;
``--shims`` simulated shims (devtools.polling_shims: the Java shim's requests, ETag, ?wait=30,
validity renewed on 304) poll it. Measured:

- idle, over ``--idle-seconds`` with nothing changing: the bytes the service sends each shim,
  extrapolated to an hour, the answers (200: a whole table; 304), and the service's CPU seconds
  per second;
- a decision change (one volume below the hard limit: PAUSE, then back: OPEN): the time from
  the round that decided it (its computed_at) to the moment the last shim holds the new table.

``--compare REV`` runs a git revision the same way in the same run, after the current code,
and prints each figure as a ratio to it.

    .venv/bin/python bench/bench_shims.py --compare 4325ed2
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from devtools.commands import run_command
from devtools.polling_shims import PollingShims
from devtools.simcluster import MiB, SimulatedClusterProcess
from service_process import ServiceProcess, source_tree, revisions as code_revisions

QUOTA_STORE_FILE = "quotas.sqlite3"  # the store's name in every revision compared (app.quotas.store today)
VOLUME_BYTES = 1024 * MiB
HARD_LIMIT_BYTES = 100 * MiB


def preload_overrides(data_dir: Path, count: int, tree: Path) -> None:
    """``count`` overrides of three kinds (user, client id, both), in one transaction; the rows
    are the store's own format (app/quotas/store.py). The store is created by the revision's
    own code, in ``tree`` (its schema version is the one it opens)."""
    path = data_dir / QUOTA_STORE_FILE
    create = f"from pathlib import Path; from app.quotas.store import QuotaStore; QuotaStore(Path({str(path)!r})).close()"
    run_command([sys.executable, "-c", create], 300, cwd=tree, check=True)
    now = time.time()
    rows = []
    for i in range(count):
        user = ("name", f"user-{i}") if i % 3 != 1 else ("none", "")
        client = ("name", f"client-{i}") if i % 3 != 0 else ("none", "")
        rows.append((*user, *client, '{"fetch": 4194304.0, "produce": 2097152.0}', now))
    with sqlite3.connect(path) as db:
        db.executemany("INSERT OR REPLACE INTO overrides VALUES (?, ?, ?, ?, ?, ?)", rows)


class ShimFleet:
    """The simulated shims on an event loop of their own thread."""

    def __init__(self, port: int, count: int, ramp_seconds: float, accept_encoding: str | None) -> None:
        self.shims = PollingShims("127.0.0.1", port, count, ramp_seconds=ramp_seconds, accept_encoding=accept_encoding)
        self._thread = threading.Thread(target=lambda: asyncio.run(self.shims.run()), name="shims", daemon=True)
        self._thread.start()

    def holding(self, state: str | None = None) -> int:
        return sum(1 for s in self.shims.stats if s.table is not None and (state is None or s.table.state == state))

    def totals(self) -> tuple[int, int, int, int]:
        """Bytes received, bytes sent, tables (200s), 304s, over all shims."""
        stats = list(self.shims.stats)
        return (sum(s.bytes_received for s in stats), sum(s.bytes_sent for s in stats), sum(len(s.tables) for s in stats),
                sum(s.not_modified for s in stats))

    def last_arrival(self, state: str, after: float) -> float:
        """When the last shim got its first table in ``state`` since ``after`` (time.time())."""
        return max(next(t.received_at for t in list(s.tables) if t.state == state and t.received_at >= after) for s in self.shims.stats)

    def stop(self) -> None:
        self.shims.stop()
        self._thread.join(30)


@dataclass(frozen=True)
class ShimFigures:
    table_bytes: int
    idle_bytes_per_shim_hour: float  # received by a shim: what the service sends it
    idle_sent_per_shim_hour: float  # what a shim sends
    idle_tables: int
    idle_not_modified: int
    idle_cpu_per_second: float
    propagation_seconds: tuple[float, ...]  # per decision change, round to last shim
    change_cpu_seconds: tuple[tuple[float, float], ...]  # per decision change: the service's, the shims' (from its decision on)
    failures: int


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not {what} within {timeout:g} s")
        time.sleep(0.1)


def computed_at(service: ServiceProcess, state: str, timeout: float) -> float:
    """The instant the round that decided ``state`` finished, on the service's clock."""
    deadline = time.monotonic() + timeout
    while True:
        decision = service.client.get("/throttle-factor").json()
        if decision["state"] == state:
            return datetime.fromisoformat(decision["computed_at"].replace("Z", "+00:00")).timestamp()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{service.name}: not {state} within {timeout:g} s")
        time.sleep(0.05)


def measure(service: ServiceProcess, cluster: SimulatedClusterProcess, args: argparse.Namespace) -> ShimFigures:
    service.wait_for_rounds(1, timeout=args.interval + 60)
    fleet = ShimFleet(service.port, args.shims, args.ramp, args.accept_encoding)
    try:
        wait_until(lambda: fleet.holding() == args.shims, args.ramp + 120, f"{args.shims} shims holding a table")
        table_bytes = max(s.table.size for s in fleet.shims.stats if s.table)
        time.sleep(args.wait_settle)  # the first long-polls are under way
        received, sent, tables, not_modified = fleet.totals()
        cpu, started = service.resources().cpu_seconds, time.monotonic()
        time.sleep(args.idle_seconds)
        elapsed = time.monotonic() - started
        cpu = service.resources().cpu_seconds - cpu
        received_after, sent_after, tables_after, not_modified_after = fleet.totals()
        per_shim_hour = 3600 / elapsed / args.shims
        propagation, change_cpu = [], []
        for usable, state in ((HARD_LIMIT_BYTES // 2, "PAUSE"), (VOLUME_BYTES, "OPEN")):
            changed_at = time.time()
            cluster.call("set_usable_bytes", 1, usable, 0)
            decided = computed_at(service, state, args.interval + 30)
            service_cpu, shims_cpu = service.resources().cpu_seconds, time.process_time()
            wait_until(lambda: fleet.holding(state) == args.shims, 120, f"every shim holding the {state} table")
            propagation.append(fleet.last_arrival(state, after=changed_at) - decided)
            change_cpu.append((service.resources().cpu_seconds - service_cpu, time.process_time() - shims_cpu))
        return ShimFigures(
            table_bytes=table_bytes,
            idle_bytes_per_shim_hour=(received_after - received) * per_shim_hour,
            idle_sent_per_shim_hour=(sent_after - sent) * per_shim_hour,
            idle_tables=tables_after - tables,
            idle_not_modified=not_modified_after - not_modified,
            idle_cpu_per_second=cpu / elapsed,
            propagation_seconds=tuple(propagation),
            change_cpu_seconds=tuple(change_cpu),
            failures=sum(s.failures for s in fleet.shims.stats),
        )
    finally:
        fleet.stop()


def ratio(value: float, baseline: float) -> str:
    if not baseline:
        return ""
    share = value / baseline
    return f" ({share:.2f}x)" if share >= 0.01 else f" (1/{1 / share:,.0f})" if share else " (0x)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shims", type=int, default=1000)
    parser.add_argument("--overrides", type=int, default=10_000)
    parser.add_argument("--brokers", type=int, default=10, help="simulated brokers (12 log dirs each)")
    parser.add_argument("--interval", type=float, default=10.0, help="check interval in seconds")
    parser.add_argument("--idle-seconds", type=float, default=90.0, help="the idle window (three 30 s long-polls)")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the shims start")
    parser.add_argument("--wait-settle", type=float, default=5.0, help=argparse.SUPPRESS)
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    parser.add_argument("--accept-encoding", default="gzip", help="sent by every shim (default gzip, as the Java shim; 'identity' for none)")
    args = parser.parse_args()
    settings = {
        "storage_check_interval": f"PT{args.interval:g}S",
        "storage_per_volume_limit_min_available_bytes": str(HARD_LIMIT_BYTES),
    }
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.shims} shims, {args.overrides} overrides, "
          f"{args.brokers} brokers x 12 log dirs, interval {args.interval:g} s, idle window {args.idle_seconds:g} s", flush=True)
    revisions = code_revisions(args.compare)
    results: dict[str, ShimFigures] = {}
    with tempfile.TemporaryDirectory(prefix="bench-shims-") as scratch_name, ExitStack() as stack:
        scratch = Path(scratch_name)
        trees = {name: stack.enter_context(source_tree(revision, scratch)) for name, revision in revisions}
        for name, _ in revisions:
            with SimulatedClusterProcess(args.brokers, 12, total_bytes=VOLUME_BYTES) as cluster:
                data_dir = scratch / f"data-{name.replace(' ', '-')}"
                data_dir.mkdir()
                preload_overrides(data_dir, args.overrides, trees[name])
                service = ServiceProcess(name, trees[name], scratch, kafka_admin_bootstrap_servers=cluster.bootstrap_servers,
                                         data_dir=str(data_dir), **settings)
                try:
                    results[name] = measure(service, cluster, args)
                finally:
                    service.stop()
            print(f"{name}: {results[name]} (load average {os.getloadavg()[0]:.1f})", flush=True)

    baseline = results.get(revisions[-1][0]) if args.compare else None
    print()
    print("| revision | table bytes | idle: bytes to a shim per hour | idle: tables / 304s | idle: service CPU s/s | decision to last shim, s (PAUSE, OPEN) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, _ in revisions:
        f = results[name]
        against = baseline if baseline is not None and name != revisions[-1][0] else None
        print(f"| {name} | {f.table_bytes} | {f.idle_bytes_per_shim_hour / 1024:.1f} KiB{ratio(f.idle_bytes_per_shim_hour, against.idle_bytes_per_shim_hour) if against else ''} | "
              f"{f.idle_tables} / {f.idle_not_modified} | {f.idle_cpu_per_second:.3f}{ratio(f.idle_cpu_per_second, against.idle_cpu_per_second) if against else ''} | "
              f"{', '.join(f'{p:.2f}' for p in f.propagation_seconds)}"
              f"{ratio(max(f.propagation_seconds), max(against.propagation_seconds)) if against else ''} |")
    print(f"\nshim requests: {'; '.join(f'{n} {r.idle_sent_per_shim_hour / 1024:.1f} KiB/h per shim, {r.failures} failed polls' for n, r in results.items())}")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
