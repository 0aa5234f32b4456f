"""Load and soak: the real service observing a real 3-broker devcluster every second while
200 clients long-poll it and steady pollers read /throttle-factor and /quotas.

Run: .venv/bin/python bench/bench_soak.py [--duration 60] [--long-pollers 200]
(root: the devcluster mounts tmpfs log dirs). Bounded: a baseline phase of the steady pollers
alone (--baseline seconds, default 15), then the load phase (--duration seconds). Reports errors
(must be 0), p50/p99 latency per endpoint with and without the long-pollers and their ratio,
the long-poll wake-ups, and the service's resident memory (VmRSS from /proc/<pid>/status,
sampled every second) with the growth from the mean of the first 10 s to the mean of the last
10 s of the load phase (must stay under 10%). Exits non-zero when a target is missed."""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import queue
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.commands import read_log, start_logged  # noqa: E402
from devtools.devcluster import LocalKafkaCluster  # noqa: E402
from app.settings.loading import environ_without_settings  # noqa: E402
from app.settings.model import env_name, property_name  # noqa: E402

STEADY_PATHS = ("/throttle-factor", "/quotas", "/healthz")
STEADY_PAUSE = 0.02  # each steady poller: a request, then this pause
STEADY_POLLERS = 2  # per path
LONG_POLL_WAIT = "30s"
RSS_WINDOW = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in STEADY_PATHS})
    errors: list[str] = field(default_factory=list)
    long_poll_responses: dict[int, int] = field(default_factory=dict)


async def steady_poller(client: httpx.AsyncClient, path: str, tally: Tally, stop: asyncio.Event) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            response = await client.get(path)
            elapsed = time.perf_counter() - started
            if response.status_code != 200:
                tally.errors.append(f"{path}: HTTP {response.status_code}")
            else:
                tally.latencies[path].append(elapsed * 1000)
        except httpx.HTTPError as exc:
            tally.errors.append(f"{path}: {exc!r}")
        await asyncio.sleep(STEADY_PAUSE)


async def long_poller(client: httpx.AsyncClient, path: str, tally: Tally, stop: asyncio.Event) -> None:
    """Like a shim: GET, then long-poll with the last ETag until the representation changes."""
    etag: str | None = None
    while not stop.is_set():
        headers = {"If-None-Match": etag} if etag else {}
        try:
            response = await client.get(path, params={"wait": LONG_POLL_WAIT} if etag else None, headers=headers)
        except httpx.HTTPError as exc:
            if not stop.is_set():
                tally.errors.append(f"{path} long-poll: {exc!r}")
            continue
        tally.long_poll_responses[response.status_code] = tally.long_poll_responses.get(response.status_code, 0) + 1
        if response.status_code == 200:
            etag = response.headers["ETag"]
        elif response.status_code != 304:
            tally.errors.append(f"{path} long-poll: HTTP {response.status_code}")


async def rss_sampler(pid: int, samples: list[tuple[float, int]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append((time.monotonic(), rss_kib(pid)))
        await asyncio.sleep(1.0)


async def long_poll_clients(base_url: str, clients: int, seconds: float) -> tuple[dict[int, int], list[str]]:
    """``clients`` long-pollers, each with its own connection (like one shim per broker), half
    on /throttle-factor and half on /quotas, for ``seconds``."""
    tally = Tally()
    stop = asyncio.Event()
    # One client per long-poller: httpx's connection pool slows down with hundreds of
    # connections in one pool, and the bench would measure the pool instead of the service.
    pool = [httpx.AsyncClient(base_url=base_url, timeout=60) for _ in range(clients)]
    tasks = [
        asyncio.create_task(long_poller(client, "/throttle-factor" if i % 2 == 0 else "/quotas", tally, stop))
        for i, client in enumerate(pool)
    ]
    await asyncio.sleep(seconds)
    stop.set()
    # Held long-polls end at the next change (every round here) or at their wait.
    await asyncio.wait(tasks, timeout=5)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for client in pool:
        await client.aclose()
    return tally.long_poll_responses, tally.errors


def run_long_pollers(base_url: str, clients: int, seconds: float, results: multiprocessing.Queue) -> None:
    started = time.process_time()
    responses, errors = asyncio.run(long_poll_clients(base_url, clients, seconds))
    results.put((responses, errors, time.process_time() - started))


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def phase(base_url: str, seconds: float, long_pollers: int, pid: int) -> tuple[Tally, list[tuple[float, int]], dict]:
    """Steady pollers and the memory sampler here; the long-pollers in a process of their
    own, so their client-side work does not delay the steady pollers' measurements."""
    tally = Tally()
    stop = asyncio.Event()
    rss: list[tuple[float, int]] = []
    results: multiprocessing.Queue = multiprocessing.Queue()
    process = None
    if long_pollers:
        process = multiprocessing.Process(target=run_long_pollers, args=(base_url, long_pollers, seconds, results), daemon=True)
        process.start()
    service_cpu = cpu_seconds(pid)
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as steady_client:
        tasks = [asyncio.create_task(rss_sampler(pid, rss, stop))]
        for path in STEADY_PATHS:
            for _ in range(STEADY_POLLERS):
                tasks.append(asyncio.create_task(steady_poller(steady_client, path, tally, stop)))
        await asyncio.sleep(seconds)
        stop.set()
        await asyncio.gather(*tasks)
    usage = {"service_cpu": cpu_seconds(pid) - service_cpu, "long_poller_cpu": 0.0}
    if process is not None:
        try:
            # Generous: on a loaded machine, closing hundreds of clients takes a while.
            responses, errors, client_cpu = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 120)
        except queue.Empty:
            process.kill()
            responses, errors, client_cpu = {}, [f"long-poll process gave no result (exit code {process.exitcode})"], 0.0
        process.join(10)
        tally.long_poll_responses, usage["long_poller_cpu"] = responses, client_cpu
        tally.errors.extend(errors)
    return tally, rss, usage


def start_service(cluster: LocalKafkaCluster, data_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    settings = {
        "http_host": "127.0.0.1",
        "http_port": str(port),
        "data_dir": str(data_dir),
        "kafka_admin_bootstrap_servers": cluster.bootstrap_servers,
        "storage_check_interval": "PT1S",
        "storage_per_volume_limit_min_available_bytes": str(8 * 1024 * 1024),
    }
    env = environ_without_settings()
    env.update({env_name(property_name(name)): value for name, value in settings.items()})
    process = start_logged([sys.executable, "-m", "app"], data_dir / "service.log", cwd=ROOT, env=env)
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(base_url + "/throttle-factor", timeout=2).json().get("source") == "observed":
                return process, base_url
        except (httpx.HTTPError, ValueError):
            pass
        if process.poll() is not None:
            raise RuntimeError(f"service exited: {read_log(data_dir / 'service.log')[-2000:]}")
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("service did not observe the cluster within 60 s")


def report(name: str, tally: Tally, seconds: float) -> dict[str, tuple[float, float]]:
    out = {}
    for path, values in tally.latencies.items():
        out[path] = (percentile(values, 0.5), percentile(values, 0.99))
        print(f"  {name:9} {path:17} {len(values) / seconds:7.0f} req/s  p50 {out[path][0]:6.2f} ms  p99 {out[path][1]:7.2f} ms")
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load (at least 25)")
    parser.add_argument("--baseline", type=float, default=15.0, help="seconds of steady polling alone first")
    parser.add_argument("--long-pollers", type=int, default=200)
    args = parser.parse_args()
    if args.duration < 2 * RSS_WINDOW + 5:
        parser.error(f"--duration must be at least {2 * RSS_WINDOW + 5:.0f} s (two {RSS_WINDOW:.0f} s memory windows)")

    with tempfile.TemporaryDirectory(prefix="bench-soak-") as scratch, LocalKafkaCluster(brokers=3, log_dir_size_mib=64) as cluster:
        process, base_url = start_service(cluster, Path(scratch))
        try:
            print(f"service pid {process.pid} observing {cluster.bootstrap_servers} every 1 s; {os.cpu_count()} cores")
            baseline, _, base_usage = asyncio.run(phase(base_url, args.baseline, 0, process.pid))
            loaded, rss, usage = asyncio.run(phase(base_url, args.duration, args.long_pollers, process.pid))
        finally:
            process.terminate()
            process.wait(15)

    print(f"\nlatency, {STEADY_POLLERS} steady pollers per path ({STEADY_PAUSE * 1000:.0f} ms pause), baseline {args.baseline:.0f} s then load {args.duration:.0f} s:")
    base = report("baseline", baseline, args.baseline)
    load = report(f"+{args.long_pollers} lp", loaded, args.duration)
    for path in STEADY_PATHS:
        print(f"  ratio {path:17} p50 x{load[path][0] / base[path][0]:.2f}  p99 x{load[path][1] / base[path][1]:.2f}")
    wakeups = loaded.long_poll_responses
    print(f"long-poll answers: {wakeups.get(200, 0)} x 200 (changed), {wakeups.get(304, 0)} x 304 (wait ended), over {args.long_pollers} clients")

    print(
        f"service CPU: {base_usage['service_cpu'] / args.baseline * 100:.0f}% of a core in the baseline,"
        f" {usage['service_cpu'] / args.duration * 100:.0f}% under load; long-poll clients {usage['long_poller_cpu'] / args.duration * 100:.0f}%"
    )
    start = rss[0][0]
    first = [kib for at, kib in rss if at - start < RSS_WINDOW]
    last = [kib for at, kib in rss if rss[-1][0] - at < RSS_WINDOW]
    growth = statistics.mean(last) / statistics.mean(first) - 1
    timeline = " ".join(f"{kib / 1024:.1f}" for _, kib in rss[:: max(1, len(rss) // 12)])
    print(f"RSS MiB over time: {timeline}")
    middle_at = start + (rss[-1][0] - start) / 2
    middle = [kib for at, kib in rss if middle_at <= at < middle_at + RSS_WINDOW]
    # A one-off step (buffers for the new connections) and a leak look alike in the first
    # figure; the second half tells them apart.
    print(f"RSS second half: mean {statistics.mean(middle) / 1024:.1f} MiB at the middle, {statistics.mean(last) / 1024:.1f} MiB at the end ({(statistics.mean(last) / statistics.mean(middle) - 1) * 100:+.1f}%)")
    print(f"RSS first {RSS_WINDOW:.0f} s mean {statistics.mean(first) / 1024:.1f} MiB, last {RSS_WINDOW:.0f} s mean {statistics.mean(last) / 1024:.1f} MiB: growth {growth * 100:+.1f}% (target < 10%)")
    errors = baseline.errors + loaded.errors
    print(f"errors: {len(errors)} {errors[:5]}")
    ok = not errors and growth < 0.10 and wakeups.get(200, 0) > 0
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
