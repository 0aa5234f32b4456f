"""The service as the benchmarks run it: ``python -m app`` from a source tree (this checkout, or a
baseline revision checked out beside it with ``git worktree``), configured through the
environment, and measured from outside: /proc for its CPU time, memory and connections, its own
HTTP endpoints for its rounds."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from devtools.devcluster.resources import ProcessResources, established_connections, process_resources
from devtools.processes import healthz_answers, service_environment, stop_process

ROOT = Path(__file__).resolve().parents[1]
_ROUND_SERIES = re.compile(rb"^kafka_throttle_round_duration_seconds_(sum|count) (\S+)$", re.MULTILINE)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def revisions(compare: str | None) -> list[tuple[str, str | None]]:
    """(name, git revision) of each code a benchmark runs: this checkout ("current", revision
    None), then the baseline ``compare`` if one is given."""
    return [("current", None)] + ([(f"baseline {compare}", compare)] if compare else [])


@contextmanager
def source_tree(revision: str | None, scratch: Path) -> Iterator[Path]:
    """This checkout (``revision`` None), or ``revision`` checked out in a worktree under
    ``scratch`` for as long as the block runs."""
    if revision is None:
        yield ROOT
        return
    tree = scratch / f"tree-{revision}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), revision], check=True, capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)


class ServiceProcess:
    """One service process; ``settings`` by field name (e.g. ``storage_check_interval="PT10S"``)."""

    def __init__(self, name: str, tree: Path, scratch: Path, **settings: str) -> None:
        self.name = name
        self.port = free_port()
        env = service_environment(self.port, scratch / f"data-{self.port}", settings)
        self.log_path = scratch / f"{name.replace(' ', '-')}-{self.port}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen([sys.executable, "-m", "app"], cwd=tree, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.base_url, timeout=30)
        if not healthz_answers(self.client, self.process, 60):
            self.stop()
            raise RuntimeError(f"{name} did not start; see {self.log_path}:\n{self.log_path.read_text()[-2000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def rounds(self) -> int:
        return self.client.get("/readyz").json()["rounds"]

    def wait_for_rounds(self, rounds: int, timeout: float, poll_seconds: float = 1.0) -> None:
        """Asks /readyz every ``poll_seconds`` (each question costs the service about a millisecond)."""
        deadline = time.monotonic() + timeout
        while self.rounds() < rounds:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"{self.name}: fewer than {rounds} rounds within {timeout:.0f} s; see {self.log_path}")
            time.sleep(poll_seconds)

    def round_durations(self) -> tuple[float, int]:
        """The sum of the round durations so far, and their count (from /metrics)."""
        found = {kind: float(value) for kind, value in _ROUND_SERIES.findall(self.client.get("/metrics").content)}
        return found[b"sum"], int(found[b"count"])

    def resources(self) -> ProcessResources:
        return process_resources(self.pid)

    def connections(self) -> int:
        return established_connections(self.pid)

    def stop(self) -> None:
        self.client.close()
        stop_process(self.process)
        self._log.close()
