"""Starting and stopping the service processes the tests and benchmarks run (child commands
in general: ``devtools.commands``)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx

from app.settings.loading import environ_without_settings
from app.settings.model import env_name, property_name


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def service_environment(port: int, data_dir: Path, settings: dict[str, str]) -> dict[str, str]:
    """This process's environment without any service setting, then the service's settings by
    field name: on 127.0.0.1:``port``, its data in ``data_dir``, and ``settings`` over those
    (which may name another data dir)."""
    env = environ_without_settings()
    for field, value in {"http_host": "127.0.0.1", "http_port": str(port), "data_dir": str(data_dir), **settings}.items():
        env[env_name(property_name(field))] = value
    return env


def healthz_answers(client: httpx.Client, process: subprocess.Popen, timeout: float) -> bool:
    """Whether GET /healthz answers 200 within ``timeout`` seconds; False as soon as the process
    exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            if client.get("/healthz").status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    return False


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

