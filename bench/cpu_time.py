"""CPU time of a piece of work in this process, for the benchmarks that compare in-process costs."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable


def cpu_ms(fn: Callable[[], object]) -> float:
    """This process's CPU milliseconds for one call of ``fn``, after a collection."""
    gc.collect()
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1000


def median_cpu_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median of ``repeat`` calls' CPU milliseconds."""
    return statistics.median(cpu_ms(fn) for _ in range(repeat))
