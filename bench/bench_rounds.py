"""Observation rounds at scale: the service against simulated clusters of N brokers x 12 log dirs.

For each N, a simulated cluster (devtools.simcluster, a process of its own) and the service
observing it every ``--interval``; after the first (cold) round, ``--rounds`` rounds are
measured: wall time per round (the service's kafka_throttle_round_duration_seconds), the
service's CPU seconds per round (/proc, everything the process did between the rounds too),
resident memory, and its established TCP connections. ``--compare REV`` runs a git revision
the same way, in the same run, one after the other on the same simulated cluster, and prints
each figure as a ratio to it. ``--turns N`` measures each revision N times, taking turns
(this checkout, the baseline, this checkout, ...), and reports the medians: on a shared
machine the service measured second in a pair was seen to cost some 0.05 CPU-s a round more
than the same code measured first, so one pair alone can mislead.

    .venv/bin/python bench/bench_rounds.py --compare 4325ed2
    .venv/bin/python bench/bench_rounds.py --brokers 1000 --rounds 6
    .venv/bin/python bench/bench_rounds.py --brokers 1000 --rounds 4 --turns 3 --compare ac22de2
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from devtools.simcluster import MiB, SimulatedClusterProcess
from service_process import ServiceProcess, source_tree, revisions as code_revisions


@dataclass(frozen=True)
class RoundFigures:
    first_round_seconds: float
    wall_seconds: float  # mean over the measured rounds
    cpu_seconds: float  # per round
    rss_mib: float
    peak_rss_mib: float
    connections: int  # the service's established TCP connections
    cluster_connections: int  # the connections the simulated brokers hold
    complete: bool


def measure(service: ServiceProcess, cluster: SimulatedClusterProcess, rounds: int, interval: float) -> RoundFigures:
    service.wait_for_rounds(1, timeout=interval + 120)
    first_sum, first_count = service.round_durations()
    start = service.rounds()
    service.wait_for_rounds(start + 1, timeout=interval + 120)  # the measurement starts at a round's end
    duration_sum, count = service.round_durations()
    cpu = service.resources().cpu_seconds
    service.wait_for_rounds(start + 1 + rounds, timeout=(interval + 30) * rounds + 60)
    held = service.resources()
    cpu = held.cpu_seconds - cpu
    end_sum, end_count = service.round_durations()
    decision = service.client.get("/throttle-factor").json()
    return RoundFigures(
        first_round_seconds=first_sum / max(first_count, 1),
        wall_seconds=(end_sum - duration_sum) / max(end_count - count, 1),
        cpu_seconds=cpu / max(end_count - count, 1),
        rss_mib=held.rss_kib / 1024,
        peak_rss_mib=held.peak_rss_kib / 1024,
        connections=service.connections(),
        cluster_connections=cluster.call("connections"),
        complete=bool(decision.get("round", {}).get("complete", decision.get("complete"))),
    )


def median_figures(measured: list[RoundFigures]) -> RoundFigures:
    """Each figure's median over the turns (complete: every turn's round was)."""
    figures = {name: statistics.median_low(getattr(f, name) for f in measured) for name in RoundFigures.__dataclass_fields__ if name != "complete"}
    figures["cpu_seconds"] = statistics.median(f.cpu_seconds for f in measured)
    return RoundFigures(**figures, complete=all(f.complete for f in measured))


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", default="10,100,1000", help="comma-separated cluster sizes")
    parser.add_argument("--log-dirs", type=int, default=12, help="log dirs per broker")
    parser.add_argument("--interval", type=float, default=10.0, help="check interval in seconds")
    parser.add_argument("--rounds", type=int, default=4, help="rounds measured per size, after the first")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    parser.add_argument("--turns", type=int, default=1, help="measure each revision this many times, taking turns; medians")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE", help="a further setting, by field name (e.g. history_enabled=false)")
    args = parser.parse_args()
    sizes = [int(n) for n in args.brokers.split(",")]
    settings = {
        "storage_check_interval": f"PT{args.interval:g}S",
        "storage_per_volume_limit_min_available_ratio": "0.05",
        **dict(setting.split("=", 1) for setting in args.set),
    }
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; interval {args.interval:g} s, "
          f"{args.log_dirs} log dirs per broker, {args.rounds} rounds measured per size", flush=True)
    results: dict[tuple[str, int], RoundFigures] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rounds-") as scratch_name:
        scratch = Path(scratch_name)
        revisions = code_revisions(args.compare)
        with ExitStack() as stack:
            trees = {name: stack.enter_context(source_tree(revision, scratch)) for name, revision in revisions}
            for brokers in sizes:
                with SimulatedClusterProcess(brokers, args.log_dirs, total_bytes=1024 * 1024 * MiB) as cluster:
                    turns: dict[str, list[RoundFigures]] = {name: [] for name, _ in revisions}
                    for turn in range(args.turns):
                        for name, _ in revisions:
                            service = ServiceProcess(name, trees[name], scratch, kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **settings)
                            try:
                                figures = measure(service, cluster, args.rounds, args.interval)
                            finally:
                                service.stop()
                            turns[name].append(figures)
                            print(f"{brokers:5d} brokers, {name}, turn {turn + 1}: {figures} (load average {os.getloadavg()[0]:.1f})", flush=True)
                            time.sleep(1)
                    for name, measured in turns.items():
                        results[(name, brokers)] = median_figures(measured)
                        if len(measured) > 1:
                            print(f"{brokers:5d} brokers, {name}: CPU s/round per turn " + " / ".join(f"{f.cpu_seconds:.3f}" for f in measured), flush=True)

    print()
    print("| brokers x log dirs | revision | first round s | wall s/round | CPU s/round | RSS MiB (peak) | connections | complete |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for brokers in sizes:
        baseline = results.get((revisions[-1][0], brokers)) if args.compare else None
        for name, _ in revisions:
            f = results[(name, brokers)]
            against = "" if baseline is None or name == revisions[-1][0] else (
                f" ({ratio(f.wall_seconds, baseline.wall_seconds)})", f" ({ratio(f.cpu_seconds, baseline.cpu_seconds)})",
                f" ({ratio(f.rss_mib, baseline.rss_mib)})")
            wall, cpu, rss = against or ("", "", "")
            print(f"| {brokers} x {args.log_dirs} | {name} | {f.first_round_seconds:.2f} | {f.wall_seconds:.2f}{wall} | "
                  f"{f.cpu_seconds:.3f}{cpu} | {f.rss_mib:.0f}{rss} ({f.peak_rss_mib:.0f}) | {f.connections} | {f.complete} |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
