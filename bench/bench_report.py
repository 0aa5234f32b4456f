"""Benchmarks of ``throttle-report`` on local[2].

Two benchmarks, on synthetic histories in the service's layout (date=YYYY-MM-DD/history-HH.jsonl,
one file per UTC hour, the writer's fields in its order):

**--incremental** (the parsed-history cache): one 10M-row history shaped like a real one
(100 brokers x 4 log dirs, a round every 10 s: 2.9 days), and in one run

- ``cold``: ``throttle-report --cache DIR`` with an empty cache;
- ``warm``: rounds appended to the last day's last hour file (as the service does), then the
  same command with the same cache: only that file is parsed again;
- ``duckdb``: DuckDB's ``read_json`` of the same files with the fields' declared types, written
  to Parquet (the parse the cache does, without its checks), on 2 threads;
- ``json``: the reader's parse step (``checked_lines`` into Parquet) from Spark's JSON data
  source, the reader's choice, against the text data source and ``from_json`` with the same
  schema and options, in one Spark session, alternating; and Spark's plain typed parse (the
  declared types, no checks) for the comparison with DuckDB;
- ``floor``: what is left when nothing is to be parsed: Spark started and stopped with one job
  (the floor of any PySpark job here), and the report of the unchanged history from the full
  cache three times in one session (the first in a fresh JVM, the others in a warmed one),
  each against that start.

``warm`` and ``floor`` run ``cold`` first (it fills the cache). Every run prints the load average
(1/5/15 min) before and after it, its CPU seconds (Spark's tasks, from its event log: steadier
than wall time on a shared machine), and the ratios against DuckDB's time measured in the same
run. The kept rows are checked: the report must read every generated row and skip none.
DuckDB comes with the bench extra: ``.venv/bin/pip install -e '.[bench]'``.

    .venv/bin/python bench/bench_report.py --incremental                       # all five, about 12 min
    .venv/bin/python bench/bench_report.py --incremental --only cold,warm,duckdb  # about 5 min
    .venv/bin/python bench/bench_report.py --incremental --history /var/tmp/h10m  # keep and reuse the history

**Scale** (the default): runtime at 1M and 10M history rows (25 brokers x 4 log dirs, a round
every 30 s), without a cache.

    .venv/bin/python bench/bench_report.py                 # 1M and 10M rows
    .venv/bin/python bench/bench_report.py --rows 1000000  # one size

The machine may be shared: ``--quiet-load 1.5`` waits (up to ``--wait`` seconds, polling
every 30 s) for the 1-minute load average to drop below 1.5 before each run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.history.schema import FIELD_NAMES, HISTORY_FIELDS
from devtools.commands import run_command

TOTAL = 100 * 1024**3
HARD, SOFT = 0.10, 0.20  # ratio limits
START = datetime(2026, 1, 1, tzinfo=UTC)
INCREMENTAL_ROWS = 10_000_000
PARTS = ("cold", "warm", "duckdb", "json", "floor")


@dataclass(frozen=True)
class Shape:
    brokers: int
    log_dirs: int
    interval: float  # seconds between rounds


SCALE = Shape(25, 4, 30.0)
ISSUE = Shape(100, 4, 10.0)  # 10M rows: 25,000 rounds, 2.9 days


def _volumes(shape: Shape) -> list[tuple[int, str, float]]:
    return [(b, f"/var/lib/kafka/data-{d}", (b * shape.log_dirs + d) * 0.618) for b in range(1, shape.brokers + 1) for d in range(shape.log_dirs)]


# The rule that set a volume's factor, by its verdict (the writer's volume_rule), as JSON.
_RULES = {"breaching": '"hard limit"', "ramping": '"soft limit"', "ok": "null"}


def round_text(shape: Shape, volumes: list[tuple[int, str, float]], i: int) -> str:
    """Round ``i``'s lines as the service's writer encodes them (``app.history.rows.round_lines``):
    every declared field, in order; each volume's available bytes swing so that it crosses the
    soft and hard limits now and then."""
    moment = START + timedelta(seconds=shape.interval * i)
    stamp = moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    observed = (moment - timedelta(milliseconds=180)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    usable = [int(TOTAL * (0.5 + 0.45 * math.sin(i / 400.0 + phase))) for _, _, phase in volumes]
    ratios = [u / TOTAL for u in usable]
    worst = min(ratios)
    state = "PAUSE" if worst <= HARD else "THROTTLE" if worst <= SOFT else "OPEN"
    cluster = 0.0 if worst <= HARD else min(1.0, (worst - HARD) / (SOFT - HARD))
    state_rule = {"PAUSE": '"hard limit"', "THROTTLE": '"soft limit"', "OPEN": "null"}[state]
    end = f',"rule":{state_rule},"holds":"data","mutation_factor":1.0}}\n'
    head = f'{{"time":"{stamp}","broker_id":'
    provenance = f',"observed_at":"{observed}","observation_age_seconds":0.18,"kept":null'
    limits = f',"limit_kind":"min-available-ratio","hard_limit":{HARD!r},"soft_limit":{SOFT!r},"volume_status":'
    tail = (
        f',"cluster_factor":{cluster!r},"state":"{state}","source":"observed","round_complete":true,'
        f'"check_interval_seconds":{shape.interval!r},"enforced":true,"canary_brokers":null'
        ',"fill_rate_bytes_per_second":null,"seconds_to_hard_limit":null,"volume_rule":'
    )
    lines = []
    for (broker, log_dir, _), free, ratio in zip(volumes, usable, ratios):
        status = "breaching" if ratio <= HARD else "ramping" if ratio <= SOFT else "ok"
        factor = 0.0 if ratio <= HARD else min(1.0, (ratio - HARD) / (SOFT - HARD))
        lines.append(
            f'{head}{broker},"log_dir":"{log_dir}","total_bytes":{TOTAL},"usable_bytes":{free},"available_ratio":{ratio!r},'
            f'"log_dir_error":null{provenance}{limits}"{status}","volume_factor":{factor!r}{tail}{_RULES[status]}{end}'
        )
    return "".join(lines)


def _path(directory: Path, shape: Shape, i: int) -> Path:
    moment = START + timedelta(seconds=shape.interval * i)
    return directory / f"date={moment:%Y-%m-%d}" / f"history-{moment:%H}.jsonl"


def generate(directory: Path, rows: int, shape: Shape = SCALE) -> float:
    """Write ``rows`` history rows (whole rounds); returns the seconds it took."""
    started = time.perf_counter()
    volumes = _volumes(shape)
    handle, current = None, None
    for i in range(rows // len(volumes)):
        path = _path(directory, shape, i)
        if path != current:
            if handle:
                handle.close()
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, current = path.open("w"), path
        handle.write(round_text(shape, volumes, i))
    if handle:
        handle.close()
    first = json.loads(next(directory.rglob("*.jsonl")).open().readline())
    assert tuple(first) == FIELD_NAMES, f"the generated lines' fields are not the writer's: {tuple(first)}"
    return time.perf_counter() - started


def append_rounds(directory: Path, rows: int, shape: Shape, rounds: int) -> tuple[Path, int]:
    """Append ``rounds`` rounds after the history's ``rows`` rows to its last file (the service
    goes on writing the current hour); returns that file and its size before."""
    volumes = _volumes(shape)
    first = rows // len(volumes)
    last = _path(directory, shape, first - 1)
    size = last.stat().st_size
    with last.open("a") as handle:
        for i in range(first, first + rounds):
            if _path(directory, shape, i) == last:
                handle.write(round_text(shape, volumes, i))
    return last, size


@dataclass(frozen=True)
class Run:
    wall: float
    job: float
    parse: float | None  # with --cache: parsing the new or changed files into the cache, with their derived tables
    read: float  # the read step: the parse and the pass that counts the lines and finds the rounds
    task_cpu: float  # CPU seconds of Spark's tasks (from its event log): steadier than wall time on a busy machine
    parse_cpu: float | None  # of them, the parse and derive jobs' (with --cache)
    rows: int
    skipped: int
    stdout: str


def _at(pattern: str, stdout: str) -> float | None:
    """The seconds of the progress line that matches ``pattern``."""
    found = re.search(r"\[ *([0-9.]+) s\] " + pattern, stdout)
    return float(found.group(1)) if found else None


def _task_cpu(events: Path) -> tuple[float, float | None]:
    """CPU seconds of every task in Spark's event logs under ``events``, and of the jobs that
    parse history files and derive their tables (``reading.cache`` names them so)."""
    total, parsing, stages_parsing = 0, 0, set()
    for log in sorted(f for f in events.rglob("*") if f.is_file()):
        for line in log.open(errors="replace"):
            if '"SparkListenerJobStart"' in line:
                job = json.loads(line)
                if job.get("Properties", {}).get("spark.job.description", "").startswith(("parse ", "derive ")):
                    stages_parsing |= set(job["Stage IDs"])
            elif '"SparkListenerTaskEnd"' in line:
                event = json.loads(line)
                cpu = (event.get("Task Metrics") or {}).get("Executor CPU Time", 0)
                total += cpu
                if event["Stage ID"] in stages_parsing:
                    parsing += cpu
    return total / 1e9, parsing / 1e9 if stages_parsing else None


def run_report(history: Path, output: Path, master: str, cache: Path | None = None) -> Run:
    """The installed console script on ``history``: its wall time, its own job time and read
    step, and its tasks' CPU time (Spark's event log, written beside ``output``)."""
    script = Path(sys.executable).parent / "throttle-report"
    command = [script, "--input", history, "--output", output, "--master", master, *(["--cache", cache] if cache else [])]
    events = output.with_name(output.name + "-events")
    shutil.rmtree(events, ignore_errors=True)
    events.mkdir(parents=True)
    logged = f"--conf spark.eventLog.enabled=true --conf spark.eventLog.dir={events.as_uri()} --conf spark.eventLog.compress=false pyspark-shell"
    started = time.perf_counter()
    finished = run_command(command, 4 * 3600, check=True, env={**os.environ, "PYSPARK_SUBMIT_ARGS": logged})
    wall = time.perf_counter() - started
    out = finished.stdout
    read = re.search(r"read ([0-9,]+) rows, skipped ([0-9,]+) lines.*\(([0-9.]+) s\)", out)
    job = float(re.search(r"done in ([0-9.]+) s", out).group(1))
    parsed, reading = _at("cache ", out), _at("reading ", out)
    task_cpu, parse_cpu = _task_cpu(events)
    return Run(
        wall,
        job,
        parsed - reading if parsed is not None and reading is not None else None,
        float(read.group(3)),
        task_cpu,
        parse_cpu if cache else None,
        int(read.group(1).replace(",", "")),
        int(read.group(2).replace(",", "")),
        out,
    )


def wait_for_load(limit: float | None, wait: float) -> None:
    if limit is None:
        return
    deadline = time.monotonic() + wait
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        print(f"    load {os.getloadavg()[0]:.2f} >= {limit}: waiting", flush=True)
        time.sleep(30)


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def cache_bench_parser(description: str) -> argparse.ArgumentParser:
    """The arguments of a bench over a report cache's tables: --cache, --repeat, --master."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="a report cache (--cache DIR of throttle-report), read only")
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    return parser


@contextlib.contextmanager
def cache_bench_session(master: str, prefix: str) -> Iterator[tuple[Any, Path]]:
    """A report session with adaptive execution off (as the report runs its queries on a local
    master) and a work folder: the session stopped and the folder removed at the end."""
    from spark.session import report_session

    work = Path(tempfile.mkdtemp(prefix=prefix))
    spark = None
    try:
        spark = report_session(master)
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        yield spark, work
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)


def in_turns(ways: dict, repeat: int, what: str) -> None:
    """Time two ways (``baseline`` and ``current``: a function each, giving a result) in turns,
    in ``repeat`` rounds, the order reversed every other round, after a round not counted (the
    JIT compiles each way's code); print each round, the medians and current / baseline, and
    stop with an error when the two ways' last results differ (``what``: what they give)."""
    for way in ways.values():
        way()
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    found = {}
    for round_ in range(repeat):
        for name in list(ways)[:: 1 if round_ % 2 == 0 else -1]:
            started = time.perf_counter()
            found[name] = ways[name]()
            seconds[name].append(time.perf_counter() - started)
            print(f"  round {round_ + 1} {name:<8}: {seconds[name][-1]:5.2f} s", flush=True)
    ratios = [c / b for c, b in zip(seconds["current"], seconds["baseline"], strict=True)]
    print(
        f"medians: baseline {statistics.median(seconds['baseline']):.2f} s, current {statistics.median(seconds['current']):.2f} s; "
        f"current / baseline {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)}); load average at the end {load()}"
    )
    same = found["baseline"] == found["current"]
    print(f"the same {what}: {same}")
    if not same:
        raise SystemExit(f"the {what} differ")


def _timed(action) -> tuple[float, str, object]:
    """(seconds, load average before, result) of ``action()``."""
    before = load()
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, before, result


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _progress_lines(stdout: str) -> str:
    return "".join(f"    {line}\n" for line in stdout.splitlines() if line.startswith("["))


# DuckDB's names for the declared kinds (the reader's types, read straight into their type).
_DUCKDB_TYPES = {"timestamp": "TIMESTAMPTZ", "int": "INTEGER", "long": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "boolean": "BOOLEAN"}


def duckdb_parse(history: Path, target: Path, threads: int) -> int:
    """DuckDB reads every line of the history with the declared column types and writes them to
    Parquet (the date partition as a column, like the cache's); returns the rows written."""
    import duckdb  # the bench extra: pip install '.[bench]'

    columns = "{" + ", ".join(f"'{f.name}': '{_DUCKDB_TYPES[f.kind]}'" for f in HISTORY_FIELDS) + "}"
    with duckdb.connect() as con:
        con.execute(f"SET threads = {threads}")
        con.execute("SET memory_limit = '4GB'")
        con.execute("SET TimeZone = 'UTC'")
        con.execute(
            f"COPY (SELECT * FROM read_json('{history}/*/*.jsonl', format = 'newline_delimited', columns = {columns}, "
            f"hive_partitioning = true)) TO '{target}' (FORMAT parquet)"
        )
        return con.execute(f"SELECT count(*) FROM read_parquet('{target}')").fetchone()[0]


def spark_parses(history: Path, work: Path, master: str, repeat: int) -> dict[str, list[tuple[float, float, str]]]:
    """In one Spark session: the reader's parse step (``checked_lines`` to Parquet) from the JSON
    data source and from text + ``from_json`` (in turns, the first one alternating), then the
    plain typed parse of the JSON data source (declared types, no checks) to Parquet.
    Each: [(wall seconds, CPU seconds of the JVM, load average before)]."""
    from pyspark.sql import functions as F

    from spark.reading.history import PARTITION_COLUMN, _json, checked_lines
    from spark.reading.schema import HISTORY_SCHEMA, READ_SCHEMA, UNPARSED_LINE
    from spark.session import report_session

    spark = report_session(master)
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    path = str(history)

    def from_text():
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": UNPARSED_LINE, "allowNonNumericNumbers": "false"}
        lines = spark.read.option("basePath", path).text(path)
        parsed = lines.select(F.from_json("value", READ_SCHEMA, options).alias("line"), PARTITION_COLUMN)
        return parsed.select("line.*", PARTITION_COLUMN)

    # Left on, Spark's optimizer would give each field its own from_json of the line (one
    # parse per field read) once the checks refer to the fields one by one.
    text_settings = {"spark.sql.optimizer.enableJsonExpressionOptimization": "false"}
    ways = {"json source": (lambda: _json(spark, [path]), {}), "text + from_json": (from_text, text_settings)}
    plain = "plain json source"
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in [*ways, plain]}

    def measure(name: str, write, settings: dict[str, str]) -> None:
        target = str(work / f"parse-{name.replace(' ', '-')}")
        for key, value in settings.items():
            spark.conf.set(key, value)
        cpu = cpu_seconds(jvm)
        seconds, before, _ = _timed(lambda: write(target))
        cpu = cpu_seconds(jvm) - cpu
        for key in settings:
            spark.conf.unset(key)
        results[name].append((seconds, cpu, before))
        print(f"    {name}: {seconds:.1f} s wall, {cpu:.1f} s JVM CPU; load average before {before}, after {load()}", flush=True)
        shutil.rmtree(target)

    try:
        for run in range(repeat):
            for name in list(ways)[:: 1 if run % 2 == 0 else -1]:
                raw, settings = ways[name]
                measure(name, lambda target, raw=raw: checked_lines(raw(), keep=(PARTITION_COLUMN,)).write.parquet(target), settings)
            measure(plain, lambda target: spark.read.schema(HISTORY_SCHEMA).option("basePath", path).json(path).write.parquet(target), {})
    finally:
        spark.stop()
    return results


# Run by ``floor``, each in a Python (and so a JVM) of its own: Spark started and stopped with
# one job; and the report run again and again in one session on the unchanged history and its
# cache.
_SPARK_START = """
import json, sys, time
from spark.session import report_session
started = time.perf_counter()
spark = report_session(sys.argv[1])
spark.range(1).count()
spark.stop()
print(json.dumps({"start": time.perf_counter() - started}))
"""
_UNCHANGED = """
import json, sys, time
from spark.job import run_report
from spark.session import report_session
history, cache, output, master, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
spark = report_session(master)
timings = {}
for run in range(runs):
    started = time.perf_counter()
    report = run_report(spark, history, output, cache=cache)
    timings[f"run {run + 1}"] = time.perf_counter() - started
    assert not report.parsed_days, report.parsed_days
print(json.dumps(timings))
"""


def _python(code: str, *arguments: object) -> dict[str, float]:
    finished = run_command([sys.executable, "-c", textwrap.dedent(code), *map(str, arguments)], 3600, check=True)
    return json.loads(finished.stdout.strip().splitlines()[-1])


def floor(history: Path, cache: Path, output: Path, master: str, runs: int = 3) -> dict[str, float]:
    """What a run costs where nothing is left to parse: Spark's start with one job (the floor
    of any PySpark job here), and the report over the unchanged history from a full cache,
    ``runs`` times in one session (the first in a fresh JVM, the others in a warmed one; the
    job's time, without the start)."""
    return {**_python(_SPARK_START, master), **_python(_UNCHANGED, history, cache, output, master, runs)}


def incremental(args, work: Path) -> None:
    parts = set(args.only.split(",")) if args.only else set(PARTS)
    unknown = parts - set(PARTS)
    if unknown:
        raise SystemExit(f"--only: unknown part(s) {', '.join(sorted(unknown))}; choose from {', '.join(PARTS)}")
    if "floor" in parts:
        parts.add("cold")  # the floor reads the cache the cold run fills
    rows = args.rows[0] if args.rows else INCREMENTAL_ROWS
    history = Path(args.history) if args.history else work / "history"
    # A hidden file (the report and the cache skip it), named after the size and the writer's
    # fields: a history generated before a field was declared is generated again.
    fields = hashlib.sha256(",".join(FIELD_NAMES).encode()).hexdigest()[:12]
    marker = history / f".generated-{rows}-{fields}"
    if not marker.exists():
        shutil.rmtree(history, ignore_errors=True)
        history.mkdir(parents=True)
        generated = generate(history, rows, ISSUE)
        marker.touch()
        print(f"generated in {generated:.1f} s", flush=True)
    days = sorted(p.name for p in history.glob("date=*"))
    size = sum(f.stat().st_size for f in history.rglob("*.jsonl"))
    last_day = sum(1 for _ in (history / days[-1]).glob("*.jsonl"))
    print(
        f"history {history}: {rows:,} rows ({ISSUE.brokers} brokers x {ISSUE.log_dirs} log dirs, a round every {ISSUE.interval:.0f} s, "
        f"{rows // (ISSUE.brokers * ISSUE.log_dirs) * ISSUE.interval / 86400:.2f} days), {len(days)} days ({days[0]} .. {days[-1]}, "
        f"the last one {last_day} h), {size / 1024**3:.2f} GiB",
        flush=True,
    )
    timings: dict[str, float] = {}
    cpus: dict[str, float] = {}
    cache = work / "cache"
    if parts & {"cold", "warm"}:
        shutil.rmtree(cache, ignore_errors=True)
        wait_for_load(args.quiet_load, args.wait)
        before = load()
        cold = run_report(history, work / "report-cold", args.master, cache)
        print(_progress_lines(cold.stdout), end="")
        assert (cold.rows, cold.skipped) == (rows, 0), f"the report kept {cold.rows:,} rows and skipped {cold.skipped:,} lines of {rows:,}"
        assert f"parsed {len(days)} days, reused 0" in cold.stdout
        timings.update({"cold": cold.wall, "cold: job": cold.job, "cold: parse": cold.parse})
        cpus.update({"cold": cold.task_cpu, "cold: parse": cold.parse_cpu})
        print(
            f"cold (empty cache): {cold.wall:.1f} s wall, job {cold.job:.1f} s (parse and derive into the cache {cold.parse:.1f} s, read step {cold.read:.1f} s); "
            f"task CPU {cold.task_cpu:.1f} s (parse and derive {cold.parse_cpu:.1f} s); "
            f"load average before {before}, after {load()}",
            flush=True,
        )
    if "floor" in parts:
        # Before warm: its append (then truncated) changes the last file's key.
        wait_for_load(args.quiet_load, args.wait)
        before = load()
        floors = floor(history, cache, work / "report-floor", args.master)
        start = floors.pop("start")
        print(
            f"floor: Spark started and stopped with one job {start:.1f} s; the report of the unchanged history from the cache, "
            f"in one session: {', '.join(f'{name} {seconds:.1f} s ({seconds / start:.2f}x the start)' for name, seconds in floors.items())}; "
            f"load average before {before}, after {load()}",
            flush=True,
        )
        timings["floor: Spark start"] = start
        timings.update({f"floor: unchanged, {name}": seconds for name, seconds in floors.items()})
    if "warm" in parts:
        appended = 6 * ISSUE.brokers * ISSUE.log_dirs  # one more minute of rounds
        last, size_before = append_rounds(history, rows, ISSUE, 6)
        try:
            wait_for_load(args.quiet_load, args.wait)
            before = load()
            warm = run_report(history, work / "report-warm", args.master, cache)
        finally:
            os.truncate(last, size_before)  # the history as generated, for the next part or run
        print(_progress_lines(warm.stdout), end="")
        assert (warm.rows, warm.skipped) == (rows + appended, 0), f"the warm report kept {warm.rows:,} rows, skipped {warm.skipped:,}"
        assert f"parsed 1 days, reused {len(days) - 1} (files: parsed 1," in warm.stdout, "the warm run did not parse exactly the changed file"
        timings.update({"warm": warm.wall, "warm: job": warm.job, "warm: parse": warm.parse})
        cpus.update({"warm": warm.task_cpu, "warm: parse": warm.parse_cpu})
        print(
            f"warm ({days[-1]} changed: {appended:,} rows appended to {last.name}): {warm.wall:.1f} s wall, job {warm.job:.1f} s "
            f"(parse and derive of the changed file {warm.parse:.1f} s, read step {warm.read:.1f} s); task CPU {warm.task_cpu:.1f} s (parse and derive {warm.parse_cpu:.1f} s); load average before {before}, after {load()}",
            flush=True,
        )
    if "duckdb" in parts:
        wait_for_load(args.quiet_load, args.wait)
        target = work / "duckdb.parquet"
        cpu = time.process_time()  # DuckDB's threads are this process's
        seconds, before, written = _timed(lambda: duckdb_parse(history, target, threads=2))
        cpu = time.process_time() - cpu
        target.unlink()
        assert written == rows, f"DuckDB read {written:,} rows of {rows:,}"
        timings["duckdb"], cpus["duckdb"] = seconds, cpu
        print(f"DuckDB read_json, declared types, to Parquet on 2 threads: {seconds:.1f} s wall, {cpu:.1f} s CPU; load average before {before}, after {load()}", flush=True)
    if "json" in parts:
        wait_for_load(args.quiet_load, args.wait)
        parses = spark_parses(history, work, args.master, args.repeat)
        for name, runs in parses.items():
            timings[name] = min(seconds for seconds, _, _ in runs)
            cpus[name] = min(cpu for _, cpu, _ in runs)
    print(
        "\nsummary (best of the runs; ratios against DuckDB's parse in this run; CPU: Spark's task CPU for the reports, "
        "the JVM's CPU for the parses of the json part, the process's for DuckDB):"
    )
    duckdb, duckdb_cpu = timings.get("duckdb"), cpus.get("duckdb")
    for name, seconds in timings.items():
        ratio = f"  {seconds / duckdb:5.2f}x DuckDB" if duckdb and name != "duckdb" else ""
        cpu = f"   CPU {cpus[name]:6.1f} s" + (f"  {cpus[name] / duckdb_cpu:5.2f}x DuckDB" if duckdb_cpu and name != "duckdb" else "") if name in cpus else ""
        print(f"  {name:<24} {seconds:7.1f} s wall{ratio}{cpu}")
    for a, b in (("text + from_json", "json source"),):
        if a in timings and b in timings:
            print(f"  {a} / {b}: {timings[a] / timings[b]:.2f} wall, {cpus[a] / cpus[b]:.2f} CPU")
    for name, target in (("cold", 90.0), ("warm", 20.0)):
        if name in timings and rows == INCREMENTAL_ROWS:  # the targets are the 10M-row history's
            print(f"  {name} target <= {target:.0f} s: {'met' if timings[name] <= target else 'NOT met'}")
    print(f"  load average at the end {load()}")


def scale(args, work: Path) -> None:
    sizes = args.rows or [1_000_000, 10_000_000]
    results = {}
    for rows in sizes:
        history = work / f"history-{rows}"
        generated = generate(history, rows)
        size = sum(f.stat().st_size for f in history.rglob("*.jsonl"))
        print(f"{rows:,} rows: generated in {generated:.1f} s, {size / 1024**3:.2f} GiB", flush=True)
        runs = []
        for run in range(1, args.repeat + 1):
            wait_for_load(args.quiet_load, args.wait)
            before = load()
            result = run_report(history, work / f"report-{rows}", args.master)
            runs.append((result.wall, result.job))
            print(_progress_lines(result.stdout), end="")
            print(
                f"{rows:,} rows on {args.master}, run {run}: {result.wall:.1f} s wall ({rows / result.wall:,.0f} rows/s), "
                f"job {result.job:.1f} s after Spark started ({rows / result.job:,.0f} rows/s); load average before {before}, after {load()}",
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--incremental", action="store_true", help="the cache benchmark (cold, warm, DuckDB, JSON sources) instead of the 1M/10M scale runs")
    parser.add_argument("--only", metavar="PARTS", help=f"with --incremental: a comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--history", metavar="DIR", help="with --incremental: generate the history here once, and reuse it in later runs")
    parser.add_argument("--rows", type=int, action="append", help="history sizes (default: 1000000 and 10000000; --incremental: 10000000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keep", action="store_true", help="keep the generated histories and reports")
    parser.add_argument("--repeat", type=int, default=1, help="runs of the report per size (the best is compared); --incremental: of the JSON parses")
    parser.add_argument("--quiet-load", type=float, metavar="LOAD", help="before each run, wait for the 1-minute load average to drop below this")
    parser.add_argument("--wait", type=float, default=900.0, metavar="SECONDS", help="longest wait for --quiet-load (default 900)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="throttle-report-bench-"))
    print(f"load average at the start {load()}", flush=True)
    try:
        (incremental if args.incremental else scale)(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")


if __name__ == "__main__":
    main()
