"""What a run of ``throttle-report`` costs against what Spark itself costs, on local[2], each
measured in the same run:

- ``floor``: Spark started and stopped with one trivial job, in a fresh Python and JVM (no
  report can cost less);
- ``warm``: the report of an unchanged history from a full ``--cache``, in a fresh Python and
  JVM, start included (target: at most 2x the floor): the cache's kept report is copied
  (``reading.reuse``);
- ``warm, made again``: the same with the kept report removed first: every table computed from
  the cached files' shares, nothing parsed;
- ``warm, last file touched``: the same after the history's last file was touched (its
  modification time moved on by 1 ns, its bytes unchanged): that file is parsed again and
  every table computed, as in a schedule's run while the service writes the current hour;
- ``cold``: the report of the same history with an empty cache (every file parsed), start
  included;
- ``duckdb``: DuckDB's ``read_json`` of the same files with the fields' declared types, written
  to Parquet on 2 threads (the parse alone, without the checks and the analysis);

and the Spark jobs each report ran (``SparkContext.statusTracker``, the jobs of the run's job
group), with the jobs of each step of the report. The history is generated once (``--history``
keeps it): ``--brokers`` x ``--log-dirs`` volumes, a round every ``--interval`` seconds, for
``--days``; ``--compact`` writes it in the history's compact format (rows only on change or at the
keyframe), as the service writes it, when the writer has that format. DuckDB comes with the
bench extra: ``.venv/bin/pip install -e '.[bench]'``.

    .venv/bin/python bench/bench_report_cost.py                              # 100 x 4, 2 days at PT1M
    .venv/bin/python bench/bench_report_cost.py --brokers 1000 --log-dirs 12 --days 1 --history /var/tmp/h1000

The 30-day history of 1,000 x 12 takes about 2.5 CPU-hours to generate (the service's decider,
row code and bzip2 at 0.2-0.35 CPU-s a round): make it ahead, in as many processes as cores; an
interrupted generation goes on from its last whole hour when run again:

    nice .venv/bin/python bench/bench_report_cost.py --brokers 1000 --log-dirs 12 --days 30 --compact --pieces 2 --generate-only --history /var/tmp/h30
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.history.compact import Compaction, Compactor  # noqa: E402
from app.history.files import compress, file_bytes, file_for  # noqa: E402
from app.history.rows import ROW_ENCODER, round_lines  # noqa: E402
from app.history.schema import Codec  # noqa: E402
from bench_history import DAY, START, TOTAL, Cluster, rounds as simulated_rounds  # noqa: E402
from devtools.commands import run_command  # noqa: E402

# Run in a Python (and so a JVM) of its own: the start of Spark is part of what is measured.
_FLOOR = """
import json, sys, time
started = time.perf_counter()
from spark.session import report_session
spark = report_session(sys.argv[1])
spark.range(1).count()
spark.stop()
print(json.dumps({"seconds": time.perf_counter() - started}))
"""
_REPORT = """
import json, sys, time
started = time.perf_counter()
from spark.job import run_report
from spark.session import report_session
history, output, cache, master = sys.argv[1:5]
spark = report_session(master)
sc = spark.sparkContext
sc.setJobGroup("report", "the report")
steps = []

def progress(message):
    steps.append((message.split(" (")[0][:60], len(sc.statusTracker().getJobIdsForGroup("report")), time.perf_counter()))

report_started = time.perf_counter()
report = run_report(spark, history, output, cache=cache or None, progress=progress)
jobs = len(sc.statusTracker().getJobIdsForGroup("report"))
spark.stop()
per_step, before, since = [], 0, report_started
for message, count, at in steps:
    per_step.append([message, count - before, at - since])
    before, since = count, at
print(json.dumps({"seconds": time.perf_counter() - started, "session_seconds": report_started - started, "job_seconds": report.seconds["total"], "jobs": jobs,
                  "rows": report.rows, "skipped": report.skipped_lines, "steps": per_step}))
"""


def _python(code: str, *arguments: object) -> dict:
    finished = run_command([sys.executable, "-c", textwrap.dedent(code), *map(str, arguments)], 7200, check=True, cwd=Path(__file__).resolve().parents[1])
    return json.loads(finished.stdout.strip().splitlines()[-1])


def _print_steps(run: dict) -> None:
    """Each step's Spark jobs and seconds (a step's seconds end with its message)."""
    print(f"    {0:4d} jobs {run['session_seconds']:7.1f} s  Python and Spark started, the session made")
    for step, jobs, seconds in run["steps"]:
        print(f"    {jobs:4d} jobs {seconds:7.1f} s  {step}")


class _Month(Cluster):
    """bench_history's cluster over many days: each day one volume in a thousand ramps into its
    soft limit (06:00-07:00) and one breaches its hard limit (14:00-14:30), other volumes each day."""

    def __init__(self, brokers: int, dirs: int, days: float) -> None:
        super().__init__(brokers, dirs)
        rng = random.Random(11)
        picks = max(1, len(self.keys) // 1000)
        self.daily = [
            (set(rng.sample(self.keys, picks)), set(rng.sample(self.keys, picks)))
            for _ in range(math.ceil(days) + 1)
        ]
        # Per volume, in the order of keys: what _healthy reads.
        self._healthy_terms = [
            (self.level[key], self.phase[key], self.rate[key], self.retention_offset[key]) for key in self.keys
        ]

    def usable(self, key, t: float, hours: float) -> int:
        elapsed = t - START
        ramping, breaching = self.daily[int(elapsed // DAY)]
        of_day = elapsed % DAY
        if key in ramping and 6 * 3600 <= of_day < 7 * 3600:
            return int(0.08 * TOTAL)  # between the hard (5%) and soft (10%) limits
        if key in breaching and 14 * 3600 <= of_day < 14.5 * 3600:
            return int(0.03 * TOTAL)
        return self._healthy(key, elapsed)

    def usable_all(self, t: float, hours: float) -> list[int]:
        """``usable`` of every volume, the same values, computed as one list (a twelfth of the
        time at 12,000 volumes)."""
        elapsed = t - START
        angle = 2 * math.pi * elapsed / DAY
        sin = math.sin
        values = [
            int((level + 0.1 * sin(angle + phase)) * TOTAL - rate * ((elapsed + offset) % 300))
            for level, phase, rate, offset in self._healthy_terms
        ]
        ramping, breaching = self.daily[int(elapsed // DAY)]
        of_day = elapsed % DAY
        for keys, value, window in ((ramping, 0.08, (6, 7)), (breaching, 0.03, (14, 14.5))):
            if window[0] * 3600 <= of_day < window[1] * 3600:  # the two windows never overlap
                for key in keys:
                    values[self._index[key]] = int(value * TOTAL)
        return values

    @functools.cached_property
    def _index(self) -> dict:
        return {key: i for i, key in enumerate(self.keys)}


# Rounds simulated before a piece's first hour and not written: the decider's state then is what
# it would be had it run from the start (its observations are valid for 300 s; the compactor
# starts every hour afresh anyway).
_WARM_UP_ROUNDS_SECONDS = 900.0


def generate(
    history: Path, brokers: int, log_dirs: int, interval: float, days: float, compact: bool, pieces: int = 1
) -> int:
    """Rounds of a simulated cluster judged by the service's own decider and written by the
    service's own row code (format 2 with ``compact``, else format 1), in hourly files, every
    closed hour compressed with bzip2 as the service does. With ``pieces`` > 1, whole days are
    shared out among that many processes, each starting its rounds ``_WARM_UP_ROUNDS_SECONDS``
    early (the same files as one process writes). Returns the rows written."""
    total_rounds = int(days * 24 * 3600 / interval)
    day_rounds = int(DAY / interval)
    whole_days = math.ceil(total_rounds / day_rounds)
    pieces = max(1, min(pieces, whole_days))
    bounds = [round(whole_days * n / pieces) * day_rounds for n in range(pieces + 1)]
    bounds[-1] = total_rounds
    ranges = [(bounds[n], bounds[n + 1]) for n in range(pieces) if bounds[n] < bounds[n + 1]]
    arguments = [(history, brokers, log_dirs, interval, days, compact, first, last) for first, last in ranges]
    if len(arguments) == 1:
        return _generate_piece(*arguments[0])
    with multiprocessing.get_context("fork").Pool(len(arguments)) as pool:
        return sum(pool.starmap(_generate_piece, arguments))


def _generate_piece(
    history: Path, brokers: int, log_dirs: int, interval: float, days: float, compact: bool, first: int, last: int
) -> int:
    """``generate``'s rounds ``first`` to ``last`` (exclusive), written; after an interrupted
    run, from the first hour not yet compressed (a piece writes its hours in order)."""
    hour_rounds = 3600 / interval
    if hour_rounds.is_integer():
        while first < last and _compressed(file_for(history, START + first * interval)).exists():
            first += int(hour_rounds)
        plain = file_for(history, START + first * interval)
        plain.unlink(missing_ok=True)
        plain.with_name(f".{_compressed(plain).name}.tmp").unlink(missing_ok=True)  # compress's staging
    if first >= last:
        return 0
    cluster = _Month(brokers, log_dirs, days)
    compactor = Compactor(Compaction()) if compact else None
    written, hour, out = 0, None, None
    start = max(0, first - math.ceil(_WARM_UP_ROUNDS_SECONDS / interval))
    for index, (round_, decision) in enumerate(simulated_rounds(cluster, interval, (last + 0.5) * interval / 3600, start), start):
        if compactor is not None:
            lines = [ROW_ENCODER.encode(row) for row in compactor.rows(round_, decision, interval)]
            data = ("\n".join(lines) + "\n").encode()
        else:
            data = round_lines(round_, decision, interval).encode()
        if index < first:
            continue
        written += data.count(b"\n")
        path = file_for(history, round_.finished_at)
        if path != hour:
            if out is not None:
                out.close()
                compress(hour, Codec.BZIP2)
            path.parent.mkdir(parents=True, exist_ok=True)
            hour, out = path, path.open("ab")
        out.write(data)
    if out is not None:
        out.close()
        compress(hour, Codec.BZIP2)
    return written


def _compressed(plain: Path) -> Path:
    return plain.with_name(plain.name + Codec.BZIP2.suffix.removeprefix(".jsonl"))


def duckdb_parse(history: Path, target: Path, threads: int = 2) -> float:
    """bench_report's DuckDB parse of the same lines (declared types, to Parquet): its seconds.
    DuckDB reads gzip but not bzip2: the closed hours are decompressed beside first (not timed)."""
    from bench_report import duckdb_parse as parse

    plain = target.parent / "duckdb-lines"
    for path in history.rglob("*.jsonl*"):
        copy = plain / path.relative_to(history).with_suffix("" if path.suffix != ".jsonl" else ".jsonl")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(file_bytes(path))
    started = time.perf_counter()
    parse(plain, target, threads)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--log-dirs", type=int, default=4)
    parser.add_argument("--interval", type=float, default=60.0)
    parser.add_argument("--days", type=float, default=2.0)
    parser.add_argument("--compact", action="store_true")
    parser.add_argument("--history", help="keep (and reuse) the generated history here")
    parser.add_argument("--pieces", type=int, default=1, help="generate the history's days in this many processes")
    parser.add_argument("--generate-only", action="store_true", help="generate the --history (hours at 1,000 x 12 x 30 days) and stop")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--warm-runs", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-report-cost-"))
    history = Path(args.history) if args.history else work / "history"
    marker = history / f".generated-{args.brokers}x{args.log_dirs}-{args.interval}-{args.days}-{'compact' if args.compact else 'full'}"
    try:
        generating = marker.with_name(marker.name.replace(".generated-", ".generating-"))
        if not marker.exists():
            if not generating.exists():  # none, or a history of another kind: start afresh
                shutil.rmtree(history, ignore_errors=True)
                history.mkdir(parents=True)
                generating.touch()
            # (else an interrupted generation of the same kind: it goes on from its last whole hour)
            generate(history, args.brokers, args.log_dirs, args.interval, args.days, args.compact, args.pieces)
            generating.rename(marker)
        if args.generate_only:
            return
        size = sum(f.stat().st_size for f in history.rglob("*.jsonl*"))
        print(f"history {history}: {args.brokers} x {args.log_dirs} volumes, a round every {args.interval:g} s, {args.days:g} days, {size / 1024**2:,.1f} MiB", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
        floor = _python(_FLOOR, args.master)["seconds"]
        print(f"floor (Spark started, one job, stopped): {floor:.1f} s", flush=True)
        cache = work / "cache"
        cold = _python(_REPORT, history, work / "report-cold", cache, args.master)
        print(f"cold (empty cache): {cold['seconds']:.1f} s ({cold['seconds'] / floor:.2f}x the floor), {cold['jobs']} Spark jobs, {cold['rows']:,} rows, {cold['skipped']} skipped", flush=True)
        _print_steps(cold)
        for run in range(args.warm_runs):
            warm = _python(_REPORT, history, work / "report-warm", cache, args.master)
            print(f"warm {run + 1} (full cache, the kept report): {warm['seconds']:.1f} s ({warm['seconds'] / floor:.2f}x the floor), {warm['jobs']} Spark jobs", flush=True)
        _print_steps(warm)
        shutil.rmtree(cache / "reports")
        again = _python(_REPORT, history, work / "report-again", cache, args.master)
        print(f"warm, made again (full cache, no kept report): {again['seconds']:.1f} s ({again['seconds'] / floor:.2f}x the floor), {again['jobs']} Spark jobs", flush=True)
        _print_steps(again)
        last = max(history.rglob("*.jsonl*"), key=lambda f: (f.parent.name, f.name))
        os.utime(last, ns=(last.stat().st_atime_ns, last.stat().st_mtime_ns + 1))
        touched = _python(_REPORT, history, work / "report-touched", cache, args.master)
        print(f"warm, {last.parent.name}/{last.name} touched (parsed again): {touched['seconds']:.1f} s ({touched['seconds'] / floor:.2f}x the floor), {touched['jobs']} Spark jobs", flush=True)
        _print_steps(touched)
        floor_after = _python(_FLOOR, args.master)["seconds"]
        mean_floor = (floor + floor_after) / 2
        print(f"floor again: {floor_after:.1f} s; against the mean floor: warm {warm['seconds'] / mean_floor:.2f}x, made again {again['seconds'] / mean_floor:.2f}x, "
              f"last file touched {touched['seconds'] / mean_floor:.2f}x", flush=True)
        try:
            duck = duckdb_parse(history, work / "duckdb.parquet")
        except ImportError:
            print("duckdb: not installed (.venv/bin/pip install -e '.[bench]')")
        else:
            print(f"duckdb read_json to Parquet, 2 threads: {duck:.1f} s; cold report {cold['seconds'] / duck:.2f}x DuckDB's parse", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
