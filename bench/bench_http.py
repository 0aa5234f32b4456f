"""Throughput and latency of the hot endpoints against a bare FastAPI endpoint:
/throttle-factor (200 and 304), /quotas/resolve and conditional GET /quotas (304), each
served by uvicorn with httptools through the service's edge protocol (as the service runs),
with uvicorn's own h11 protocol (as the service ran before) and with uvicorn's own httptools
protocol (what the edge costs).

Run: .venv/bin/python bench/bench_http.py [--duration 10] [--rounds 3] [--parsers httptools-edge,h11,httptools]
Needs wrk (Debian package ``wrk``). Every figure is measured in the same run, the targets'
order reversed every other round, and reported as ratios taken within each round (min /
median / max over the rounds): to the bare endpoint on the same parser, and of each parser to
the first one for the same endpoint. This machine is noisy."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from service_process import free_port

from devtools.devcluster.resources import process_resources
from devtools.commands import run_command
from devtools.processes import stop_process

ROOT = Path(__file__).resolve().parent.parent
CONNECTIONS = 32


PARSERS = ("httptools-edge", "h11", "httptools")


def start(kind: str, parser: str, attempts: int = 3) -> tuple[subprocess.Popen, int]:
    """A server on a free port; another port if someone took this one before it bound."""
    # PYTHONPATH: the app of this checkout, not whichever one the environment has installed.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(attempts):
        port = free_port()
        proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "serve.py"), kind, str(port), parser], cwd=ROOT, env=env)
        deadline = time.time() + 60
        while time.time() < deadline and proc.poll() is None:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz" if kind == "service" else f"http://127.0.0.1:{port}/bare", timeout=1)
                return proc, port
            except httpx.HTTPError:
                time.sleep(0.2)
        proc.kill()
        proc.wait()
    raise RuntimeError(f"{kind} server ({parser}) did not start")


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
    out = run_command(cmd, duration + 120, check=True).stdout
    if "Latency Distribution" not in out:
        raise RuntimeError(f"wrk gave no latency distribution for {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _to_ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _to_ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if non_2xx:
        raise RuntimeError(f"{url}: {non_2xx.group(1)} error responses")
    return {"rps": rps, "p50": p50, "p99": p99, "requests": requests}


def measured(pid: int, url: str, duration: int, headers: dict[str, str] | None) -> dict[str, float]:
    """wrk's figures and the server's CPU time per request: the CPU figure hardly moves with
    the machine's load, which req/s does."""
    before = process_resources(pid).cpu_seconds
    figures = wrk(url, duration, headers)
    figures["cpu_us"] = (process_resources(pid).cpu_seconds - before) / figures["requests"] * 1e6
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parsers", default=",".join(PARSERS), help="comma-separated, the first the one the others are compared to")
    args = parser.parse_args()
    parsers = args.parsers.split(",")
    if shutil.which("wrk") is None:
        sys.exit("wrk is needed: apt-get install wrk")

    servers: dict[tuple[str, str], tuple[subprocess.Popen, int]] = {}
    try:
        for kind in ("service", "bare"):
            for parser in parsers:
                servers[kind, parser] = start(kind, parser)
        targets: dict[tuple[str, str], tuple[int, str, dict[str, str] | None]] = {}
        for parser in parsers:
            service_url = f"http://127.0.0.1:{servers['service', parser][1]}"
            decision = httpx.get(f"{service_url}/throttle-factor")
            etag = decision.headers["etag"]
            quotas_etag = httpx.get(f"{service_url}/quotas").headers["etag"]
            resolve_url = f"{service_url}/quotas/resolve?user=user-501&client-id=billing&type=produce"
            assert httpx.get(resolve_url).json()["level"] == "user, default client-id"
            bare_url = f"http://127.0.0.1:{servers['bare', parser][1]}/bare"
            bare_size = len(httpx.get(bare_url).content)
            service, bare = servers["service", parser][0].pid, servers["bare", parser][0].pid
            targets.update({
                ("bare endpoint", parser): (bare, bare_url, None),
                ("/throttle-factor 200", parser): (service, f"{service_url}/throttle-factor", None),
                ("/throttle-factor 304", parser): (service, f"{service_url}/throttle-factor", {"If-None-Match": etag}),
                ("/quotas/resolve", parser): (service, resolve_url, None),
                ("/quotas 304", parser): (service, f"{service_url}/quotas", {"If-None-Match": quotas_etag}),
            })
        print(f"body: service {len(decision.content)} bytes, bare {bare_size} bytes; {CONNECTIONS} connections, {args.duration}s x {args.rounds} rounds")
        results: dict[tuple[str, str], list[dict[str, float]]] = {target: [] for target in targets}
        for _, url, headers in targets.values():  # warm-up
            wrk(url, 2, headers)
        for round_ in range(args.rounds):
            order = list(targets.items())
            for target, (pid, url, headers) in order if round_ % 2 == 0 else reversed(order):
                results[target].append(measured(pid, url, args.duration, headers))
    finally:
        for proc, _ in servers.values():
            stop_process(proc, timeout=10)

    def median(target: tuple[str, str], figure: str) -> float:
        return statistics.median(run[figure] for run in results[target])

    def ratios(target: tuple[str, str], base: tuple[str, str], figure: str) -> str:
        """min / median / max over the rounds of the ratio taken within each round."""
        each = sorted(run[figure] / based[figure] for run, based in zip(results[target], results[base]))
        return f"{each[0]:.2f}/{statistics.median(each):.2f}/{each[-1]:.2f}"

    print(f"{'endpoint':<24}{'parser':>16}{'req/s':>10}{'x bare min/med/max':>20}{'p50 ms':>9}{'p99 ms':>9}{'p99 x bare':>16}{'CPU us/req':>12}")
    for name, parser in results:
        bare = ("bare endpoint", parser)
        p50, p99, cpu = (median((name, parser), figure) for figure in ("p50", "p99", "cpu_us"))
        print(
            f"{name:<24}{parser:>16}{median((name, parser), 'rps'):>10.0f}{ratios((name, parser), bare, 'rps'):>20}"
            f"{p50:>9.2f}{p99:>9.2f}{ratios((name, parser), bare, 'p99'):>16}{cpu:>12.0f}"
        )
    first = parsers[0]
    for other in parsers[1:]:
        print(f"\n{'endpoint':<24}{f'{first} / {other} req/s':>28}{'CPU us/req':>18}")
        for name in dict.fromkeys(name for name, _ in results):
            print(f"{name:<24}{ratios((name, first), (name, other), 'rps'):>28}{ratios((name, first), (name, other), 'cpu_us'):>18}")


if __name__ == "__main__":
    main()
