"""A round's work outside Kafka at N brokers x 12 log dirs, in process, part by part.

A service is built in process (``create_app(..., observe=False)``: check interval PT10S,
``min_available_ratio`` 0.05, as bench_rounds.py runs it) and given rounds of N x 12
observations (every volume free, a new observation time each round). Per round, CPU time
(``time.process_time``) of: building the observations as the volume source does (``build``),
``ObservationLoop.apply_round`` (the decision, its metrics, its publication: ``apply``),
``Decision.frozen`` and ``Compactor.rows`` (the history writer's work: ``history``), and
``decider.snapshot`` (the saved state: ``snapshot``); the minimum over the measured rounds (the
machine is shared: the minimum is the work, the rest is waiting). ``--compare REV`` measures a
git revision too, checked out beside with ``git worktree``, each in a process of its own,
taking turns, and prints ratios to it.

    .venv/bin/python bench/bench_round_parts.py --compare ac22de2
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

PARTS = ("build", "apply", "history", "snapshot")


def measure(brokers: int, dirs: int, rounds: int) -> dict[str, float]:
    """Run inside the source tree measured (its ``app`` first on the path)."""
    import logging
    import time

    from app.history.compact import Compaction, Compactor
    from app.observation import model
    from app.server.app import create_app
    from app.settings import load_settings

    logging.disable(logging.WARNING)
    build = getattr(model, "admin_observation", model.VolumeObservation)
    total = 1024**4
    settings = load_settings(
        environ={}, kafka_admin_bootstrap_servers="127.0.0.1:9092", data_dir=tempfile.mkdtemp(prefix="bench-parts-"),
        storage_check_interval="PT10S", storage_per_volume_limit_min_available_ratio="0.05",
    )
    loop = create_app(settings, observe=False).state.service.loop
    log_dirs = [f"/var/lib/kafka/data-{i}" for i in range(dirs)]
    answer = [(0, d, total, total, 0) for d in log_dirs]  # a broker's answer: (error code, dir, total, usable, topics)
    active = tuple(range(1, brokers + 1))
    compactor = Compactor(Compaction())
    start = time.time()
    costs: dict[str, list[float]] = {part: [] for part in PARTS}
    for index in range(3 + rounds):
        at = start + 10.0 * index
        t0 = time.process_time()
        observations: list = []
        for broker in active:
            observations += [build(broker, d, t, u, at + 0.5, None) for _, d, t, u, _ in answer]
        round_ = model.ObservationRound(at, at + 0.5, active, tuple(observations))
        t1 = time.process_time()
        decision = loop.apply_round(round_)
        t2 = time.process_time()
        compactor.rows(round_, decision.frozen(), 10.0)
        t3 = time.process_time()
        loop.decider.snapshot(round_.finished_at)
        t4 = time.process_time()
        if index >= 3:  # the first rounds write every history row (a keyframe)
            for part, cost in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                costs[part].append(cost * 1000)
    return {part: min(values) for part, values in costs.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--log-dirs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=15, help="rounds measured per turn")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--compare", metavar="REV", help="also measure this git revision, as the baseline")
    parser.add_argument("--measure-in", metavar="TREE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_in:
        sys.path.insert(0, args.measure_in)
        print(json.dumps(measure(args.brokers, args.log_dirs, args.rounds)))
        return 0
    from service_process import revisions as code_revisions  # after: it imports devtools
    from service_process import source_tree

    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.brokers} x {args.log_dirs}, "
          f"{args.rounds} rounds a turn, {args.turns} turns; ms per round, minimum over a turn's rounds", flush=True)
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-parts-") as scratch, ExitStack() as stack:
        revisions = code_revisions(args.compare)
        trees = {name: stack.enter_context(source_tree(revision, Path(scratch))) for name, revision in revisions}
        for turn in range(args.turns):
            for name, _ in revisions:
                out = subprocess.run(
                    [sys.executable, __file__, "--measure-in", str(trees[name]), "--brokers", str(args.brokers),
                     "--log-dirs", str(args.log_dirs), "--rounds", str(args.rounds)],
                    cwd=trees[name], capture_output=True, text=True, check=True,
                ).stdout.strip().splitlines()[-1]
                results.setdefault(name, []).append(json.loads(out))
                print(f"turn {turn + 1}, {name}: " + ", ".join(f"{p} {v:.1f}" for p, v in results[name][-1].items()), flush=True)
    medians = {name: {p: statistics.median(t[p] for t in turns) for p in PARTS} for name, turns in results.items()}
    baseline = medians.get(revisions[-1][0]) if args.compare else None
    print()
    print("| revision | " + " | ".join(PARTS) + " | total |")
    print("|---|" + "---:|" * (len(PARTS) + 1))
    for name, figures in medians.items():
        total = sum(figures.values())
        cells = [f"{figures[p]:.1f}" + (f" ({figures[p] / baseline[p]:.2f}x)" if baseline and name != revisions[-1][0] else "") for p in PARTS]
        base_total = sum(baseline.values()) if baseline else 0
        cells.append(f"{total:.1f}" + (f" ({total / base_total:.2f}x)" if baseline and name != revisions[-1][0] else ""))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
