"""The strict reader's CPU: ``checked_lines`` (the JSON parse and every field's checks) into
Parquet, as the cache writes a file's lines, against the same step at an earlier commit.
With ``--step expand``: the step after the JSON parse instead, ``expanded_lines`` (format 2's
rows expanded into a row per volume per round, every line checked) from the parsed raw lines,
as ``parse_lines`` runs it (the raw lines read from the Parquet copy it writes first).

In one Spark session on local[2], in turns (the first alternating between rounds):

- ``baseline``: ``checked_lines`` of ``spark/reading/history.py`` at ``--baseline`` (a git ref of
  this repository), over the same raw lines (this tree's ``_json``);
- ``current``: this tree's ``checked_lines``;
- ``parse only`` (``raw only`` with ``--step expand``: read from the copy): the raw lines as
  the JSON source gives them (READ_SCHEMA), no checks: the
  floor the checks add to (with ``--sink noop``: Parquet writes the raw variants and the
  unparsed text at a cost of its own).

Each run prints its wall time, the CPU seconds of Spark's tasks (its event log: the CPU the
work itself took, without the JIT and collector threads) and of the whole JVM, and the load
average, after a round not counted (the JIT compiles the generated code). At the end: the medians, current / baseline per round (the median of the rounds'
ratios), and a check that the two wrote the same rows (a hash of every column summed over the
rows, and the lines per skip reason). The history: hourly files of the service's layout, such as
the 10M-row history of ``bench_report.py --incremental --history DIR`` (read only).

    .venv/bin/python bench/bench_parse.py --history /var/tmp/h10m                  # 12 files (1.7M rows), 4 rounds
    .venv/bin/python bench/bench_parse.py --history /var/tmp/h10m --files 6 --repeat 6
    .venv/bin/python bench/bench_parse.py --history /var/tmp/h1000x12-1d --step expand --files 6 --baseline c5bc357~2
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from bench_report import cpu_seconds, load

REPOSITORY = Path(__file__).resolve().parent.parent
# The commit before the reader's checks were made cheaper (the same checks, each instant cast twice).
DEFAULT_BASELINE = "22b8e6d"


def baseline_module(ref: str, work: Path) -> ModuleType:
    """``spark/reading/history.py`` as it was at ``ref``, importing this tree's other modules."""
    source = subprocess.run(["git", "-C", str(REPOSITORY), "show", f"{ref}:spark/reading/history.py"], check=True, capture_output=True, text=True).stdout
    path = work / "baseline_history.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_history", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


class TaskCpu:
    """CPU seconds of Spark's tasks since the last call, from the session's event log."""

    def __init__(self, spark, events: Path):
        self._spark, self._events, self._offsets = spark, events, {}

    def __call__(self) -> float:
        self._spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # the job's events are written
        total = 0
        for log in sorted(f for f in self._events.rglob("*") if f.is_file()):  # Spark 4: a folder of rolled files
            with log.open("rb") as stream:
                stream.seek(self._offsets.get(log, 0))
                text = stream.read()
            complete = text[: text.rfind(b"\n") + 1]
            self._offsets[log] = self._offsets.get(log, 0) + len(complete)
            for line in complete.splitlines():
                if b'"SparkListenerTaskEnd"' in line:
                    total += (json.loads(line).get("Task Metrics") or {}).get("Executor CPU Time", 0)
        return total / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", required=True, help="a history folder (date=YYYY-MM-DD/*.jsonl), read only")
    parser.add_argument("--files", type=int, default=12, help="the first N hourly files (default 12)")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help=f"the git ref to compare with (default {DEFAULT_BASELINE})")
    parser.add_argument("--repeat", type=int, default=4, help="rounds (default 4)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sink", choices=("parquet", "noop"), default="parquet", help="write Parquet (as the cache does), or only compute every row (noop)")
    parser.add_argument("--step", choices=("check", "expand"), default="check", help="checked_lines of the JSON lines, or expanded_lines of the parsed raw lines")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from spark.reading import history
    from spark.session import report_session

    files = sorted(str(f) for f in Path(args.history).glob("*/*.jsonl*"))[: args.files]
    work = Path(tempfile.mkdtemp(prefix="throttle-parse-bench-"))
    events = work / "events"
    events.mkdir()
    try:
        baseline = baseline_module(args.baseline, work)
        logged = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(), "spark.eventLog.compress": "false"}
        spark = report_session(args.master, logged)
        jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        task_cpu = TaskCpu(spark, events)
        keep = (history._FILE_PATH,)
        if args.step == "expand":
            raw_copy = str(work / "raw")
            history._json(spark, files).write.parquet(raw_copy)
            raw = spark.read.parquet(raw_copy)
            ways = {
                "baseline": lambda: baseline.expanded_lines(raw),
                "current": lambda: history.expanded_lines(raw),
                "raw only": lambda: raw,
            }
        else:
            ways = {
                "baseline": lambda: baseline.checked_lines(history._json(spark, files), keep=keep),
                "current": lambda: history.checked_lines(history._json(spark, files), keep=keep),
                "parse only": lambda: history._json(spark, files),
            }
        rows = spark.read.text(files).count()
        print(f"{len(files)} files, {rows:,} lines; step {args.step}; baseline {args.baseline}; sink {args.sink}; load average at the start {load()}", flush=True)
        results: dict[str, list[tuple[float, float, float]]] = {name: [] for name in ways}
        for name, way in ways.items():  # a round not counted: the JIT compiles each way's code
            way().write.format("noop").mode("overwrite").save()
        task_cpu()
        for round_ in range(args.repeat):
            for name in list(ways)[:: 1 if round_ % 2 == 0 else -1]:
                target = str(work / name.replace(" ", "-"))
                before, jvm_cpu, started = load(), cpu_seconds(jvm), time.perf_counter()
                written_lines = ways[name]().write.mode("overwrite")
                written_lines.parquet(target) if args.sink == "parquet" else written_lines.format("noop").save()
                wall, jvm_cpu, tasks = time.perf_counter() - started, cpu_seconds(jvm) - jvm_cpu, task_cpu()
                results[name].append((wall, tasks, jvm_cpu))
                print(f"  round {round_ + 1} {name:<10}: {wall:5.1f} s wall, task CPU {tasks:5.1f} s, JVM CPU {jvm_cpu:5.1f} s; load average before {before}", flush=True)

        print(f"medians over {args.repeat} rounds ({len(files)} files, {rows:,} lines); load average at the end {load()}")
        for name, runs in results.items():
            wall, tasks, jvm_cpu = (statistics.median(run[i] for run in runs) for i in range(3))
            print(f"  {name:<10}: {wall:5.1f} s wall, task CPU {tasks:5.1f} s, JVM CPU {jvm_cpu:5.1f} s")
        for i, what in ((1, "task CPU"), (2, "JVM CPU"), (0, "wall")):
            ratios = [current[i] / base[i] for current, base in zip(results["current"], results["baseline"], strict=True)]
            print(f"  current / baseline, {what}: median {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)})")

        def written(name: str) -> tuple:
            """A hash of every value written, the lines, and the lines per skip reason."""
            lines = spark.read.parquet(str(work / name))
            digest = lines.select(F.sum(F.xxhash64(*lines.columns).cast("decimal(38,0)")), F.count("*")).first()
            return tuple(digest), sorted(map(tuple, lines.groupBy(history.SKIP_REASON).count().collect()), key=repr)

        if args.sink == "noop":
            for name in ("baseline", "current"):
                ways[name]().write.mode("overwrite").parquet(str(work / name.replace(" ", "-")))
        same = written("baseline") == written("current")
        print(f"  baseline and current wrote the same lines: {same} (lines per skip reason: {written('current')[1]})")
        spark.stop()
        if not same:
            raise SystemExit("the current reader's lines differ from the baseline's")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
