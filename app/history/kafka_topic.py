"""The optional history topic: the history's lines as Kafka records (confluent-kafka Producer).

Each record's value is one JSON object, the line the files get (format 1: a full row; format
2: a round, volume or gone row, ``app/history/compact.py``), so a reader of the topic (the
report's ``--input``) reads the same rows as one of the files. The topic is time-retained, not
compacted: the service creates it, when it is missing, with ``cleanup.policy=delete`` and
``retention.ms`` from ``history.retention.days`` (a compacted topic keeps only the latest row
of each key, no history); a topic that exists is left as it is, with a warning when it is
compacted.

Key ``<broker id>:<log dir>`` on a volume's rows (and gone rows); a metadata log volume's row
(``holds`` names metadata) is keyed ``<node id>:<log dir>:metadata``, apart from the data row a
combined node's shared volume also has. Round rows, and format 1's rows without a volume, have
no key. A volume row's value also has the fields of the "Re-thinking" proposal's Metrics
Snapshot (brokerId, snapshotAt, hardLimit, softLimit, volumes), so a consumer written for that
record reads ours; the reader of the history steps over them. A kept observation's row is
stamped with its own ``observed_at`` as snapshotAt, so a consumer sees how old it is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from app.history.rows import HistoryRow
from app.history.schema import GONE, ROUND, ROW_KIND, SHARED_FIELDS

log = logging.getLogger("app.history")

# The proposal's limit types; our ratio levels are fractions, its percentages are 0-100.
_SNAPSHOT_LIMIT_TYPE = {
    "min-available-bytes": "MinFreeBytes",
    "min-available-ratio": "MinFreePercentage",
}


def record_key(row: HistoryRow) -> str:
    key = f"{row['broker_id']}:{row['log_dir']}"
    return key + ":metadata" if "metadata" in (row.get("holds") or "") else key


def _snapshot_limit(kind: str, level: float) -> dict[str, Any]:
    if kind == "min-available-ratio":
        return {"type": _SNAPSHOT_LIMIT_TYPE[kind], "level": level * 100.0}
    return {"type": _SNAPSHOT_LIMIT_TYPE[kind], "level": int(level)}


def record_value(row: HistoryRow, shared: dict[str, Any] | None = None) -> dict[str, Any]:
    """The row with the Metrics Snapshot fields; without a soft limit the proposal's required
    softLimit repeats the hard limit (throttling starts where pausing does). A format 2 data
    volume's row takes its limits from ``shared`` (those of the latest round row giving them);
    round and gone rows are as written."""
    if row.get(ROW_KIND) in (ROUND, GONE):
        return row
    limits = row if row.get("limit_kind") is not None else (shared or {})
    kind = limits.get("limit_kind")
    if kind is None:
        return row
    soft_limit = limits.get("soft_limit")
    soft = soft_limit if soft_limit is not None else limits["hard_limit"]
    total, usable = row["total_bytes"], row["usable_bytes"]
    return {
        **row,
        "brokerId": str(row["broker_id"]),
        # When the volume was measured: a kept observation's own time, not the round's.
        "snapshotAt": row.get("observed_at") or row["time"],
        "hardLimit": _snapshot_limit(kind, limits["hard_limit"]),
        "softLimit": _snapshot_limit(kind, soft),
        "volumes": [
            {
                "volumeName": row["log_dir"],
                "capacity": total,
                "consumed": total - usable if total >= 0 and usable >= 0 else -1,
            }
        ],
    }


class HistoryTopic:
    """Publishes rows without waiting for acknowledgements; failures are counted, not retried
    beyond the producer's own retries (the files are the record of truth)."""

    def __init__(
        self,
        topic: str,
        producer_config: dict[str, str],
        on_error: Callable[[int], None],
        retention_ms: int | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self._on_error = on_error
        self._config = dict(producer_config)
        self._retention_ms = retention_ms
        self._ensured_at: float | None = None if retention_ms is not None else float("inf")
        self._shared: dict[str, Any] = {}
        self._producer = Producer({**producer_config, "error_cb": self._client_error})

    def _client_error(self, error: Any) -> None:
        log.warning("history topic producer: %s", error)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self._on_error(1)

    def _ensure_topic(self) -> None:
        """Create the topic time-retained when it is missing (on the writer thread, before the
        first rows; tried again a minute after a failure, meanwhile the producer waits for it)."""
        now = time.monotonic()
        if self._ensured_at is not None and (
            self._ensured_at == float("inf") or now - self._ensured_at < 60
        ):
            return
        self._ensured_at = now
        try:
            ensure_history_topic(self._config, self.topic, self._retention_ms or 0)
            self._ensured_at = float("inf")
        except Exception as exc:  # noqa: BLE001 - whatever failed, the check is tried again in a minute
            log.warning(
                "history topic %r not checked or created (%s); tried again in a minute",
                self.topic,
                exc,
            )

    def publish(self, rows: Iterable[HistoryRow]) -> None:
        self._ensure_topic()
        for row in rows:
            if row.get(ROW_KIND) == ROUND and row.get("shared"):
                self._shared = {name: row.get(name) for name in SHARED_FIELDS}
            if row.get(ROW_KIND) is None and row["broker_id"] is None:
                continue  # format 1's row without a volume: the files only, as before
            key = record_key(row) if row.get("broker_id") is not None else None
            try:
                self._producer.produce(
                    self.topic,
                    key=key,
                    value=json.dumps(record_value(row, self._shared), separators=(",", ":")),
                    on_delivery=self._delivered,
                )
            except BufferError:  # the producer's queue is full: the broker is not keeping up
                self._on_error(1)
        self._producer.poll(0)

    def close(self, timeout_seconds: float = 5.0) -> None:
        remaining = self._producer.flush(timeout_seconds)
        if remaining:
            self._on_error(remaining)


def ensure_history_topic(
    client_config: dict[str, str], topic: str, retention_ms: int, timeout: float = 10.0
) -> None:
    """Create ``topic`` with ``cleanup.policy=delete`` and ``retention.ms`` unless it exists; warn
    when an existing one is compacted (it keeps the latest row of each volume, no history)."""
    from app.kafka.topics import ensure_topic

    config = {"cleanup.policy": "delete", "retention.ms": str(retention_ms)}
    ensure_topic(client_config, topic, config, timeout, "history topic", _warn_if_compacted)


def _warn_if_compacted(admin: Any, topic: str, timeout: float = 10.0) -> None:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=timeout)
    policy = configs.get("cleanup.policy")
    if policy is not None and "compact" in (policy.value or ""):
        log.warning(
            "history topic %r is compacted (cleanup.policy=%s): it keeps the latest row of each volume, not the history; "
            "set cleanup.policy=delete and retention.ms for the report to read it",
            topic,
            policy.value,
        )
