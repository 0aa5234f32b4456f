"""Throughput and latency of the hot endpoints against a bare FastAPI endpoint:
/throttle-factor (200 and 304), /quotas/resolve and conditional GET /quotas (304).

Run: .venv/bin/python bench/bench_http.py [--duration 10] [--rounds 3]
Needs wrk (Debian package ``wrk``). Every figure is measured in the same run, servers and
load alternating, and reported as a ratio to the bare endpoint: this machine is noisy."""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(kind: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "serve.py"), kind, str(port)], cwd=ROOT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/healthz" if kind == "service" else f"http://127.0.0.1:{port}/bare", timeout=1)
            return proc, port
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{kind} server did not start")


def _to_ms(value: str) -> float:
    match = re.match(r"([\d.]+)(us|ms|s|m)$", value)
    if match is None:
        raise ValueError(f"unexpected wrk latency {value!r}")
    number, unit = match.groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def wrk(url: str, duration: int, headers: dict[str, str] | None = None) -> dict[str, float]:
    cmd = ["wrk", "-t1", f"-c{CONNECTIONS}", f"-d{duration}s", "--latency", url]
    for name, value in (headers or {}).items():
        cmd[1:1] = ["-H", f"{name}: {value}"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if "Latency Distribution" not in out:
        raise RuntimeError(f"wrk gave no latency distribution for {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if non_2xx:
        raise RuntimeError(f"{url}: {non_2xx.group(1)} error responses")
    return {"rps": rps, "p50": p50, "p99": p99}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")

    service, service_port = start("service")
    bare, bare_port = start("bare")
    try:
        decision = httpx.get(f"http://127.0.0.1:{service_port}/throttle-factor")
        etag = decision.headers["etag"]
        quotas_etag = httpx.get(f"http://127.0.0.1:{service_port}/quotas").headers["etag"]
        resolve_url = f"http://127.0.0.1:{service_port}/quotas/resolve?user=user-501&client-id=billing&type=produce"
        assert httpx.get(resolve_url).json()["level"] == "user, default client-id"
        bare_size = len(httpx.get(f"http://127.0.0.1:{bare_port}/bare").content)
        print(f"body: service {len(decision.content)} bytes, bare {bare_size} bytes; {CONNECTIONS} connections, {args.duration}s x {args.rounds} rounds")
        targets = {
            "bare endpoint": (f"http://127.0.0.1:{bare_port}/bare", None),
            "/throttle-factor 200": (f"http://127.0.0.1:{service_port}/throttle-factor", None),
            "/throttle-factor 304": (f"http://127.0.0.1:{service_port}/throttle-factor", {"If-None-Match": etag}),
            "/quotas/resolve": (resolve_url, None),
            "/quotas 304": (f"http://127.0.0.1:{service_port}/quotas", {"If-None-Match": quotas_etag}),
        }
        results: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
        for name, (url, headers) in targets.items():  # warm-up
            wrk(url, 2, headers)
        for _ in range(args.rounds):
            for name, (url, headers) in targets.items():
                results[name].append(wrk(url, args.duration, headers))
    finally:
        for proc in (service, bare):
            proc.terminate()
            proc.wait(10)

    base = statistics.median(r["rps"] for r in results["bare endpoint"])
    print(f"{'endpoint':<24}{'req/s':>10}{'x bare':>9}{'p50 ms':>9}{'p99 ms':>9}")
    for name, runs in results.items():
        rps = statistics.median(r["rps"] for r in runs)
        p50 = statistics.median(r["p50"] for r in runs)
        p99 = statistics.median(r["p99"] for r in runs)
        print(f"{name:<24}{rps:>10.0f}{rps / base:>9.2f}{p50:>9.2f}{p99:>9.2f}")


if __name__ == "__main__":
    main()
