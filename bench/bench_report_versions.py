"""Warm runs of the report by two or more versions of the code, in turns, against Spark's floor
measured in the same turns: which version's warm run costs less, on this machine's load now.

Each version is a source tree (``git archive REV | tar -x -C DIR``, or the working tree) and
reads its own copy of a full cache (``--cache``, copied per tree with hard links: the chunk
files are shared and only read; each version keeps its own schemas file). Every run is a fresh
Python and JVM (``PYTHONPATH`` the tree), as a scheduled run is. Each tree runs once before the
turns (its schemas worked out for its code); then each turn runs the floor and every tree once.
Prints each run's seconds, jobs and steps, the medians, each median against the floor's, and
each tree's against the first's.

    git archive 06e25cf | tar -x -C /tmp/before
    .venv/bin/python bench/bench_report_versions.py --history /var/tmp/h100 --cache /var/tmp/c100 /tmp/before .
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_report_cost import _FLOOR  # Spark started, one job, stopped: the master is its argument

_WARM = """
import json, sys, time
started = time.perf_counter()
from spark.job import run_report
from spark.session import report_session
spark = report_session("local[2]")
sc = spark.sparkContext
sc.setJobGroup("report", "the report")
report = run_report(spark, sys.argv[1], sys.argv[2], cache=sys.argv[3])
jobs = len(sc.statusTracker().getJobIdsForGroup("report"))
spark.stop()
print(json.dumps({"seconds": time.perf_counter() - started, "jobs": jobs,
                  "steps": {k: round(v, 2) for k, v in report.seconds.items()}}))
"""


def _run(code: str, tree: Path, *arguments: object) -> dict:
    finished = subprocess.run(
        [sys.executable, "-c", code, *map(str, arguments)], capture_output=True, text=True, cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)}, check=True,
    )
    return json.loads(finished.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", required=True)
    parser.add_argument("--cache", required=True, help="a full cache of the history (a cold run's --cache), copied per tree")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--made-again", action="store_true", help="remove the cache's kept report before each run: every table computed from the cached shares")
    parser.add_argument("trees", nargs="+", type=Path, help="source trees, the first the baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-report-versions-", dir=Path(args.cache).parent) as work:
        runs = []
        for i, tree in enumerate(args.trees):
            cache = Path(work) / f"cache-{i}"
            shutil.copytree(args.cache, cache, copy_function=os.link)
            (cache / "lock").unlink(missing_ok=True)
            runs.append((tree.resolve(), cache, Path(work) / f"report-{i}"))
        for tree, cache, output in runs:
            _run(_WARM, tree, args.history, output, cache)
        seconds: dict[str, list[float]] = {"floor": [], **{str(tree): [] for tree, _, _ in runs}}
        for turn in range(args.turns):
            seconds["floor"].append(_run(_FLOOR, runs[-1][0], "local[2]")["seconds"])
            print(f"turn {turn + 1}: floor {seconds['floor'][-1]:.1f} s", flush=True)
            for tree, cache, output in runs:
                if args.made_again:
                    shutil.rmtree(cache / "reports", ignore_errors=True)
                warm = _run(_WARM, tree, args.history, output, cache)
                seconds[str(tree)].append(warm["seconds"])
                print(f"  {tree}: {warm['seconds']:.1f} s, {warm['jobs']} jobs, {warm['steps']}", flush=True)
        median = {name: statistics.median(values) for name, values in seconds.items()}
        base = median[str(runs[0][0])]
        print(f"median floor {median['floor']:.2f} s")
        for tree, _, _ in runs:
            m = median[str(tree)]
            print(f"median {tree}: {m:.2f} s, {m / median['floor']:.2f}x the floor, {m / base:.3f}x the first tree's")


if __name__ == "__main__":
    main()
