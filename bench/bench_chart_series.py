"""The chart series of four volumes (``chart_data.closest_volume_series``'s query) from every
expanded row (``baseline``: how every run read them before the chart's cells) and from the
files' chart cells (``current``: ``partials.derive``'s ``chart`` table, a row per volume, file
and cell of ``CELL_SECONDS``), in one Spark session on local[2], in turns, both in buckets of
whole cells (the same buckets, so that both give the same series).

The rows are the cached lines of a cache the report filled (``--cache``, such as one day of
1,000 x 12 parsed by ``bench_report_cost.py``); the cells are written from them first, as the
cache writes them on a cold run, and that write is timed beside the write of the files'
``volumes`` table (a table every cold run writes) from the same lines. Prints each round's
seconds, the medians, current / baseline, and whether both gave the same series.

    .venv/bin/python bench/bench_chart_series.py --cache /var/tmp/cache1k
"""

from __future__ import annotations

import math
import operator
import time
from functools import reduce
from pathlib import Path

from bench_report import cache_bench_parser, cache_bench_session, in_turns, load


def main() -> None:
    parser = cache_bench_parser(__doc__)
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from spark.analysis import partials
    from spark.analysis.brokers import judged
    from spark.analysis.chart_data import (
        CELL,
        CELL_SECONDS,
        CellBuckets,
        cell_of,
        combined_points,
        series_points,
    )
    from spark.analysis.episodes import VOLUME, data_rows, volume_rows
    from spark.reading.cache import CHUNK, LINES
    from spark.reading.frames import in_order
    from spark.reading.history import epoch_seconds, valid

    with cache_bench_session(args.master, "throttle-chart-bench-") as (spark, work):
        lines = spark.read.parquet(str(Path(args.cache) / LINES))
        files = lines.select(CHUNK).distinct().count()
        print(f"{files} files of cached lines; load average at the start {load()}", flush=True)
        writes = {}
        for name in (partials.VOLUMES, partials.CHART):
            started = time.perf_counter()
            partials.derive(lines)[name].write.partitionBy(CHUNK).parquet(str(work / name))
            writes[name] = time.perf_counter() - started
        print(
            f"written from the lines: the volumes' table {writes[partials.VOLUMES]:.1f} s, the chart's cells {writes[partials.CHART]:.1f} s "
            f"({writes[partials.CHART] / writes[partials.VOLUMES]:.2f}x)",
            flush=True,
        )
        cells = spark.read.parquet(str(work / partials.CHART))
        rows = lines.filter(valid()).transform(data_rows)
        span = rows.agg(F.min(epoch_seconds("time")).alias("first"), F.max(epoch_seconds("time")).alias("last")).first()
        first_cell = math.floor(span["first"] / CELL_SECONDS)
        buckets = CellBuckets(first_cell, 1)
        chosen = [(r["broker_id"], r["log_dir"]) for r in cells.groupBy(*VOLUME).agg(F.min("usable").alias("u")).orderBy("u", *VOLUME).limit(4).collect()]
        one_of_chosen = reduce(operator.or_, [(F.col("broker_id") == b) & (F.col("log_dir") == d) for b, d in chosen])

        def from_rows():
            parts = rows.transform(volume_rows).filter(one_of_chosen).filter(judged()).transform(series_points)
            return [r.asDict() for r in combined_points(parts, *VOLUME, buckets.of(cell_of()).alias("bucket")).transform(lambda b: in_order(b, *VOLUME, "bucket")).collect()]

        def from_cells():
            return [r.asDict() for r in combined_points(cells.filter(one_of_chosen), *VOLUME, buckets.of(F.col(CELL)).alias("bucket")).transform(lambda b: in_order(b, *VOLUME, "bucket")).collect()]

        in_turns({"baseline": from_rows, "current": from_cells}, args.repeat, f"series (buckets of {len(chosen)} volumes)")


if __name__ == "__main__":
    main()
