"""Stopping the processes the tests and benchmarks start."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen, timeout: float = 15.0) -> None:
    """SIGTERM (a graceful stop), then SIGKILL if it has not exited within ``timeout`` seconds."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
