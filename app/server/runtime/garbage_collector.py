"""The service's settings for Python's cyclic garbage collector.

A round at a thousand brokers allocates hundreds of thousands of short-lived objects (kafka-
python's per-request objects, 12,000 observations, history rows), nearly all freed by reference
counting. With the interpreter's default (a young-generation collection every 700 net
allocations) the collector ran some 80 times a round and took a quarter of the volume source's
CPU (bench/bench_rounds.py). Collecting the young generation every 50,000 allocations holds at
most that many objects of cyclic garbage a little longer (a few MiB); what the process builds
at start-up (modules, the app, its schemas) is frozen out of every later collection."""

from __future__ import annotations

import gc

YOUNG_GENERATION_THRESHOLD = 50_000
MIDDLE_GENERATION_THRESHOLD = 20
OLD_GENERATION_THRESHOLD = 100


def tune_garbage_collector() -> None:
    """Call once, after start-up built what lives as long as the process."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(
        YOUNG_GENERATION_THRESHOLD, MIDDLE_GENERATION_THRESHOLD, OLD_GENERATION_THRESHOLD
    )
