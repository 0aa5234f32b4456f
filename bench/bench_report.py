"""Benchmark of ``throttle-report``: runtime at 1M and 10M history rows on local[2].

Generates synthetic histories in the service's layout (date=YYYY-MM-DD/history-HH.jsonl, the
writer's field order), 100 volumes per round (25 brokers x 4 log dirs) every 30 s, each
volume's available bytes swinging so that it crosses the soft and hard limits now and then;
then runs the real console script on each and reads its own timing.

    .venv/bin/python bench/bench_report.py                 # 1M and 10M rows
    .venv/bin/python bench/bench_report.py --rows 1000000  # one size

The machine may be shared: the 1-minute load average is printed before and after every run,
and ``--quiet-load 1.5`` waits (up to ``--wait`` seconds, polling every 30 s) for it to drop
below 1.5 before each run.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from devtools.commands import run_command

BROKERS, LOG_DIRS, INTERVAL = 25, 4, 30.0
TOTAL = 100 * 1024**3
HARD, SOFT = 0.10, 0.20  # ratio limits
START = datetime(2026, 1, 1, tzinfo=UTC)


def generate(directory: Path, rows: int) -> float:
    """Write ``rows`` history rows; returns the seconds it took."""
    started = time.perf_counter()
    volumes = [(b, f"/var/lib/kafka/data-{d}", (b * LOG_DIRS + d) * 0.618) for b in range(1, BROKERS + 1) for d in range(LOG_DIRS)]
    rounds = rows // len(volumes)
    handle, current = None, None
    for i in range(rounds):
        moment = START + timedelta(seconds=INTERVAL * i)
        path = directory / f"date={moment:%Y-%m-%d}" / f"history-{moment:%H}.jsonl"
        if path != current:
            if handle:
                handle.close()
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, current = path.open("w"), path
        stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        ratios = [0.5 + 0.45 * math.sin(i / 400.0 + phase) for _, _, phase in volumes]
        worst = min(ratios)
        state = "PAUSE" if worst <= HARD else "THROTTLE" if worst <= SOFT else "OPEN"
        cluster = 0.0 if worst <= HARD else min(1.0, (worst - HARD) / (SOFT - HARD))
        lines = []
        for (broker, log_dir, _), ratio in zip(volumes, ratios):
            status = "breaching" if ratio <= HARD else "ramping" if ratio <= SOFT else "ok"
            factor = 0.0 if ratio <= HARD else min(1.0, (ratio - HARD) / (SOFT - HARD))
            lines.append(
                f'{{"time":"{stamp}","broker_id":{broker},"log_dir":"{log_dir}","total_bytes":{TOTAL},'
                f'"usable_bytes":{int(TOTAL * ratio)},"available_ratio":{ratio:.6f},"log_dir_error":null,'
                f'"limit_kind":"min-available-ratio","hard_limit":{HARD},"soft_limit":{SOFT},"volume_status":"{status}",'
                f'"volume_factor":{factor:.4f},"cluster_factor":{cluster:.4f},"state":"{state}","source":"observed",'
                f'"round_complete":true,"check_interval_seconds":{INTERVAL}}}\n'
            )
        handle.write("".join(lines))
    if handle:
        handle.close()
    return time.perf_counter() - started


def run_report(history: Path, output: Path, master: str) -> tuple[float, float, str]:
    """(wall seconds of the command, seconds of the job after Spark started, its output)."""
    script = Path(sys.executable).parent / "throttle-report"
    started = time.perf_counter()
    finished = run_command([script, "--input", history, "--output", output, "--master", master], 4 * 3600, check=True)
    wall = time.perf_counter() - started
    job = float(re.search(r"done in ([0-9.]+) s", finished.stdout).group(1))
    return wall, job, finished.stdout


def wait_for_load(limit: float | None, wait: float) -> None:
    if limit is None:
        return
    deadline = time.monotonic() + wait
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        print(f"    load {os.getloadavg()[0]:.2f} >= {limit}: waiting", flush=True)
        time.sleep(30)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, action="append", help="history sizes (default: 1000000 and 10000000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the generated histories")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the report per size (the best is compared)")
    parser.add_argument("--quiet-load", type=float, metavar="LOAD", help="before each run, wait for the 1-minute load average to drop below this")
    parser.add_argument("--wait", type=float, default=900.0, metavar="SECONDS", help="longest wait for --quiet-load (default 900)")
    args = parser.parse_args()
    sizes = args.rows or [1_000_000, 10_000_000]
    work = Path(tempfile.mkdtemp(prefix="throttle-report-bench-"))
    results = {}
    try:
        for rows in sizes:
            history = work / f"history-{rows}"
            generated = generate(history, rows)
            size = sum(f.stat().st_size for f in history.rglob("*.jsonl"))
            print(f"{rows:,} rows: generated in {generated:.1f} s, {size / 1024**3:.2f} GiB", flush=True)
            runs = []
            for run in range(1, args.repeat + 1):
                wait_for_load(args.quiet_load, args.wait)
                before = load()
                wall, job, stdout = run_report(history, work / f"report-{rows}", args.master)
                runs.append((wall, job))
                print("".join(f"    {line}\n" for line in stdout.splitlines() if line.startswith("[")), end="")
                print(
                    f"{rows:,} rows on {args.master}, run {run}: {wall:.1f} s wall ({rows / wall:,.0f} rows/s), "
                    f"job {job:.1f} s after Spark started ({rows / job:,.0f} rows/s); load average before {before}, after {load()}",
                    flush=True,
                )
            results[rows] = min(runs)
            if len(runs) > 1:
                walls = sorted(w for w, _ in runs)
                print(f"{rows:,} rows: best {walls[0]:.1f} s wall, worst {walls[-1]:.1f} s", flush=True)
            if not args.keep:
                shutil.rmtree(history)
        if 1_000_000 in results and 10_000_000 in results:
            (wall_1, job_1), (wall_10, job_10) = results[1_000_000], results[10_000_000]
            print(f"time(10M) / time(1M), best runs: {wall_10 / wall_1:.2f} wall, {job_10 / job_1:.2f} job")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
