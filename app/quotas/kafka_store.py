"""Quota overrides and groups kept in a compacted Kafka topic, so that several replicas of the
service share one truth (as Schema Registry and Kafka Connect keep their state).

Every replica reads the topic from the beginning before it serves the quota table, then
follows it. A change is produced with acks=all and idempotence and returns only once it is
durable in Kafka and this replica has applied it (read-your-writes); every other replica
applies it as it follows the topic, within its poll interval. The topic has one partition:
one order of all changes, which every replica applies alike (app/quotas/changelog.py).

The producer and consumer are confluent-kafka's; they run on threads of their own, never on
the event loop."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from app.decision.enforcement import Enforcement
from app.kafka.topics import ensure_compacted_topic
from app.quotas.changelog import (
    Applied,
    QuotaLog,
    enforcement_key,
    enforcement_value,
    group_key,
    group_value,
    override_key,
    override_value,
)
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaValues

log = logging.getLogger("app.quotas")

PARTITION = 0
POLL_SECONDS = 0.1
TOPIC_CONFIG = {"cleanup.policy": "compact"}


class StoreUnavailable(RuntimeError):
    """The topic cannot take or show a change now (unreachable, not authorised, timed out)."""


class ChangeRefused(ValueError):
    """The change reached the topic but was not applied (e.g. a member claimed by another group)."""


class KafkaQuotaStore:
    shared = True  # other replicas write to the topic too: their changes arrive through it

    def __init__(
        self, topic: str, client_config: dict[str, Any], write_timeout_seconds: float = 5.0
    ) -> None:
        self.topic = topic
        self._client_config = dict(client_config)
        self._write_timeout = write_timeout_seconds
        self._log = QuotaLog()
        self._state = threading.Condition()
        self._next_offset = 0  # the offset after the last record applied
        self._end_at_start = 0  # where the topic ended when this replica started reading it
        self._position = 0  # where this replica reads next: past the last record or the end seen
        self._end = 0  # the topic's end as last known (the high watermark of the latest fetch)
        self._results: dict[int, Applied] = {}  # recent offsets -> what applying them did
        self._loaded = threading.Event()
        self._stop = threading.Event()
        self._listeners: list[Callable[[], object]] = []
        self._producer: Any = None
        self._producer_failed = False  # the producer reported a fatal error: replace it
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # the latest reason the topic could not be read, if any

    # -- life --------------------------------------------------------------------------------
    def start(self) -> None:
        """Start following the topic (creating it if missing); returns at once."""
        self._producer = self._new_producer()
        self._thread = threading.Thread(target=self._follow, name="quota-store", daemon=True)
        self._thread.start()

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer

        timeout_ms = int(self._write_timeout * 1000)
        return Producer(
            {
                **self._client_config,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "message.timeout.ms": timeout_ms,
                # A request to a hung broker given up after the write timeout, not the client's
                # default 30 s: the idempotent producer resumes only once its requests in flight
                # are answered or given up, so writes come back as soon as the cluster does.
                "request.timeout.ms": timeout_ms,
                "error_cb": self._on_client_error,
            }
        )

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    @property
    def loaded(self) -> bool:
        """The topic has been read from the beginning to where it ended at start-up."""
        return self._loaded.is_set()

    @property
    def lag(self) -> int:
        """Records in the topic this replica has not read yet."""
        return max(0, self._end - self._position)

    def wait_loaded(self, timeout: float) -> bool:
        return self._loaded.wait(timeout)

    def follow(self, listener: Callable[[], object]) -> None:
        """Call ``listener`` (on the store's thread) after every change applied, once loaded."""
        self._listeners.append(listener)

    # -- reads -------------------------------------------------------------------------------
    def load_overrides(self) -> dict[QuotaEntity, QuotaValues]:
        with self._state:
            return {entity: dict(values) for entity, values in self._log.overrides.items()}

    def load_groups(self) -> dict[str, QuotaGroup]:
        with self._state:
            return dict(self._log.groups)

    def load_enforcement(self) -> Enforcement | None:
        with self._state:
            return self._log.enforcement

    # -- writes ------------------------------------------------------------------------------
    def put_enforcement(self, enforcement: Enforcement, at: float) -> None:
        self._write(enforcement_key(), enforcement_value(enforcement))

    def delete_enforcement(self) -> bool:
        with self._state:
            if self._log.enforcement is None:
                return False
        self._write(enforcement_key(), None)
        return True

    def put_override(self, entity: QuotaEntity, limits: QuotaValues, at: float) -> None:
        self._write(override_key(entity), override_value(limits))

    def delete_override(self, entity: QuotaEntity) -> bool:
        with self._state:
            if entity not in self._log.overrides:
                return False
        self._write(override_key(entity), None)
        return True

    def put_group(self, group: QuotaGroup, at: float) -> None:
        self._write(group_key(group.name), group_value(group))

    def delete_group(self, name: str) -> bool:
        with self._state:
            if name not in self._log.groups:
                return False
        self._write(group_key(name), None)
        return True

    def _write(self, key: bytes, value: bytes | None) -> None:
        """Produce one record and return once this replica has applied it."""
        if not self._loaded.is_set():
            raise StoreUnavailable(
                f"the quota topic {self.topic!r} has not been read yet{self._because()}"
            )
        if self._producer_failed:
            # A fatal error leaves a producer unable to produce again: a new one takes its place.
            log.warning("quota topic producer replaced after a fatal error: %s", self.error)
            self._producer_failed = False
            failed, self._producer = self._producer, self._new_producer()
            failed.flush(0)
        delivered: list[Any] = []
        self._producer.produce(
            self.topic,
            key=key,
            value=value,
            partition=PARTITION,
            on_delivery=lambda err, msg: delivered.append((err, msg)),
        )
        deadline = time.monotonic() + self._write_timeout + 1
        while not delivered and time.monotonic() < deadline:
            self._producer.poll(0.05)
        if not delivered:
            raise StoreUnavailable(
                f"the quota topic {self.topic!r} did not acknowledge the change in time{self._because()}"
            )
        error, message = delivered[0]
        if error is not None:
            raise StoreUnavailable(
                f"the quota topic {self.topic!r} refused the change: {error.str()}"
            )
        offset = message.offset()
        with self._state:
            applied = self._state.wait_for(
                lambda: self._next_offset > offset, timeout=max(0.0, deadline - time.monotonic())
            )
            if not applied:
                raise StoreUnavailable(
                    f"the change was written to {self.topic!r} but not read back in time{self._because()}"
                )
            result = self._results.get(offset)
        if result is not None and not result.accepted:
            raise ChangeRefused(result.reason)

    def _because(self) -> str:
        return f" ({self.error})" if self.error else ""

    def _on_client_error(self, error: Any) -> None:
        self.error = error.str()
        if error.fatal():
            self._producer_failed = True

    # -- following the topic -------------------------------------------------------------------
    def _follow(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    self._ensure_topic()
                    consumer = Consumer(
                        {
                            **self._client_config,
                            "group.id": f"kafka-throttle-quota-store-{uuid.uuid4()}",  # assigned, never committed
                            "enable.auto.commit": False,
                            "auto.offset.reset": "earliest",
                            # The end of the partition as an event: the last offsets may hold
                            # nothing to read (records compacted away, an aborted transaction).
                            "enable.partition.eof": True,
                            "error_cb": self._on_client_error,
                        }
                    )
                    consumer.assign([TopicPartition(self.topic, PARTITION, self._next_offset)])
                    _, end = consumer.get_watermark_offsets(
                        TopicPartition(self.topic, PARTITION), timeout=self._write_timeout
                    )
                    self._end_at_start = self._end = end
                    if end <= self._next_offset:
                        self._mark_loaded()
                message = consumer.poll(POLL_SECONDS)
                # The end as of the latest fetch, kept by the client: no request of its own.
                cached = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, PARTITION), cached=True
                )
                if cached and cached[1] >= 0:
                    self._end = cached[1]
                if message is None:
                    continue
                error, offset = message.error(), message.offset()
                if error is not None:
                    # the client's end-of-partition event (a documented code, named with an underscore)
                    if error.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        if offset is not None:
                            self._position = max(self._position, offset)
                        self._mark_loaded()  # read up to the end, whatever offset the last record had
                    else:
                        self.error = error.str()
                    continue
                if offset is None:  # a record always has one; only events lack it
                    continue
                self._apply(offset, message.key(), message.value())
            except Exception as exc:  # noqa: BLE001 - unreachable or not authorised: keep the table, try again
                self.error = f"{type(exc).__name__}: {exc}"
                if consumer is not None:
                    consumer.close()
                    consumer = None
                self._stop.wait(1.0)
        if consumer is not None:
            consumer.close()

    def _apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        with self._state:
            result = self._log.apply(key or b"", value)
            self._results[offset] = result
            if len(self._results) > 10_000:
                for old in sorted(self._results)[: len(self._results) - 10_000]:
                    del self._results[old]
            self._next_offset = offset + 1
            self._position = max(self._position, self._next_offset)
            self.error = None
            self._state.notify_all()
            reached_end = not self._loaded.is_set() and self._next_offset >= self._end_at_start
        if not result.accepted:
            log.warning("quota topic record at offset %d not applied: %s", offset, result.reason)
        if reached_end:
            self._mark_loaded()
        elif self._loaded.is_set():
            for listener in self._listeners:
                listener()

    def _mark_loaded(self) -> None:
        if not self._loaded.is_set():
            self._loaded.set()
            with self._state:
                overrides, groups = len(self._log.overrides), len(self._log.groups)
            log.info(
                "quota topic %r read: %d overrides, %d groups; following it",
                self.topic,
                overrides,
                groups,
            )
            for listener in self._listeners:
                listener()

    def _ensure_topic(self) -> None:
        ensure_compacted_topic(
            self._client_config, self.topic, TOPIC_CONFIG, self._write_timeout, "quota topic"
        )
