"""The volume summaries of a long history from the files' shares (``partials.collected_volumes``):
with the per-volume sort that finds the volumes whose files interleave (``baseline``: what every
run did before the files' spans were checked) and without it (``current``: the files' spans do
not interleave, as the service's hourly files never do), in one Spark session on local[2], in
turns.

The shares are those of a cache the report filled (``--cache``: its ``volumes`` table, such as
one day of 1,000 x 12 parsed by ``bench_report_cost.py``), copied ``--days`` times, each copy a
day later under files of its own: the shares of that many days, without parsing them. Prints
each round's seconds, the medians, current / baseline, and whether both gave the same
summaries.

    .venv/bin/python bench/bench_volume_summaries.py --cache /var/tmp/cache1k --days 7
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench_report import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", required=True, help="a report cache (--cache DIR of throttle-report), read only")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from spark.analysis import partials
    from spark.reading.cache import CHUNK
    from spark.session import report_session

    work = Path(tempfile.mkdtemp(prefix="throttle-summaries-bench-"))
    try:
        spark = report_session(args.master)
        spark.conf.set("spark.sql.adaptive.enabled", "false")  # as the report runs it on a local master
        shares = spark.read.parquet(str(Path(args.cache) / partials.VOLUMES))
        copies = []
        for day in range(args.days):
            later = F.expr(f"INTERVAL {day} DAYS")
            copies.append(
                shares.withColumns(
                    {
                        CHUNK: F.concat(F.col(CHUNK), F.lit(f"-{day}")),
                        "first_seen": F.col("first_seen") + later,
                        "last_seen": F.col("last_seen") + later,
                        "last_fitted": F.col("last_fitted") + later,
                        "last_fitted_t": F.col("last_fitted_t") + F.lit(86400.0 * day),
                    }
                )
            )
        longer = copies[0]
        for copy in copies[1:]:
            longer = longer.unionByName(copy)
        longer.write.parquet(str(work / "shares"))
        derived = {partials.VOLUMES: spark.read.parquet(str(work / "shares"))}
        count = derived[partials.VOLUMES].count()
        print(f"{count:,} shares ({args.days} days); load average at the start {load()}", flush=True)
        ways = {"baseline": True, "current": False}  # files_interleave
        for interleave in ways.values():  # a round not counted: the JIT compiles each way's code
            partials.collected_volumes(derived, files_interleave=interleave)
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        found = {}
        for round_ in range(args.repeat):
            for name in list(ways)[:: 1 if round_ % 2 == 0 else -1]:
                started = time.perf_counter()
                summaries = partials.collected_volumes(derived, files_interleave=ways[name])
                seconds[name].append(time.perf_counter() - started)
                found[name] = (sorted(summaries.data_times, key=repr), summaries.interleaved)
                print(f"  round {round_ + 1} {name:<8}: {seconds[name][-1]:5.2f} s", flush=True)
        ratios = [c / b for c, b in zip(seconds["current"], seconds["baseline"], strict=True)]
        print(f"medians: baseline {statistics.median(seconds['baseline']):.2f} s, current {statistics.median(seconds['current']):.2f} s; current / baseline {statistics.median(ratios):.3f} (rounds: {', '.join(f'{r:.3f}' for r in ratios)}); load average at the end {load()}")
        same = found["baseline"] == found["current"]
        print(f"the same summaries: {same}")
        spark.stop()
        if not same:
            raise SystemExit("the summaries differ")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
