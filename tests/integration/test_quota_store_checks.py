"""The SQLite quota store never comes back silently damaged, empty or older.

Each test runs the real ``throttle-service`` (observation off, so no cluster is needed) on a
store broken the way disks, operators and one-file backups break it: start-up stops with exit
2 and one line naming the file, what is wrong and what to do, never a traceback;
``--accept-empty-store`` takes the store as it is, once. ``throttle-service backup FILE``
copies the store while the service runs and takes changes, and the copy, put in place of the
file, restores every override and group."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
import threading
import time
from pathlib import Path

import httpx

from app.settings.loading import environ_without_settings
from app.settings.model import env_name, property_name
from devtools.commands import read_log, run_command, start_logged
from devtools.processes import stop_process
from tests.integration.conftest import ROOT, RunningService, free_port, wait_until_healthy

TOKEN = "store-check-admin-token"
NO_KAFKA = {"storage_check_interval": "PT0S", "storage_per_volume_limit_min_available_ratio": "0.05", "admin_token": TOKEN}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
STORE = "quotas.sqlite3"


def service_env(data_dir: Path, port: int) -> dict[str, str]:
    env = environ_without_settings()
    for field, value in {**NO_KAFKA, "data_dir": str(data_dir), "http_host": "127.0.0.1", "http_port": str(port)}.items():
        env[env_name(property_name(field))] = value
    return env


def start(data_dir: Path, *args: str) -> RunningService:
    """``throttle-service [args]`` on ``data_dir``; returns once /healthz answers."""
    port = free_port()
    log_path = data_dir.parent / f"service-{port}.log"
    process = start_logged([sys.executable, "-m", "app", *args], log_path, cwd=ROOT, env=service_env(data_dir, port))
    service = RunningService(process, f"http://127.0.0.1:{port}", log_path)
    service.client.headers.update(AUTH)
    return wait_until_healthy(service)


def refused(data_dir: Path, *args: str) -> str:
    """``throttle-service [args]`` must refuse to start: exit 2 and one line on stderr, nothing
    else; returns that line."""
    port = free_port()
    # Files, not pipes read after the wait: a service that wrote more than a pipe holds would block.
    out, err = data_dir.parent / f"refused-{port}.out", data_dir.parent / f"refused-{port}.err"
    process = start_logged([sys.executable, "-m", "app", *args], out, err, cwd=ROOT, env=service_env(data_dir, port))
    deadline = time.monotonic() + 30
    served = False
    while process.poll() is None and time.monotonic() < deadline and not served:
        try:
            served = httpx.get(f"http://127.0.0.1:{port}/quotas", timeout=1).status_code == 200
        except httpx.HTTPError:
            time.sleep(0.1)
    stop_process(process)
    stdout, stderr = read_log(out), read_log(err)
    assert not served, f"the service started on this store instead of refusing it:\n{stderr[-3000:]}"
    assert process.returncode == 2, f"exit {process.returncode}:\n{stderr[-3000:]}"
    assert "Traceback" not in stderr and stdout == "", stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert str(data_dir / STORE) in lines[0], lines[0]
    return lines[0]


def put_overrides(service: RunningService, users: list[str], base: float = 1_000_000.0) -> None:
    for n, user in enumerate(users):
        service.client.put("/quotas/overrides", params={"user": user}, json={"produce": base + n}).raise_for_status()


def table(service: RunningService) -> tuple[list[str], list[str]]:
    """The overrides and groups served, each a canonical JSON text, sorted."""
    body = service.client.get("/quotas").json()
    return sorted(json.dumps(o, sort_keys=True) for o in body["overrides"]), sorted(json.dumps(g, sort_keys=True) for g in body["groups"])


def stopped_with_overrides(data_dir: Path, count: int = 3) -> Path:
    """A store that holds ``count`` overrides, its service stopped cleanly; returns the file."""
    service = start(data_dir)
    put_overrides(service, [f"user-{n}" for n in range(count)])
    service.stop()
    assert service.process.returncode == 0  # a requested stop
    assert not (data_dir / f"{STORE}-wal").exists(), "a clean stop leaves the whole store in the one file"
    return data_dir / STORE


def test_a_zero_length_store_stops_start_up_until_the_operator_accepts_it(tmp_path):
    data_dir = tmp_path / "state"
    stopped_with_overrides(data_dir).write_bytes(b"")
    line = refused(data_dir)
    assert "empty (0 bytes)" in line and "--accept-empty-store" in line, line

    accepted = start(data_dir, "--accept-empty-store")
    assert table(accepted) == ([], [])
    accepted.stop()
    # Accepted once: the store as it is now is the one expected.
    start(data_dir).stop()


def test_a_store_left_without_its_wal_after_a_crash_stops_start_up(tmp_path):
    data_dir = tmp_path / "state"
    service = start(data_dir)
    put_overrides(service, [f"user-{n}" for n in range(5)])
    os.kill(service.process.pid, signal.SIGKILL)
    service.process.wait(10)
    service.stop()
    store, wal = data_dir / STORE, data_dir / f"{STORE}-wal"
    assert wal.stat().st_size > 0, "the acknowledged changes should still be in the WAL only"

    # A backup that copied the one file, put in place on another host: nothing beside it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(store, elsewhere / STORE)
    line = refused(elsewhere)
    assert "without its -wal file" in line and "--accept-empty-store" in line, line

    # The same file in place, its WAL lost.
    wal.unlink()
    (data_dir / f"{STORE}-shm").unlink(missing_ok=True)
    line = refused(data_dir)
    assert "older" in line and "5 overrides" in line and "--accept-empty-store" in line, line

    accepted = start(data_dir, "--accept-empty-store")
    assert table(accepted) == ([], [])  # what the file held without its WAL
    accepted.stop()


def test_a_deleted_store_whose_generation_file_remains_stops_start_up(tmp_path):
    data_dir = tmp_path / "state"
    store = stopped_with_overrides(data_dir)
    store.unlink()
    line = refused(data_dir)
    assert "missing" in line and "3 overrides" in line and "--accept-empty-store" in line, line
    assert not store.exists(), "refusing must not leave a new, empty store behind"
    accepted = start(data_dir, "--accept-empty-store")
    assert table(accepted) == ([], [])
    accepted.stop()


def test_a_damaged_file_header_stops_start_up_even_with_accept_empty_store(tmp_path):
    data_dir = tmp_path / "state"
    store = stopped_with_overrides(data_dir)
    with store.open("r+b") as file:
        file.write(b"not a database!!")  # where "SQLite format 3\0" was
    line = refused(data_dir)
    assert "damaged" in line and "backup" in line, line
    assert refused(data_dir, "--accept-empty-store") == line


def test_a_damaged_index_stops_start_up(tmp_path):
    """The rows still read (the table is scanned, not its index), which is why the service
    used to start and fail only at the next PUT."""
    data_dir = tmp_path / "state"
    store = stopped_with_overrides(data_dir, count=40)
    db = sqlite3.connect(store)
    root_page = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_overrides_1'").fetchone()[0]
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    with store.open("r+b") as file:
        file.seek((root_page - 1) * page_size)
        file.write(b"\x00")  # no valid b-tree page type
    db = sqlite3.connect(store)
    assert len(db.execute("SELECT * FROM overrides").fetchall()) == 40
    db.close()
    line = refused(data_dir)
    assert "damaged" in line and "backup" in line, line


def test_a_store_of_a_newer_schema_stops_start_up(tmp_path):
    data_dir = tmp_path / "state"
    store = stopped_with_overrides(data_dir)
    db = sqlite3.connect(store)
    db.execute("PRAGMA user_version = 99")
    db.close()
    line = refused(data_dir)
    assert "newer" in line and "schema 99" in line, line


def run_backup(data_dir: Path, target: Path) -> str:
    done = run_command([sys.executable, "-m", "app", "backup", target], 60, cwd=ROOT, env=service_env(data_dir, 1))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_a_backup_taken_while_the_service_writes_restores_every_override_and_group(tmp_path):
    data_dir = tmp_path / "state"
    service = start(data_dir)
    seed_users = ["alice", "bob", "<default>"]
    put_overrides(service, seed_users)
    service.client.put("/quotas/overrides", params={"client-id": "etl"}, json={"fetch": 5e6, "request": 50}).raise_for_status()
    service.client.put("/quotas/overrides", params={"user": "carol", "client-id": "<default>"}, json={"controller_mutation": 10}).raise_for_status()
    service.client.put("/quotas/groups/analytics", json={"users": ["dave"], "client_ids": ["spark"], "limits": {"produce": 4e6}}).raise_for_status()

    acknowledged: list[str] = []  # users, in the order their PUT was acknowledged
    stop = threading.Event()

    def writer() -> None:
        client = httpx.Client(base_url=service.base_url, headers=AUTH, timeout=10)
        n = 0
        while not stop.is_set():
            user = f"writer-{n}"
            client.put("/quotas/overrides", params={"user": user}, json={"produce": 2e6 + n}).raise_for_status()
            if n % 5 == 0:
                client.put(f"/quotas/groups/g-{n}", json={"users": [f"member-{n}"], "limits": {"fetch": 3e6 + n}}).raise_for_status()
            acknowledged.append(user)
            n += 1
        client.close()

    def wait_for_changes(count: int) -> None:
        deadline = time.monotonic() + 60
        while len(acknowledged) < count and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    wait_for_changes(20)
    before_backup = len(acknowledged)
    during = run_backup(data_dir, tmp_path / "during.sqlite3")
    after_backup = len(acknowledged)
    wait_for_changes(after_backup + 5)
    stop.set()
    thread.join(15)
    assert before_backup >= 20 and len(acknowledged) > after_backup, "the backup must have run while changes were made"
    assert during.startswith("backed up ") and str(tmp_path / "during.sqlite3") in during, during

    final = table(service)
    latest = run_backup(data_dir, tmp_path / "latest.sqlite3")
    assert f"backed up {len(final[0])} overrides and {len(final[1])} groups" in latest, latest
    service.stop()

    # The backup taken during the writes: a consistent copy, which starts a service on a host
    # of its own and holds every change acknowledged before it began.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(tmp_path / "during.sqlite3", elsewhere / STORE)
    restored = start(elsewhere)
    during_table = table(restored)
    restored.stop()
    users = {json.loads(o)["entity"]["user"] for o in during_table[0]}
    seeded = {*seed_users, "carol", None}  # None: the client id's own override
    assert seeded | set(acknowledged[:before_backup]) <= users <= seeded | set(acknowledged[: after_backup + 1])
    assert {json.loads(g)["name"] for g in during_table[1]} >= {"analytics"} | {f"g-{n}" for n in range(0, before_backup, 5)}

    # The latest backup, copied into place after the store was lost: starts as it is, every
    # override and group back.
    store = data_dir / STORE
    store.unlink()
    assert "missing" in refused(data_dir)
    shutil.copy(tmp_path / "latest.sqlite3", store)
    restored = start(data_dir)
    assert table(restored) == final
    restored.stop()

    # The older backup in place of the newer store: a deliberate step, taken once with the flag.
    shutil.copy(tmp_path / "during.sqlite3", store)
    line = refused(data_dir)
    assert "older" in line and "--accept-empty-store" in line, line
    restored = start(data_dir, "--accept-empty-store")
    assert table(restored) == during_table
    restored.stop()
