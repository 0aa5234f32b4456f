"""How often one node may report its volumes: a token bucket per node, one token every
MIN_INTERVAL_SECONDS and at most BURST of them saved (which nodes may report at all is
app/server/runtime/node_admission.py's to say, before this counts them). A report refused here
is answered 429 with Retry-After; the shim keeps polling its quotas whatever the answer.

A shim reports at its poll interval and, with the levels the service gives it (``report_on`` in
GET /quotas), at once when a volume crosses one or moves by more than a share of its total: a
crossing must not wait, so a few reports in a row are taken (the burst), then one per interval.
A misconfigured or looping node costs the service at most four reports a second."""

from __future__ import annotations

import math

# One token per this many seconds: the shims' min_interval_ms (report_on) is this.
MIN_INTERVAL_SECONDS = 0.25
# Tokens a node may save: reports taken back to back after a quiet spell.
BURST = 4
# Nodes remembered before those whose bucket is full again are forgotten (only admitted nodes
# are counted: the registered brokers and a few others).
MAX_NODES = 10_000


class ReportRate:
    def __init__(self, min_interval: float = MIN_INTERVAL_SECONDS, burst: int = BURST) -> None:
        self._min_interval = min_interval
        self._burst = float(burst)
        # node id -> (tokens left after its latest report, when it was taken)
        self._buckets: dict[int, tuple[float, float]] = {}
        self.taken = 0  # reports taken so far: the node view may have changed when it moves

    def retry_after(self, node_id: int, now: float) -> int | None:
        """Whole seconds until ``node_id`` may report again (at least 1), or None when it may
        now (and the report is counted)."""
        bucket = self._buckets.get(node_id)
        if bucket is None:
            tokens = self._burst
        else:
            left, at = bucket
            tokens = min(self._burst, left + max(0.0, now - at) / self._min_interval)
        if tokens < 1.0:
            return max(1, math.ceil((1.0 - tokens) * self._min_interval))
        if len(self._buckets) > 2 * MAX_NODES:  # nodes long gone: only those with a debt matter
            full = self._burst * self._min_interval
            self._buckets = {n: b for n, b in self._buckets.items() if now - b[1] < full}
        self._buckets[node_id] = (tokens - 1.0, now)
        self.taken += 1
        return None
