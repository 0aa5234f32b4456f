"""The simulated cluster in a process of its own (``python -m devtools.simcluster``), driven over
its standard input and output, one JSON line per call: a benchmark measures the client's CPU
without the simulation's, and each has a core's worth of interpreter to itself."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from typing import Any

from .state import MiB

# How long a start or a control may take (a thousand brokers start in seconds).
ANSWER_SECONDS = 120

# The controls a driver may call, by name (SimulatedCluster's methods).
CONTROLS = (
    "set_usable_bytes",
    "set_total_bytes",
    "take_log_dir_offline",
    "bring_log_dir_online",
    "fence",
    "unfence",
    "unregister",
    "freeze_broker",
    "thaw_broker",
    "stop_broker",
    "start_broker",
    "connections",
)


class SimulatedClusterProcess:
    """``with SimulatedClusterProcess(brokers=1000, log_dirs_per_broker=12) as sim:`` then
    ``sim.bootstrap_servers``, ``sim.call("fence", 3)``, ``sim.pid``."""

    def __init__(self, brokers: int, log_dirs_per_broker: int = 1, total_bytes: int = 64 * MiB, usable_bytes: int | None = None) -> None:
        command = [sys.executable, "-m", "devtools.simcluster", "--brokers", str(brokers), "--log-dirs", str(log_dirs_per_broker),
                   "--total-bytes", str(total_bytes)]
        if usable_bytes is not None:
            command += ["--usable-bytes", str(usable_bytes)]
        # Its standard output carries only the answers, each read as soon as asked for; its
        # standard error is this process's.
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        line = self._answer("start")
        if not line:
            self._process.wait(10)
            raise RuntimeError(f"the simulated cluster did not start (exit {self._process.returncode})")
        started = json.loads(line)
        self.bootstrap_servers: str = started["bootstrap_servers"]

    @property
    def pid(self) -> int:
        return self._process.pid

    def call(self, control: str, *args: Any, **kwargs: Any) -> Any:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps({"call": control, "args": args, "kwargs": kwargs}) + "\n")
        answer = json.loads(self._answer(control) or '{"error": "the simulated cluster exited"}')
        if "error" in answer:
            raise RuntimeError(f"{control}: {answer['error']}")
        return answer["result"]

    def _answer(self, what: str) -> str:
        """The next line of the simulation, or "" once it has exited; a simulation that says
        nothing within ANSWER_SECONDS is killed."""
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], ANSWER_SECONDS)
        if not ready:
            self._process.kill()
            self._process.wait(5)
            raise RuntimeError(f"{what}: the simulated cluster did not answer within {ANSWER_SECONDS} s (killed)")
        return self._process.stdout.readline()

    def stop(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()  # end of input: the simulation stops
        try:
            self._process.wait(15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(5)

    def __enter__(self) -> SimulatedClusterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
