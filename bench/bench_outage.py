"""Soak: the service against a cluster it cannot reach, for as long as an outage lasts.

Starts the service (``python -m app``) against a bootstrap address nobody listens on (or,
with ``--silent``, a listener that accepts connections and never answers), checking every
``--interval``, and prints once a minute its threads, open files, resident memory and CPU
time, with each figure as a ratio of the first minute's. ``--compare REV`` runs the code of
a git revision beside it, in the same run, as the baseline.

    .venv/bin/python bench/bench_outage.py --minutes 10
    .venv/bin/python bench/bench_outage.py --minutes 10 --compare 4325ed2
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from service_process import ServiceProcess, free_port, source_tree, revisions as code_revisions
from devtools.devcluster.resources import ProcessResources


def silent_listener() -> int:
    """Accepts every connection and never answers; connections stay open 30 s."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    held: list[tuple[float, socket.socket]] = []

    def run() -> None:
        listener.settimeout(0.5)
        while True:
            try:
                held.append((time.monotonic(), listener.accept()[0]))
            except TimeoutError:
                pass
            while held and held[0][0] < time.monotonic() - 30:
                held.pop(0)[1].close()

    threading.Thread(target=run, daemon=True).start()
    return listener.getsockname()[1]


class OutageService(ServiceProcess):
    """A service that is expected to fail every round: its reads may go unanswered, and it may exit."""

    def __init__(self, name: str, tree: Path, scratch: Path, bootstrap: str, interval: str) -> None:
        self.failed_reads = 0
        super().__init__(
            name, tree, scratch,
            kafka_admin_bootstrap_servers=bootstrap,
            storage_check_interval=interval,
            storage_per_volume_limit_min_available_ratio="0.05",
        )

    def rounds(self) -> int | None:
        try:
            return super().rounds()
        except httpx.HTTPError:
            self.failed_reads += 1
            return None

    def resources(self) -> ProcessResources | None:
        if self.process.poll() is not None:
            return None
        return super().resources()


def ratio(value: float, first: float) -> str:
    return f"{value / first:.2f}x" if first else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--interval", default="PT1S", help="check interval (ISO-8601)")
    parser.add_argument("--silent", action="store_true", help="a listener that never answers instead of a closed port")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    args = parser.parse_args()

    bootstrap = f"127.0.0.1:{silent_listener() if args.silent else free_port()}"
    with tempfile.TemporaryDirectory(prefix="bench-outage-") as scratch, ExitStack() as stack:
        scratch_dir = Path(scratch)
        services: list[OutageService] = []
        stack.callback(lambda: [service.stop() for service in services])
        for name, revision in code_revisions(args.compare):
            tree = stack.enter_context(source_tree(revision, scratch_dir))
            services.append(OutageService(name, tree, scratch_dir, bootstrap, args.interval))
        print(f"bootstrap {bootstrap} ({'silent listener' if args.silent else 'nobody listening'}), check interval {args.interval}, "
              f"{args.minutes} min, {os.cpu_count()} cores")
        first: dict[str, ProcessResources] = {}
        for minute in range(args.minutes + 1):
            if minute:
                time.sleep(60)
            for service in services:
                now = service.resources()
                rounds = service.rounds()
                if now is None:
                    print(f"[{minute:3d} min] {service.name}: process exited ({service.process.returncode})")
                    continue
                first.setdefault(service.name, now)
                start = first[service.name]
                print(
                    f"[{minute:3d} min] {service.name}: {rounds} rounds; {now}; ratio to the first: "
                    f"threads {ratio(now.threads, start.threads)}, files {ratio(now.open_files, start.open_files)}, "
                    f"RSS {ratio(now.rss_kib, start.rss_kib)}; unanswered reads {service.failed_reads}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
