"""What a Prometheus scrape of GET /metrics costs the service at N brokers x 12 log dirs, against a
baseline revision measured in the same run.

A simulated cluster (devtools.simcluster, a process of its own) and, one after the other, the
service of each revision observing it every ``--interval``. Between two rounds the bench scrapes
as Prometheus does (``Accept-Encoding: gzip``) and reads the service's CPU time from /proc around
the scrapes, once the service is idle after a round (its state snapshot written); a measurement
a round overlapped is dropped. The process's first scrape (``start``: every line formatted for
the first time) is measured once, after its first round; then four kinds of scrape, each
``--cycles`` times (one cycle per round):

- ``changed``: the first scrape after a round in which every volume's usable bytes changed (the
  bench sets new figures on every broker before the round);
- ``first``: the first scrape after a round that brought the same figures (new observations);
- ``steady``: ``--scrapes`` further scrapes before the next round (nothing new), per scrape;
- ``plain``: as ``steady``, without gzip (a scraper that does not ask for it).

    .venv/bin/python bench/bench_scrape.py --compare fb3ba0d
    .venv/bin/python bench/bench_scrape.py --brokers 1000 --cycles 5 --compare fb3ba0d
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from devtools.simcluster import MiB, SimulatedClusterProcess
from service_process import ServiceProcess, source_tree
from service_process import revisions as code_revisions

GZIP = {"Accept-Encoding": "gzip"}
PLAIN = {"Accept-Encoding": "identity"}
KINDS = ("start", "changed", "first", "steady", "plain")


def cpu_seconds(pid: int) -> float:
    """The CPU time of the process's threads, in nanoseconds from the scheduler (/proc/PID/task/*/
    schedstat), rather than /proc/PID/stat's 10 ms ticks: one scrape is a few ticks at most."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # a thread that ended meanwhile
    return total / 1e9


def wait_until_idle(pid: int, window: float = 0.25, idle_cpu: float = 0.002, longest: float = 5.0) -> None:
    """Until the process spends less than ``idle_cpu`` CPU seconds in a ``window`` (at most
    ``longest`` seconds): a round's end (the decider's state snapshot, written on a thread of its
    own) is still running for a while after the round is counted."""
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < idle_cpu:
            return


def scrape_cpu(service: ServiceProcess, times: int, headers: dict[str, str]) -> tuple[float, int]:
    """The service's CPU seconds per scrape over ``times`` scrapes, and the body's bytes."""
    before = cpu_seconds(service.pid)
    size = 0
    for _ in range(times):
        answer = service.client.get("/metrics", headers=headers)
        assert answer.status_code == 200
        size = len(answer.content)  # as sent (httpx decodes; content is the decoded body)
        size = int(answer.headers.get("content-length", size))
    return (cpu_seconds(service.pid) - before) / times, size


def measure(service: ServiceProcess, cluster: SimulatedClusterProcess, brokers: int, cycles: int, scrapes: int, interval: float) -> dict[str, list[float]]:
    figures: dict[str, list[float]] = {kind: [] for kind in KINDS}
    sizes: dict[str, int] = {}
    service.wait_for_rounds(1, timeout=interval + 120)
    wait_until_idle(service.pid)
    rounds = service.rounds()
    start, _ = scrape_cpu(service, 1, GZIP)
    if service.rounds() == rounds:
        figures["start"].append(start)
    usable = 500 * 1024 * MiB
    for cycle in range(cycles * 2):
        change = cycle % 2 == 0
        if change:
            usable -= MiB
            for broker in range(1, brokers + 1):
                cluster.call("set_usable_bytes", broker, usable + broker)
        rounds = service.rounds()
        service.wait_for_rounds(rounds + 1, timeout=interval + 120, poll_seconds=0.2)
        wait_until_idle(service.pid)  # what follows a round (its state snapshot) is not the scrape's
        rounds = service.rounds()
        first, sizes["gzip"] = scrape_cpu(service, 1, GZIP)
        steady, _ = scrape_cpu(service, scrapes, GZIP)
        plain, sizes["plain"] = scrape_cpu(service, scrapes, PLAIN)
        if service.rounds() != rounds:
            print(f"  {service.name}: a round overlapped cycle {cycle}, dropped", flush=True)
            continue
        figures["changed" if change else "first"].append(first)
        figures["steady"].append(steady)
        figures["plain"].append(plain)
    print(f"  {service.name}: body {sizes.get('plain', 0) / 1e6:.2f} MB, gzipped {sizes.get('gzip', 0) / 1e3:.1f} kB", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--log-dirs", type=int, default=12)
    parser.add_argument("--interval", type=float, default=15.0, help="check interval in seconds")
    parser.add_argument("--cycles", type=int, default=4, help="rounds with changed figures (and as many without)")
    parser.add_argument("--scrapes", type=int, default=5, help="steady scrapes per cycle")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    args = parser.parse_args()
    settings = {
        "storage_check_interval": f"PT{args.interval:g}S",
        "storage_per_volume_limit_min_available_ratio": "0.05",
        "history_enabled": "false",
    }
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.brokers} brokers x {args.log_dirs} "
          f"log dirs, interval {args.interval:g} s, {args.cycles} cycles", flush=True)
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-scrape-") as scratch_name, ExitStack() as stack:
        scratch = Path(scratch_name)
        revisions = code_revisions(args.compare)
        trees = {name: stack.enter_context(source_tree(revision, scratch)) for name, revision in revisions}
        with SimulatedClusterProcess(args.brokers, args.log_dirs, total_bytes=1024 * 1024 * MiB) as cluster:
            for name, _ in revisions:
                service = ServiceProcess(name, trees[name], scratch, kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **settings)
                try:
                    results[name] = measure(service, cluster, args.brokers, args.cycles, args.scrapes, args.interval)
                finally:
                    service.stop()
                print(f"  {name}: {({k: [round(v, 4) for v in vs] for k, vs in results[name].items()})} "
                      f"(load average {os.getloadavg()[0]:.1f})", flush=True)

    baseline = results[revisions[-1][0]] if args.compare else None
    print()
    print("| scrape (CPU s, median) | " + " | ".join(name for name, _ in revisions) + (" | ratio |" if baseline else " |"))
    print("|---|" + "---:|" * (len(revisions) + (1 if baseline else 0)))
    for kind in KINDS:
        medians = [statistics.median(results[name][kind]) if results[name][kind] else float("nan") for name, _ in revisions]
        ratio = f" | {medians[0] / medians[-1]:.3f}x" if baseline and medians[-1] else ""
        print(f"| {kind} | " + " | ".join(f"{m:.4f}" for m in medians) + ratio + " |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
