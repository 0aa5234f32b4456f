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
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from devtools.devcluster.resources import ProcessResources, process_resources
from app.settings.loading import environ_without_settings

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class Service:
    def __init__(self, name: str, root: Path, bootstrap: str, interval: str, scratch: Path) -> None:
        self.name = name
        self.port = free_port()
        env = environ_without_settings()
        env.update(
            {
                "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS": bootstrap,
                "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL": interval,
                "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO": "0.05",
                "THROTTLE_SERVICE_HTTP_HOST": "127.0.0.1",
                "THROTTLE_SERVICE_HTTP_PORT": str(self.port),
                "THROTTLE_SERVICE_DATA_DIR": str(scratch / name),
            }
        )
        self.log = open(scratch / f"{name}.log", "w")
        self.process = subprocess.Popen([sys.executable, "-m", "app"], cwd=root, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=5)
        deadline = time.monotonic() + 30
        while True:
            try:
                if self.client.get("/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{name} did not start; see {self.log.name}")
            time.sleep(0.2)
        self.failed_reads = 0

    def rounds(self) -> int | None:
        try:
            return self.client.get("/readyz").json()["rounds"]
        except httpx.HTTPError:
            self.failed_reads += 1
            return None

    def resources(self) -> ProcessResources | None:
        if self.process.poll() is not None:
            return None
        return process_resources(self.process.pid)

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def checkout(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev], check=True, capture_output=True)
    return into


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
    with tempfile.TemporaryDirectory(prefix="bench-outage-") as scratch:
        scratch_dir = Path(scratch)
        services = [Service("current", ROOT, bootstrap, args.interval, scratch_dir)]
        baseline_tree = None
        try:
            if args.compare:
                baseline_tree = checkout(args.compare, scratch_dir / "baseline-tree")
                services.append(Service(f"baseline {args.compare}", baseline_tree, bootstrap, args.interval, scratch_dir))
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
        finally:
            for service in services:
                service.stop()
            if baseline_tree is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(baseline_tree)], capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
