"""The optional history topic: each volume row as a Kafka record (confluent-kafka Producer).

Key ``<broker id>:<log dir>``, so a compacted topic keeps the latest row of every volume; a
metadata log volume's row (``holds`` names metadata) is keyed ``<node id>:<log dir>:metadata``,
apart from the data row a combined node's shared volume also has.
The value is the history row plus the fields of the "Re-thinking" proposal's Metrics
Snapshot (brokerId, snapshotAt, hardLimit, softLimit, volumes), so a consumer written for
that record reads ours; a kept observation (``kept`` set) is republished each round with its
own ``observed_at`` as snapshotAt, so a consumer sees how old it is. Rows of rounds that observed no volume have no key and stay in
the files only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

from app.history.rows import HistoryRow

log = logging.getLogger("app.history")

# The proposal's limit types; our ratio levels are fractions, its percentages are 0-100.
_SNAPSHOT_LIMIT_TYPE = {"min-available-bytes": "MinFreeBytes", "min-available-ratio": "MinFreePercentage"}


def record_key(row: HistoryRow) -> str:
    key = f"{row['broker_id']}:{row['log_dir']}"
    return key + ":metadata" if "metadata" in (row.get("holds") or "") else key


def _snapshot_limit(kind: str, level: float) -> dict[str, Any]:
    if kind == "min-available-ratio":
        return {"type": _SNAPSHOT_LIMIT_TYPE[kind], "level": level * 100.0}
    return {"type": _SNAPSHOT_LIMIT_TYPE[kind], "level": int(level)}


def record_value(row: HistoryRow) -> dict[str, Any]:
    """The row with the Metrics Snapshot fields; without a soft limit the proposal's required
    softLimit repeats the hard limit (throttling starts where pausing does)."""
    kind = row["limit_kind"]
    soft = row["soft_limit"] if row["soft_limit"] is not None else row["hard_limit"]
    total, usable = row["total_bytes"], row["usable_bytes"]
    return {
        **row,
        "brokerId": str(row["broker_id"]),
        # When the volume was measured: a kept observation's own time, not the round's.
        "snapshotAt": row["observed_at"] or row["time"],
        "hardLimit": _snapshot_limit(kind, row["hard_limit"]),
        "softLimit": _snapshot_limit(kind, soft),
        "volumes": [{"volumeName": row["log_dir"], "capacity": total, "consumed": total - usable if total >= 0 and usable >= 0 else -1}],
    }


class HistoryTopic:
    """Publishes rows without waiting for acknowledgements; failures are counted, not retried
    beyond the producer's own retries (the files are the record of truth)."""

    def __init__(self, topic: str, producer_config: dict[str, str], on_error: Callable[[int], None]) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self._on_error = on_error
        self._producer = Producer({**producer_config, "error_cb": self._client_error})

    def _client_error(self, error: Any) -> None:
        log.warning("history topic producer: %s", error)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._on_error(1)

    def publish(self, rows: Iterable[HistoryRow]) -> None:
        for row in rows:
            if row["broker_id"] is None:
                continue
            try:
                self._producer.produce(
                    self.topic, key=record_key(row), value=json.dumps(record_value(row), separators=(",", ":")), on_delivery=self._delivered
                )
            except BufferError:  # the producer's queue is full: the broker is not keeping up
                self._on_error(1)
        self._producer.poll(0)

    def close(self, timeout_seconds: float = 5.0) -> None:
        remaining = self._producer.flush(timeout_seconds)
        if remaining:
            self._on_error(remaining)
