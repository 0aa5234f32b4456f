"""What anonymous readers of the large answers cost the service, and the shims beside them: the
service against a simulated cluster of 1,000 brokers x 12 log dirs (devtools.simcluster).

Between two rounds (a check interval long enough that none falls inside the measurement):
- the service's CPU per GET /volumes and per POST /what-if (the same candidate each time), once
  each was answered since the last change: /proc's CPU time of the process over ``--calls``
  calls, each read whole (gzip accepted, as curl --compressed or a browser asks);
- GET /throttle-factor latency (one request at a time, each on its kept-alive connection),
  idle, then while ``--clients`` clients (processes of their own, from the same address) ask
  for /volumes and /what-if in turn as fast as they are answered; the p99 under that load is
  given against the idle p99 of the same run, with how many large answers were given (200)
  and refused (429) a second.

- then the same load while the nodes report their volumes (``--reports-per-second``, every
  broker once per 1,000 / rate seconds, with the node token), which changes the view that
  often: /throttle-factor p99 and the service's CPU seconds per second.

``--compare REV`` runs a git revision the same way after this checkout, on the same cluster.

    .venv/bin/python bench/bench_bounded_reads.py
    .venv/bin/python bench/bench_bounded_reads.py --compare 431d5d9 --calls 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import multiprocessing.sharedctypes
import multiprocessing.synchronize
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from devtools.simcluster import MiB, SimulatedClusterProcess
from service_process import ServiceProcess, revisions as code_revisions, source_tree

NODE_TOKEN = "bench-bounded-reads-node-token"
REPORT = json.dumps(
    {"roles": ["broker"], "volumes": [{"log_dir": "/var/lib/kafka/meta", "total_bytes": 1 << 40, "usable_bytes": 1 << 39, "holds": ["metadata"]}]}
).encode()
CANDIDATE = json.dumps({"hard": {"min_available_ratio": 0.1}, "soft": {"min_available_ratio": 0.3}}).encode()
HEADERS = {"Accept-Encoding": "gzip", "Content-Type": "application/json"}


def ask(connection: http.client.HTTPConnection, method: str, path: str) -> int:
    connection.request(method, path, body=CANDIDATE if method == "POST" else None, headers=HEADERS)
    response = connection.getresponse()
    response.read()
    return response.status


def cpu_ms_per_call(service: ServiceProcess, method: str, path: str, calls: int) -> float:
    connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=120)
    try:
        assert ask(connection, method, path) == 200  # answered once since the last change
        before = service.resources().cpu_seconds
        for _ in range(calls):
            assert ask(connection, method, path) == 200
        return (service.resources().cpu_seconds - before) * 1000 / calls
    finally:
        connection.close()


def throttle_factor_latencies(service: ServiceProcess, seconds: float) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
    latencies = []
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            assert ask(connection, "GET", "/throttle-factor") == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.005)
    finally:
        connection.close()
    return latencies


def hammer(port: int, stop: multiprocessing.synchronize.Event, given: multiprocessing.sharedctypes.Synchronized, refused: multiprocessing.sharedctypes.Synchronized) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    while not stop.is_set():
        for method, path in (("GET", "/volumes"), ("POST", "/what-if")):
            try:
                status = ask(connection, method, path)
            except (http.client.HTTPException, OSError):
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                continue
            with (given if status == 200 else refused).get_lock():
                (given if status == 200 else refused).value += 1
    connection.close()


def report(port: int, brokers: int, per_second: float, stop: multiprocessing.synchronize.Event) -> None:
    """Every broker reports its volumes in turn, ``per_second`` reports a second."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {NODE_TOKEN}", "Content-Type": "application/json"}
    node, due = 1, time.monotonic()
    while not stop.is_set():
        try:
            connection.request("PUT", f"/nodes/{node}/volumes", body=REPORT, headers=headers)
            connection.getresponse().read()
        except (http.client.HTTPException, OSError):
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        node = node % brokers + 1
        due += 1 / per_second
        time.sleep(max(0.0, due - time.monotonic()))
    connection.close()


def p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def measure(service: ServiceProcess, calls: int, clients: int, seconds: float, brokers: int, reports_per_second: float) -> dict[str, float]:
    service.wait_for_rounds(1, timeout=300)
    figures = {
        "volumes_cpu_ms": cpu_ms_per_call(service, "GET", "/volumes", calls),
        "what_if_cpu_ms": cpu_ms_per_call(service, "POST", "/what-if", calls),
    }
    idle = throttle_factor_latencies(service, seconds)
    stop, given, refused = multiprocessing.Event(), multiprocessing.Value("i", 0), multiprocessing.Value("i", 0)
    hammering = [multiprocessing.Process(target=hammer, args=(service.port, stop, given, refused)) for _ in range(clients)]
    for process in hammering:
        process.start()
    time.sleep(0.5)
    given_before, refused_before = given.value, refused.value
    loaded = throttle_factor_latencies(service, seconds)
    given_during, refused_during = given.value - given_before, refused.value - refused_before
    stop_reports = multiprocessing.Event()
    reporter = multiprocessing.Process(target=report, args=(service.port, brokers, reports_per_second, stop_reports))
    reporter.start()
    time.sleep(1)
    cpu_before = service.resources().cpu_seconds
    reporting = throttle_factor_latencies(service, seconds)
    cpu_reporting = (service.resources().cpu_seconds - cpu_before) / seconds
    stop_reports.set()
    reporter.join(60)
    stop.set()
    for process in hammering:
        process.join(150)
    rounds = service.rounds()
    figures.update(
        idle_p50_ms=statistics.median(idle) * 1000,
        idle_p99_ms=p99(idle) * 1000,
        loaded_p50_ms=statistics.median(loaded) * 1000,
        loaded_p99_ms=p99(loaded) * 1000,
        loaded_max_ms=max(loaded) * 1000,
        reporting_p99_ms=p99(reporting) * 1000,
        reporting_cpu_per_s=cpu_reporting,
        given_per_s=given_during / seconds,
        refused_per_s=refused_during / seconds,
        rounds=rounds,
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--log-dirs", type=int, default=12)
    parser.add_argument("--calls", type=int, default=40, help="calls of each large answer whose CPU is measured")
    parser.add_argument("--clients", type=int, default=8, help="clients asking for /volumes and /what-if")
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each latency phase")
    parser.add_argument("--reports-per-second", type=float, default=200.0, help="node reports a second in the last phase")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    args = parser.parse_args()
    # One round before the measurement, none during it.
    settings = {
        "storage_check_interval": "PT180S", "storage_per_volume_limit_min_available_ratio": "0.05", "history_enabled": "false", "node_token": NODE_TOKEN,
    }
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.brokers} brokers x {args.log_dirs} log dirs", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-bounded-reads-") as scratch_name, ExitStack() as stack:
        scratch = Path(scratch_name)
        revisions = code_revisions(args.compare)
        trees = {name: stack.enter_context(source_tree(revision, scratch)) for name, revision in revisions}
        with SimulatedClusterProcess(args.brokers, args.log_dirs, total_bytes=1024 * 1024 * MiB) as cluster:
            for name, _ in revisions:
                service = ServiceProcess(name, trees[name], scratch, kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **settings)
                try:
                    results[name] = measure(service, args.calls, args.clients, args.seconds, args.brokers, args.reports_per_second)
                finally:
                    service.stop()
                print(f"{name}: {results[name]} (load average {os.getloadavg()[0]:.1f})", flush=True)
    print()
    print("| revision | CPU ms per /volumes | CPU ms per /what-if | /throttle-factor p99 idle ms | p99 with "
          f"{args.clients} clients ms (ratio) | p50 idle / loaded ms | large answers given / refused per s | "
          f"p99 with them and {args.reports_per_second:g} reports/s ms (ratio) | service CPU s/s then | rounds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in results.items():
        print(f"| {name} | {f['volumes_cpu_ms']:.2f} | {f['what_if_cpu_ms']:.2f} | {f['idle_p99_ms']:.2f} | "
              f"{f['loaded_p99_ms']:.2f} ({f['loaded_p99_ms'] / f['idle_p99_ms']:.2f}x) | {f['idle_p50_ms']:.2f} / {f['loaded_p50_ms']:.2f} | "
              f"{f['given_per_s']:.0f} / {f['refused_per_s']:.0f} | {f['reporting_p99_ms']:.2f} ({f['reporting_p99_ms'] / f['idle_p99_ms']:.2f}x) | "
              f"{f['reporting_cpu_per_s']:.2f} | {f['rounds']:.0f} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
