"""How often one node may report its volumes: at most once per MIN_INTERVAL_SECONDS each (which
nodes may report at all is app/server/runtime/node_admission.py's to say, before this counts them). A
report refused here is answered 429 with Retry-After; the shim keeps polling its quotas whatever
the answer."""

from __future__ import annotations

import math

# A shim reports once per poll interval (5 s by default, 100 ms at the least); one report a
# second per node keeps a misconfigured or looping node from costing the service more than that.
MIN_INTERVAL_SECONDS = 1.0
# Nodes remembered before those not heard from within the interval are forgotten (only admitted
# nodes are counted: the registered brokers and a few others).
MAX_NODES = 10_000


class ReportRate:
    def __init__(self, min_interval: float = MIN_INTERVAL_SECONDS) -> None:
        self._min_interval = min_interval
        self._last: dict[int, float] = {}  # node id -> when its latest report was taken
        self.taken = 0  # reports taken so far: the node view may have changed when it moves

    def retry_after(self, node_id: int, now: float) -> int | None:
        """Whole seconds until ``node_id`` may report again, or None when it may now (and the
        report is counted)."""
        last = self._last.get(node_id)
        if last is not None and now - last < self._min_interval:
            return max(1, math.ceil(last + self._min_interval - now))
        if len(self._last) > 2 * MAX_NODES:  # nodes long gone: only the recent ones matter
            self._last = {n: t for n, t in self._last.items() if now - t < self._min_interval}
        self._last[node_id] = now
        self.taken += 1
        return None
