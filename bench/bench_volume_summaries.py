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

from pathlib import Path

from bench_report import cache_bench_parser, cache_bench_session, in_turns, load


def main() -> None:
    parser = cache_bench_parser(__doc__)
    parser.add_argument("--days", type=int, default=7)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from spark.analysis import partials
    from spark.reading.cache import CHUNK

    with cache_bench_session(args.master, "throttle-summaries-bench-") as (spark, work):
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

        def summaries(interleave: bool):
            found = partials.collected_volumes(derived, files_interleave=interleave)
            return sorted(found.data_times, key=repr), found.interleaved

        in_turns({name: lambda interleave=interleave: summaries(interleave) for name, interleave in ways.items()}, args.repeat, "summaries")


if __name__ == "__main__":
    main()
