"""Crossing -> the last of a thousand long-polling shims holding the new factor, when the crossing
arrives as a node's own report (PUT /nodes/{id}/volumes) and not at an observation round.

The service observes a simulated cluster (devtools.simcluster, ``--brokers`` brokers of 12 log
dirs, every volume healthy) every ``--interval``, with a node token; ``--shims`` simulated shims
(devtools.polling_shims: the Java shim's long-poll of GET /quotas) poll it. Measured, in the same
run:

- the report path, ``--crossings`` times each way: this process sends broker 1's report with one
  data dir past the hard limit (then back with room), as the broker's shim does when it sees the
  crossing; from just before the PUT to the moment the last shim holds the PAUSE (OPEN) table.
  Whether a round finished meanwhile is counted (``/readyz`` rounds), so that a round cannot pass
  for the report;
- the round path, ``--round-crossings`` times each way: the simulated cluster's DescribeLogDirs
  answer crosses instead; from the change to the last shim (it waits for the next round: half an
  interval on average), and from the round that decided it (its computed_at) to the last shim.

Each figure is printed with its ratio to the round path's; the target for the report path is
at most 300 ms.

    .venv/bin/python bench/bench_fast_path.py [--shims 1000] [--brokers 10] [--interval 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench_shims import ShimFleet, computed_at, ratio, wait_until
from service_process import ROOT, ServiceProcess

from devtools.simcluster import MiB, SimulatedClusterProcess
from devtools.simcluster.state import default_log_dir

TARGET_SECONDS = 0.3
TOKEN = "bench-fast-path-node-token-0123"
VOLUME_BYTES = 1024 * MiB
HARD_LIMIT_BYTES = 100 * MiB
DIRS = 12
REPORTER = 1  # the broker whose report crosses
# Reports of one node further apart than the service's per-node minimum interval (1 s before the
# fast path, 0.25 s with a burst of 4 since): none is refused.
REPORT_SPACING_SECONDS = 1.2


@dataclass
class PathFigures:
    to_last_shim: dict[str, list[float]] = field(default_factory=lambda: {"PAUSE": [], "OPEN": []})
    from_round: dict[str, list[float]] = field(default_factory=lambda: {"PAUSE": [], "OPEN": []})
    to_first_shim: list[float] = field(default_factory=list)
    # per report crossing, from the PUT to the last shim: the service's CPU seconds, this process's (the shims')
    cpu: list[tuple[float, float]] = field(default_factory=list)
    put_seconds: list[float] = field(default_factory=list)
    rounds_between: int = 0
    missed: list[str] = field(default_factory=list)

    def all(self) -> list[float]:
        return self.to_last_shim["PAUSE"] + self.to_last_shim["OPEN"]


def report_body(crossing: bool) -> dict:
    """Broker REPORTER's report of its data dirs (the simulated cluster's paths): the first past
    the hard limit when ``crossing``, every one healthy otherwise."""
    return {
        "roles": ["broker"],
        "volumes": [
            {
                "log_dir": default_log_dir(REPORTER, index),
                "total_bytes": VOLUME_BYTES,
                "usable_bytes": HARD_LIMIT_BYTES // 2 if crossing and index == 0 else VOLUME_BYTES - 10 * MiB,
                "holds": ["data"],
            }
            for index in range(DIRS)
        ],
    }


def first_arrival(fleet: ShimFleet, state: str, after: float) -> float:
    """When the first shim got a table in ``state`` since ``after`` (time.time())."""
    return min(next(t.received_at for t in list(s.tables) if t.state == state and t.received_at >= after) for s in fleet.shims.stats)


def report_path(service: ServiceProcess, fleet: ShimFleet, args: argparse.Namespace, figures: PathFigures) -> None:
    reporter = httpx.Client(base_url=service.base_url, timeout=10, headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        for _ in range(args.crossings):
            for state, crossing in (("PAUSE", True), ("OPEN", False)):
                time.sleep(REPORT_SPACING_SECONDS)
                rounds = service.rounds()
                service_cpu, shims_cpu = service.resources().cpu_seconds, time.process_time()
                sent = time.time()
                answer = reporter.put(f"/nodes/{REPORTER}/volumes", json=report_body(crossing))
                figures.put_seconds.append(time.time() - sent)
                if answer.status_code != 204:
                    raise RuntimeError(f"the report was refused: {answer.status_code} {answer.text[:300]}")
                try:
                    wait_until(lambda state=state: fleet.holding(state) == args.shims, args.timeout, f"every shim holding the {state} table")
                except RuntimeError as exc:
                    figures.missed.append(f"{state}: {exc}")
                    return
                figures.cpu.append((service.resources().cpu_seconds - service_cpu, time.process_time() - shims_cpu))
                figures.to_last_shim[state].append(fleet.last_arrival(state, after=sent) - sent)
                figures.to_first_shim.append(first_arrival(fleet, state, sent) - sent)
                figures.rounds_between += service.rounds() != rounds
    finally:
        reporter.close()


def round_path(service: ServiceProcess, cluster: SimulatedClusterProcess, fleet: ShimFleet, args: argparse.Namespace, figures: PathFigures) -> None:
    for _ in range(args.round_crossings):
        for state, usable in (("PAUSE", HARD_LIMIT_BYTES // 2), ("OPEN", VOLUME_BYTES)):
            changed = time.time()
            cluster.call("set_usable_bytes", REPORTER, usable, 0)
            decided = computed_at(service, state, args.interval + 30)
            wait_until(lambda state=state: fleet.holding(state) == args.shims, args.timeout, f"every shim holding the {state} table")
            last = fleet.last_arrival(state, after=changed)
            figures.to_last_shim[state].append(last - changed)
            figures.to_first_shim.append(first_arrival(fleet, state, decided) - decided)
            figures.from_round[state].append(last - decided)


def ms(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values) * 1000:.0f} ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shims", type=int, default=1000)
    parser.add_argument("--brokers", type=int, default=10, help="simulated brokers (12 log dirs each)")
    parser.add_argument("--interval", type=float, default=10.0, help="check interval in seconds (the round path waits for it)")
    parser.add_argument("--crossings", type=int, default=5, help="report crossings each way")
    parser.add_argument("--round-crossings", type=int, default=2, help="round crossings each way")
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which the shims start")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the last shim")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.shims} shims, {args.brokers} brokers x {DIRS} "
          f"log dirs, interval {args.interval:g} s", flush=True)
    reports, rounds = PathFigures(), PathFigures()
    with tempfile.TemporaryDirectory(prefix="bench-fast-path-") as scratch_name:
        scratch = Path(scratch_name)
        with SimulatedClusterProcess(args.brokers, DIRS, total_bytes=VOLUME_BYTES) as cluster:
            service = ServiceProcess(
                "current",
                ROOT,
                scratch,
                kafka_admin_bootstrap_servers=cluster.bootstrap_servers,
                storage_check_interval=f"PT{args.interval:g}S",
                storage_per_volume_limit_min_available_bytes=str(HARD_LIMIT_BYTES),
                node_token=TOKEN,
            )
            try:
                service.wait_for_rounds(1, timeout=args.interval + 60)
                fleet = ShimFleet(service.port, args.shims, args.ramp, "gzip")
                try:
                    wait_until(lambda: fleet.holding("OPEN") == args.shims, args.ramp + 120, f"{args.shims} shims holding a table")
                    time.sleep(3)  # the first long-polls are under way
                    report_path(service, fleet, args, reports)
                    if reports.missed:  # the service still holds the crossing's PAUSE: make it agree again
                        httpx.put(f"{service.base_url}/nodes/{REPORTER}/volumes", json=report_body(False), headers={"Authorization": f"Bearer {TOKEN}"})
                        time.sleep(REPORT_SPACING_SECONDS)
                    round_path(service, cluster, fleet, args, rounds)
                    failures = sum(s.failures for s in fleet.shims.stats)
                finally:
                    fleet.stop()
            finally:
                service.stop()

    print()
    print("| path | crossing -> last shim, PAUSE, ms (median, min-max) | OPEN | median of both vs the round path | round -> last shim, ms |")
    print("|---|---:|---:|---:|---:|")
    report_all, round_all = reports.all(), rounds.all()
    against = statistics.median(round_all) if round_all else 0.0
    publishing = statistics.median(rounds.from_round["PAUSE"] + rounds.from_round["OPEN"]) if round_all else 0.0
    if report_all:
        print(f"| node report | {ms(reports.to_last_shim['PAUSE'])} | {ms(reports.to_last_shim['OPEN'])} | "
              f"{statistics.median(report_all) * 1000:.0f}{ratio(statistics.median(report_all), against)} | "
              f"- (vs the round's publication: {ratio(statistics.median(report_all), publishing).strip()}) |")
    print(f"| round (interval {args.interval:g} s) | {ms(rounds.to_last_shim['PAUSE'])} | {ms(rounds.to_last_shim['OPEN'])} | "
          f"{against * 1000:.0f} | {ms(rounds.from_round['PAUSE'] + rounds.from_round['OPEN'])} |")
    print(f"\nthe first shim holding the new table: {ms(reports.to_first_shim)} ms after the report, {ms(rounds.to_first_shim)} ms after the round's computed_at")
    if reports.cpu:
        print(f"CPU from the report to the last shim, median: the service {ms([c for c, _ in reports.cpu])} ms,"
              f" the simulated shims (this process, polling included) {ms([c for _, c in reports.cpu])} ms")
    print(f"report PUTs answered in {ms(reports.put_seconds)} ms; rounds that finished during a report crossing: {reports.rounds_between}"
          f" of {len(report_all)}; failed shim polls {failures}")
    if reports.missed:
        print(f"report path: no change reached every shim within {args.timeout:g} s ({'; '.join(reports.missed)})")
    worst = max(report_all) if report_all else float("inf")
    verdict = "met" if report_all and not reports.missed and statistics.median(report_all) <= TARGET_SECONDS else "NOT met"
    print(f"target: crossing -> last shim <= {TARGET_SECONDS * 1000:.0f} ms: {verdict} (median {ms(report_all)} ms, worst {worst * 1000:.0f} ms)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
