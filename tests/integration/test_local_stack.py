"""The README's run command without Docker (`make run` = `python -m devtools.localstack`): a KRaft
controller, three brokers with the shim installed, and the service on loopback; the demo
fills one broker's volume and frees it; Ctrl-C stops everything and leaves no process
behind. With bootstrap servers configured, the same command starts only the service."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from devtools.devcluster.cluster import mounts_under
from devtools.commands import read_log, run_command, start_logged
from app.settings.loading import environ_without_settings

from .conftest import ROOT, free_port

SHIM_TABLE_LINE = "Throttle service shim: table from"
MiB = 1024 * 1024


def _clean_env(**extra: str) -> dict[str, str]:
    env = environ_without_settings()
    env.update(extra)
    return env


def _descendants(root: int) -> dict[int, str]:
    """pid -> command name of every live descendant of `root`."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = (int(fields[1]), name)
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, name) in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = name
                frontier.append(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for_output(log: Path, process: subprocess.Popen, marker: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = read_log(log)
        if marker in text:
            return text
        if process.poll() is not None:
            raise AssertionError(f"the local stack exited with {process.returncode}:\n{text[-4000:]}")
        time.sleep(0.5)
    raise AssertionError(f"no {marker!r} within {timeout:.0f} s:\n{read_log(log)[-4000:]}")


def _decision(base: str, predicate, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    last: dict | str = "no answer"
    while time.monotonic() < deadline:
        try:
            last = httpx.get(f"{base}/throttle-factor", timeout=5).json()
            if predicate(last):
                return last
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.5)
    raise AssertionError(f"decision not reached within {timeout:.0f} s; last: {last}")


def _demo_rates(output: str, state: str) -> list[float]:
    """Producer bytes/s of the demo's per-second lines in `state`."""
    rates = []
    for match in re.finditer(rf"\| {state}\s+factor .*\| producer ([\d.]+) (MiB|KiB)/s", output):
        rates.append(float(match.group(1)) * (MiB if match.group(2) == "MiB" else 1024))
    return rates


def _ramp_stretches(output: str) -> list[tuple[int, int, float, float]]:
    """(first second, last second, quota, producer rate) of each THROTTLE stretch of the demo's summary."""
    def rate(number: str, unit: str) -> float:
        return float(number) * (MiB if unit == "MiB" else 1024)

    pattern = r"^ +(\d+)- *(\d+) s +factor [\d.]+ +quota +([\d.]+) (MiB|KiB)/s +producer +([\d.]+) (MiB|KiB)/s$"
    return [
        (int(m.group(1)), int(m.group(2)), rate(m.group(3), m.group(4)), rate(m.group(5), m.group(6)))
        for m in re.finditer(pattern, output, re.M)
    ]


# What one fresh quota epoch lets a client write at once: the floor (64 KiB/s) over the 10.5 s a
# young Kafka sensor divides by (docs/shim.md, "No allowance in a fresh epoch"). Along the tail of
# a ramp, where the quota is a few times the floor, a steep fall starts one, and it weighs in a
# stretch of a few seconds.
FRESH_EPOCH_ALLOWANCE = 10.5 * 64 * 1024


def test_local_stack_protects_the_cluster_and_ctrl_c_leaves_nothing_behind(tmp_path):
    port = free_port()
    log = tmp_path / "localstack.out"
    process = start_logged(
        [sys.executable, "-m", "devtools.localstack"],
        log,
        cwd=ROOT,
        env=_clean_env(THROTTLE_SERVICE_HTTP_PORT=str(port), THROTTLE_SERVICE_DATA_DIR=str(tmp_path / "data")),
        start_new_session=True,
    )
    seen: dict[int, str] = {}
    base_dir: Path | None = None
    try:
        banner = _wait_for_output(log, process, "Ctrl-C stops", 300)
        base = f"http://127.0.0.1:{port}"
        assert f"service: {base}" in banner
        data = tmp_path / "data"
        assert f"data (quota store, history; kept between runs): {data}" in banner
        assert f"throttle-report --input {data / 'history'} --output {data / 'report'}" in banner
        bootstrap = re.search(r"bootstrap servers (\S+)", banner).group(1)
        base_dir = Path(re.search(r"broker logs \(.*\): (\S+)/broker-<id>/server.log", banner).group(1))

        decision = _decision(base, lambda d: d["source"] == "observed" and d["active_brokers"] == 3, 60)
        assert decision["state"] == "OPEN" and decision["active_log_dirs"] == 3
        volumes = httpx.get(f"{base}/volumes", timeout=5).json()["volumes"]
        assert sorted(v["broker_id"] for v in volumes) == [1, 2, 3]
        if os.geteuid() == 0:  # each log dir is its own 64 MiB tmpfs
            assert {v["total_bytes"] for v in volumes} == {64 * MiB}

        seen.update(_descendants(process.pid))
        assert sum(name == "java" for name in seen.values()) == 4, seen  # the controller and three brokers
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            polled = [SHIM_TABLE_LINE in (base_dir / f"broker-{b}" / "server.log").read_text() for b in (1, 2, 3)]
            if all(polled):
                break
            time.sleep(0.5)
        assert all(polled), f"every broker's shim should have fetched the service's table: {polled}"

        demo = run_command(
            [sys.executable, "-m", "devtools.demo", "--bootstrap-servers", bootstrap, "--service", base,
             "--hold", "3", "--recover", "3", "--timeout", "150"],
            400, cwd=ROOT,
        )
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        out = demo.stdout
        # Freed, the volume may be seen on its way back (briefly THROTTLE) before OPEN.
        assert out.index("-> PAUSE") < out.index("== freeing") < out.index("-> OPEN", out.index("== freeing")), out
        healthy = re.search(r"healthy +producer ([\d.]+) MiB/s", out)
        assert healthy and float(healthy.group(1)) > 2.4, out  # healthy: the offered 3 MiB/s
        throttle = re.search(r"THROTTLE +(\d+) s to (\d+) s", out)
        assert throttle and int(throttle.group(2)) - int(throttle.group(1)) >= 24, out  # several of Kafka's 11 s windows
        stretches = _ramp_stretches(out)
        assert len(stretches) >= 6, out
        # The producer follows its quota down: past the first window it writes at most 1.5 times
        # what its quota allowed over the ramp, in each stretch at most twice its quota plus one
        # fresh epoch's allowance, and it ends the ramp at under a third of where it began.
        # (The last stretch ends at the PAUSE, which takes what the broker had already accepted.)
        settled = [(last - first + 1, quota, rate) for first, last, quota, rate in stretches[:-1]
                   if first >= int(throttle.group(1)) + 12]
        assert settled, out
        assert sum(s * rate for s, _, rate in settled) <= 1.5 * sum(s * quota for s, quota, _ in settled), out
        assert all(s * rate <= 2 * s * quota + FRESH_EPOCH_ALLOWANCE for s, quota, rate in settled), out
        assert stretches[-2][3] < stretches[0][3] / 3, out
        assert max(_demo_rates(out, "PAUSE")[2:]) <= 256 * 1024, out  # paused: held to the 64 KiB/s floor
        paused = re.search(r"PAUSE +from \d+ s, producer (\d+) KiB/s from its third second", out)
        assert paused and int(paused.group(1)) <= 128, out  # the summary's rate while paused: the floor, not the second before
        assert _demo_rates(out, "OPEN")[-1] > 2.4 * MiB, out  # recovered
        assert (data / "quotas.sqlite3").exists() and list((data / "history").glob("date=*/*")), "the data stays where printed"
        seen.update(_descendants(process.pid))
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    output = read_log(log)
    assert process.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "stopped." in output
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in seen if _alive(pid)] == [], f"processes left behind: {seen}"
    assert base_dir is not None and not base_dir.exists(), "the cluster's directory should be removed"
    assert mounts_under(base_dir.parent / base_dir.name) == []


def test_with_bootstrap_servers_configured_only_the_service_starts(tmp_path, kafka_cluster):
    port = free_port()
    log = tmp_path / "localstack.out"
    process = start_logged(
        [sys.executable, "-m", "devtools.localstack"],
        log,
        cwd=ROOT,
        env=_clean_env(
            THROTTLE_SERVICE_HTTP_PORT=str(port),
            THROTTLE_SERVICE_HTTP_HOST="127.0.0.1",
            THROTTLE_SERVICE_DATA_DIR=str(tmp_path / "data"),
            CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS=kafka_cluster.bootstrap_servers,
            CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_PER_VOLUME_LIMIT_MIN_AVAILABLE_RATIO="0.05",
            CLIENT_QUOTA_CALLBACK_STATIC_STORAGE_CHECK_INTERVAL="PT1S",
        ),
        start_new_session=True,
    )
    try:
        decision = _decision(f"http://127.0.0.1:{port}", lambda d: d["source"] == "observed", 60)
        assert decision["active_brokers"] == len(kafka_cluster.broker_ids)
        assert decision["limits"] == {"kind": "min-available-ratio", "hard": 0.05, "soft": None, "hysteresis": 0.0}
        children = _descendants(process.pid)
        assert "java" not in children.values(), f"no Kafka should be started: {children}"
        assert "starting Kafka" not in read_log(log)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    assert process.returncode == 0, read_log(log)[-3000:]
