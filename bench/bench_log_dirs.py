"""The Kafka side of an observation round alone (DescribeCluster, then DescribeLogDirs to every
broker, and the observations built from the answers: ``KafkaVolumeSource.observe()``), its CPU
time against a baseline revision's, in the same run, on the same simulated cluster.

A simulated cluster of N brokers x 12 log dirs (devtools.simcluster, a process of its own); each
revision's source runs in a process of its own (``python -c`` in its source tree), ``--rounds``
rounds after two warm ones, with the service's settings of the garbage collector, and reports the CPU time of its whole process (its IO thread
included) per round. The revisions take turns ``--turns`` times (ABAB...), so a change of load
on a shared machine falls on both; the figures are the medians over the turns.

    .venv/bin/python bench/bench_log_dirs.py --compare fb3ba0d
    .venv/bin/python bench/bench_log_dirs.py --brokers 1000 --turns 5 --rounds 5 --compare fb3ba0d
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from devtools.simcluster import MiB, SimulatedClusterProcess
from service_process import revisions as code_revisions
from service_process import source_tree

ROUNDS = """
import json, sys, time
from app.kafka.volume_source import KafkaVolumeSource
from app.server.runtime.garbage_collector import tune_garbage_collector
source = KafkaVolumeSource(sys.argv[1], 30.0, interval_seconds=10)
tune_garbage_collector()  # as the service runs
for _ in range(2):
    source.observe()
rounds = int(sys.argv[2])
cpu, wall, observed = [], [], set()
for _ in range(rounds):
    start, started = time.process_time(), time.perf_counter()
    answer = source.observe()
    cpu.append(time.process_time() - start)
    wall.append(time.perf_counter() - started)
    observed.add((len(answer.observations), len(answer.missing_brokers), answer.error))
source.close()
print(json.dumps({"cpu": cpu, "wall": wall, "observed": sorted(map(list, observed))}))
"""


def run_rounds(tree: Path, bootstrap: str, rounds: int) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", ROUNDS, bootstrap, str(rounds)], cwd=tree, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(tree)},
    )
    if result.returncode != 0:
        raise RuntimeError(f"rounds in {tree} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--log-dirs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5, help="rounds measured per turn")
    parser.add_argument("--turns", type=int, default=4, help="turns per revision")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.brokers} brokers x "
          f"{args.log_dirs} log dirs, {args.turns} turns of {args.rounds} rounds", flush=True)
    per_turn: dict[str, list[float]] = {}
    walls: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-log-dirs-") as scratch_name, ExitStack() as stack:
        revisions = code_revisions(args.compare)
        trees = {name: stack.enter_context(source_tree(revision, Path(scratch_name))) for name, revision in revisions}
        with SimulatedClusterProcess(args.brokers, args.log_dirs, total_bytes=1024 * 1024 * MiB) as cluster:
            for turn in range(args.turns):
                for name, _ in revisions:
                    figures = run_rounds(trees[name], cluster.bootstrap_servers, args.rounds)
                    per_turn.setdefault(name, []).append(statistics.median(figures["cpu"]))
                    walls.setdefault(name, []).append(statistics.median(figures["wall"]))
                    print(f"  turn {turn + 1}, {name}: CPU s per round {[round(c, 3) for c in figures['cpu']]}, "
                          f"observed (volumes, missing, error) {figures['observed']} (load average {os.getloadavg()[0]:.1f})", flush=True)
    baseline = revisions[-1][0]
    print()
    print("| revision | CPU s per round (median of turns) | wall s per round | x baseline |")
    print("|---|---:|---:|---:|")
    for name, _ in revisions:
        cpu = statistics.median(per_turn[name])
        ratio = cpu / statistics.median(per_turn[baseline])
        print(f"| {name} | {cpu:.3f} | {statistics.median(walls[name]):.2f} | {ratio:.2f}x |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
