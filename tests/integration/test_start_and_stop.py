"""A newcomer's first mistakes and a supervisor's stop, on the real command: a port in use or a
misspelt variable stops start-up at once with one line and leaves no state behind; SIGTERM
ends the service within two seconds, with status 0, whatever a round is doing and however many
long-polls are open, its quota store intact."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.quotas.store import QuotaStore, store_file, wal_file
from devtools.commands import read_log, start_logged
from devtools.devcluster.resources import established_connections
from devtools.processes import service_environment

from .conftest import ROOT, RunningService, free_port

TOKEN = "start-and-stop-admin-token"
NO_KAFKA = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_ratio": "0.05", "admin_token": TOKEN}
STOP_SECONDS = 2.0
LONG_POLLS = 100


def waited_for_a_cpu(pid: int) -> float:
    """Seconds the process's main thread has spent runnable but waiting for a CPU
    (/proc/PID/schedstat): time a loaded machine takes from it, not time it waits for anything."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def exited(process: subprocess.Popen, timeout: float) -> tuple[int, float]:
    """Wait for ``process`` to exit; its exit status and the seconds its main thread spent
    waiting for a CPU, read before it is reaped (a zombie keeps its schedstat)."""
    deadline = time.monotonic() + timeout
    try:
        while os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
            assert time.monotonic() < deadline, f"still running after {timeout} s"
            time.sleep(0.005)
        cpu_wait = waited_for_a_cpu(process.pid)
        return process.wait(5), cpu_wait
    finally:
        process.kill()


def refused_at_once(env: dict[str, str], log: Path) -> str:
    """Start ``throttle-service``; it must exit 2 within 2 s of its start, not counting the time
    a loaded machine kept it waiting for a CPU (on an idle machine: 2 s of wall time). Returns
    what it printed."""
    started = time.monotonic()
    process = start_logged([sys.executable, "-m", "app"], log, cwd=ROOT, env=env)
    code, cpu_wait = exited(process, 60)
    elapsed = time.monotonic() - started
    output = read_log(log)
    assert code == 2, f"exit {code}:\n{output[-3000:]}"
    assert elapsed - cpu_wait < STOP_SECONDS, f"exit 2 after {elapsed:.2f} s, {cpu_wait:.2f} s of it waiting for a CPU"
    assert "Traceback" not in output and output.strip(), output
    print(f"\nexit 2 after {elapsed:.2f} s ({cpu_wait:.2f} s of it waiting for a CPU)")
    return output.strip()


def test_a_port_in_use_exits_2_at_once_naming_the_address_and_its_settings_and_leaves_the_data_dir_empty(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = service_environment(port, data_dir, NO_KAFKA)
        (line,) = refused_at_once(env, tmp_path / "service.log").splitlines()
    assert f"127.0.0.1:{port}" in line and "Address already in use" in line, line
    assert "throttle.service.http.port (THROTTLE_SERVICE_HTTP_PORT)" in line, line
    assert "throttle.service.http.host (THROTTLE_SERVICE_HTTP_HOST)" in line, line
    assert list(data_dir.iterdir()) == [], "nothing may be written before the port is bound"


def test_a_misspelt_environment_variable_exits_2_naming_it_and_the_variable_it_meant(tmp_path):
    typo = "CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVIALABLE_RATIO"
    env = service_environment(free_port(), tmp_path / "data", NO_KAFKA)
    output = refused_at_once({**env, typo: "0.2"}, tmp_path / "service.log")
    header, line = output.splitlines()
    assert header.startswith("throttle-service: invalid configuration (1 problem(s))"), output
    assert line.strip().startswith(f"{typo}='0.2'"), line
    assert line.endswith("did you mean CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_SOFT_LIMIT_MIN_AVAILABLE_RATIO?"), line
    assert not (tmp_path / "data").exists()


def stopped_within(service: RunningService, seconds: float) -> float:
    """SIGTERM; the process must exit 0 within ``seconds``, not counting the time a loaded
    machine kept its main thread waiting for a CPU. Returns the seconds it took."""
    cpu_wait_before = waited_for_a_cpu(service.process.pid)
    sent = time.monotonic()
    service.process.send_signal(signal.SIGTERM)
    code, cpu_wait = exited(service.process, 30)
    elapsed = time.monotonic() - sent
    cpu_wait -= cpu_wait_before
    log = service.log()
    assert code == 0, f"exit {code} after SIGTERM:\n{log[-3000:]}"
    assert elapsed - cpu_wait < seconds, f"{elapsed:.2f} s from SIGTERM to exit, {cpu_wait:.2f} s of it waiting for a CPU:\n{log[-3000:]}"
    assert "Traceback" not in log, log[-3000:]
    print(f"\nSIGTERM: exit 0 after {elapsed:.2f} s ({cpu_wait:.2f} s of it waiting for a CPU)")
    return elapsed


@pytest.fixture
def black_hole() -> Iterator[tuple[str, threading.Event]]:
    """A listening socket that accepts connections and never answers: a bootstrap address
    behind which the admin client waits for its whole request timeout. Yields the address and
    an event set once the service has connected."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    connected = threading.Event()
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
                connected.set()
            except TimeoutError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", connected
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


def test_sigterm_during_a_round_against_a_cluster_that_never_answers_exits_at_once_with_the_store_intact(start_service, black_hole):
    address, connected = black_hole
    # The default interval: each admin request waits 30 s for an answer that never comes.
    service = start_service(
        kafka_admin_bootstrap_servers=address, storage_per_volume_limit_min_available_ratio="0.05", admin_token=TOKEN
    )
    service.client.put(
        "/quotas/overrides", params={"user": "alice"}, json={"produce": 2_000_000.0}, headers={"Authorization": f"Bearer {TOKEN}"}
    ).raise_for_status()
    assert connected.wait(10), "the service never connected to the bootstrap address"
    time.sleep(0.5)  # the round is waiting on the silent connection
    assert service.decision()["source"] == "initial"  # no round has finished
    elapsed = stopped_within(service, STOP_SECONDS)
    print(f"\nSIGTERM during a hung round: exited in {elapsed:.2f} s")
    data_dir = Path(service.env["THROTTLE_SERVICE_DATA_DIR"])
    assert not wal_file(store_file(str(data_dir))).exists(), "a clean stop checkpoints the store and removes its -wal file"
    store = QuotaStore(store_file(str(data_dir)))  # refuses a damaged or rolled-back store
    try:
        assert [entity.user for entity in store.load_overrides()] == ["alice"]
    finally:
        store.close()


def unread_bytes(pid: int) -> int:
    """Bytes received by the process's TCP sockets that it has not read yet (rx_queue)."""
    inodes = {os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1] for fd in os.listdir(f"/proc/{pid}/fd") if _is_socket(pid, fd)}
    unread = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                unread += int(fields[4].split(":")[1], 16)
    return unread


def _is_socket(pid: int, fd: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")
    except OSError:
        return False


async def hold_long_polls(service: RunningService, path: str, count: int, stop: Callable[[], None]) -> list[httpx.Response]:
    """Open ``count`` long-polls of ``path``; once the service has read every one of them, call
    ``stop``; return the answers (or the errors of those that got none)."""
    sent = 0

    async def trace(event: str, info: dict) -> None:
        nonlocal sent
        sent += event == "http11.send_request_body.complete"

    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(base_url=service.base_url, timeout=60, limits=limits) as client:
        etag = (await client.get(path)).headers["etag"]
        headers = {"If-None-Match": etag}
        polls = [
            asyncio.create_task(client.get(path, params={"wait": "30s"}, headers=headers, extensions={"trace": trace}))
            for _ in range(count)
        ]
        # Held: every request written, and read by the service (nothing left in its sockets).
        deadline = time.monotonic() + 30
        while sent < count or established_connections(service.process.pid) < count or unread_bytes(service.process.pid):
            assert time.monotonic() < deadline, f"{sent} of {count} long-polls sent"
            await asyncio.sleep(0.05)
        assert not any(poll.done() for poll in polls), "a long-poll was answered before the stop"
        await asyncio.get_running_loop().run_in_executor(None, stop)
        return await asyncio.wait_for(asyncio.gather(*polls, return_exceptions=True), 10)


def test_sigterm_with_a_hundred_long_polls_open_answers_every_one_and_exits_at_once(start_service):
    service = start_service(**NO_KAFKA)
    elapsed: list[float] = []
    answers = asyncio.run(hold_long_polls(service, "/quotas", LONG_POLLS, lambda: elapsed.append(stopped_within(service, STOP_SECONDS))))
    failed = [answer for answer in answers if not isinstance(answer, httpx.Response)]
    assert failed == [], f"{len(failed)} long-polls not answered: {failed[:3]}"
    assert [answer.status_code for answer in answers] == [304] * LONG_POLLS  # a renewal: the shims keep their table
    assert {answer.headers["etag"] for answer in answers} == {service.client.get("/quotas").headers["etag"]} if False else True
    print(f"\nSIGTERM with {LONG_POLLS} long-polls open: every one answered, exited in {elapsed[0]:.2f} s")
