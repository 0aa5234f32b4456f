"""The service as the benchmarks run it: ``python -m app`` from a source tree (this checkout, or a
baseline revision checked out beside it with ``git worktree``), configured through the
environment, and measured from outside: /proc for its CPU time, memory and connections, its own
HTTP endpoints for its rounds."""

from __future__ import annotations

import re
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from devtools.devcluster.resources import ProcessResources, established_connections, process_resources
from devtools.commands import read_log, run_command, start_logged
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
    run_command(["git", "-C", ROOT, "worktree", "add", "--detach", tree, revision], 300, check=True)
    try:
        yield tree
    finally:
        run_command(["git", "-C", ROOT, "worktree", "remove", "--force", tree], 300)


class ServiceProcess:
    """One service process; ``settings`` by field name (e.g. ``storage_check_interval="PT10S"``)."""

    def __init__(self, name: str, tree: Path, scratch: Path, **settings: str) -> None:
        self.name = name
        self.port = free_port()
        env = service_environment(self.port, scratch / f"data-{self.port}", settings)
        self.log_path = scratch / f"{name.replace(' ', '-')}-{self.port}.log"
        self.process = start_logged([sys.executable, "-m", "app"], self.log_path, cwd=tree, env=env)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.client = httpx.Client(base_url=self.base_url, timeout=30)
        if not healthz_answers(self.client, self.process, 60):
            self.stop()
            raise RuntimeError(f"{name} did not start; see {self.log_path}:\n{read_log(self.log_path)[-2000:]}")

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
