"""One decision however many replicas: an elected decider whose state every replica serves.

With the Kafka-backed quota store, the replicas share a second compacted topic, the state topic
(the quota topic's name with ``-state`` appended, one partition). Among them one is the
decider, elected with Kafka's group protocol as Kafka Connect and Schema Registry elect their
leaders: every replica joins the group ``<state topic>-decider`` on that one partition, and the
member it is assigned to is the decider. Only the decider observes the cluster (DescribeCluster
and DescribeLogDirs rounds); after every round, and within a second of node reports, it
writes a snapshot of its decider (app/decision/snapshot.py) under the key ``snapshot``.

Every replica follows the topic from the beginning. A replica that is not the decider mirrors
each snapshot it reads: its decider becomes the decider's, so it serves the same factor, the
same volumes and the same ETag. A node report (``PUT /nodes/{id}/volumes``) taken by any
replica is applied there at once and written under ``node/<id>``; every other replica applies it
as it reads it (within the follow loop's 100 ms poll), and the decider's next snapshot carries
it. A mirror re-applies the reports it read after the ones that snapshot had taken (its
``reports-through`` offset), so a report never leaves a replica's view and comes back.

A decider that stops (SIGTERM) leaves the group at once; one that dies is replaced after the
group's session timeout (6 s). A decider that loses its place without a successor (the group
coordinator's broker is down: nobody can be elected) goes on deciding until it reads a snapshot
another replica wrote; for that moment two replicas may decide, and the others mirror whichever
snapshot came last. The replica elected resumes from the last snapshot it mirrored:
until its own first round it serves that decision as last-valid, ``resumed_from`` set, and its
first round decides exactly as the old decider would have. Meanwhile every replica serves its
last mirror, whose validity is judged when read as always: never a decision older than the
validity as current, then the fallback. Why an elected decider and not a topic every replica
decides from: two replicas observing the same cluster at different instants see different
bytes and different trends, and would publish different factors and ETags.

Producer and consumers are confluent-kafka's, on threads of their own; what they read is handed
to the event loop, where the decider lives."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.clock import Clock
from app.decision.snapshot import SnapshotError, decode_node_report, encode_node_report, to_json
from app.kafka.topics import ensure_compacted_topic
from app.observation.node_reports import NodeReport

if TYPE_CHECKING:
    from app.decision.decider import ThrottleDecider
    from app.decision.snapshot import Restored
    from app.server.runtime.loop import ObservationLoop
    from app.server.runtime.node_intake import NodeIntake

log = logging.getLogger("app.state")

PARTITION = 0
POLL_SECONDS = 0.1
SNAPSHOT_KEY = b"snapshot"
NODE_KEY_PREFIX = b"node/"
# A snapshot of 12,000 volumes with their trends is a few MiB; the topic takes up to this.
MAX_RECORD_BYTES = 64 * 1024 * 1024
SESSION_TIMEOUT_MS = (
    6000  # the least a broker allows by default: how long a dead decider holds its place
)


def state_topic_name(quota_store_topic: str) -> str:
    return f"{quota_store_topic}-state"


class SharedState:
    """The state topic: elects the decider, carries its snapshots and the node reports.

    ``on_snapshot(data)`` and ``on_node_report(report)`` are called on the event loop for what
    other replicas wrote; ``on_leadership(leading)`` when this replica becomes or stops being
    the decider."""

    def __init__(
        self, topic: str, client_config: dict[str, Any], write_timeout_seconds: float = 5.0
    ) -> None:
        self.topic = topic
        self.replica_id = uuid.uuid4().hex
        self._client_config = dict(client_config)
        self._write_timeout = write_timeout_seconds
        self._stop = threading.Event()
        self._loaded = threading.Event()
        self._leading = threading.Event()
        self._assigned_place = False  # the group assigned this replica the partition
        self._threads: list[threading.Thread] = []
        self._producer: Any = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        # Decodes a snapshot into what on_snapshot takes (on the follower's thread), then
        # on_snapshot takes it on the event loop.
        self.prepare: Callable[[bytes], Any] = lambda data: data
        self.on_snapshot: Callable[[Any, int], None] = lambda prepared, through: None
        self.on_node_report: Callable[[NodeReport, int], None] = lambda report, offset: None
        self.on_leadership: Callable[[bool], None] = lambda leading: None
        self.on_loaded: Callable[[], None] = lambda: None  # the topic read to its end at start-up
        self._latest_at_load: tuple[bytes, int] | None = (
            None  # the newest snapshot while reading to the end
        )
        self.reports_through = -1  # the offset of the last node report this replica applied
        self.snapshots_written = 0
        self.failures = 0  # records the topic did not take
        self.snapshots_mirrored = 0
        self.error: str | None = None

    # -- life ----------------------------------------------------------------------------------
    def start(self, event_loop: asyncio.AbstractEventLoop) -> None:
        from confluent_kafka import Producer

        self._event_loop = event_loop
        self._producer = Producer(
            {
                **self._client_config,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "compression.type": "zstd",
                "message.max.bytes": MAX_RECORD_BYTES,
                "message.timeout.ms": int(self._write_timeout * 1000),
                "error_cb": self._on_client_error,
            }
        )
        for target, name in ((self._follow, "state-follower"), (self._elect, "state-election")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        """Leave the group (another replica takes over at once) and stop following."""
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        if self._producer is not None:
            self._producer.flush(5)
            self._producer = None

    @property
    def loaded(self) -> bool:
        """The topic has been read to where it ended when this replica started."""
        return self._loaded.is_set()

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    def wait_loaded(self, timeout: float) -> bool:
        return self._loaded.wait(timeout)

    # -- SavedState ----------------------------------------------------------------------------
    def load(self) -> bytes | None:
        """The newest snapshot in the topic (after ``wait_loaded``)."""
        return self._latest_at_load[0] if self._latest_at_load is not None else None

    @property
    def latest_at_load(self) -> tuple[bytes, int] | None:
        """The newest snapshot the topic held when this replica started, with its reports-through."""
        return self._latest_at_load

    def save(self, snapshot: bytes) -> None:
        """Write the decider's snapshot, while this replica is the decider."""
        if not self.leading or self._producer is None:
            return
        headers = [
            ("replica", self.replica_id.encode()),
            ("reports-through", str(self.reports_through).encode()),
        ]
        self._produce(SNAPSHOT_KEY, snapshot, headers)
        self.snapshots_written += 1

    def node_report_taken(self, report: NodeReport) -> None:
        """A node report this replica took: every other replica applies it as it reads it."""
        if self._producer is None:
            return
        value = to_json(encode_node_report(report))
        self._produce(
            NODE_KEY_PREFIX + str(report.node_id).encode(),
            value,
            [("replica", self.replica_id.encode())],
        )

    def _produce(self, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        try:
            self._producer.produce(
                self.topic,
                key=key,
                value=value,
                partition=PARTITION,
                headers=headers,
                on_delivery=self._delivered,
            )
            self._producer.poll(0)
        except BufferError as exc:  # the topic is not taking writes; the next snapshot tries again
            self.failures += 1
            self.error = f"{type(exc).__name__}: {exc}"
        # e.g. a record larger than the producer takes (KafkaException) or a closed producer
        # (RuntimeError); blind, because a state topic that cannot be written must not fail the
        # observation round that saves to it.
        except Exception as exc:  # noqa: BLE001
            self.failures += 1
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("cannot write to the state topic %r: %s", self.topic, self.error)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failures += 1
            self.error = error.str()

    def _on_client_error(self, error: Any) -> None:
        self.error = error.str()

    def _call_on_loop(self, call: Callable[[], None]) -> None:
        loop = self._event_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(call)

    # -- following the topic -------------------------------------------------------------------
    def _follow(self) -> None:
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = None
        next_offset, end_at_start = 0, None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    self._ensure_topic()
                    consumer = Consumer(
                        {
                            **self._client_config,
                            "group.id": f"{self.topic}-reader-{self.replica_id}",  # assigned, never committed
                            "enable.auto.commit": False,
                            "auto.offset.reset": "earliest",
                            "enable.partition.eof": True,
                            "fetch.max.bytes": MAX_RECORD_BYTES,
                            "receive.message.max.bytes": MAX_RECORD_BYTES + 1024 * 1024,
                            "error_cb": self._on_client_error,
                        }
                    )
                    consumer.assign([TopicPartition(self.topic, PARTITION, next_offset)])
                    if end_at_start is None:
                        _, end_at_start = consumer.get_watermark_offsets(
                            TopicPartition(self.topic, PARTITION), timeout=self._write_timeout
                        )
                        if end_at_start <= next_offset:
                            self._mark_loaded()
                message = consumer.poll(POLL_SECONDS)
                if message is None:
                    continue
                error = message.error()
                if error is not None:
                    # confluent-kafka's public name for librdkafka's internal end-of-partition code
                    if error.code() == KafkaError._PARTITION_EOF:  # noqa: SLF001
                        self._mark_loaded()
                    else:
                        self.error = error.str()
                    continue
                offset = message.offset()
                if offset is None:  # only an error carries none; answered as any failure below
                    raise RuntimeError("a state topic record without an offset")
                next_offset = offset + 1
                # The stub gives a consumed record's headers the type of the ones a producer takes
                # (str values too, or a dict); librdkafka hands (str, bytes) pairs.
                headers = dict(message.headers() or [])
                self._read(offset, message.key() or b"", message.value(), headers)  # type: ignore[arg-type]
                if (
                    not self._loaded.is_set()
                    and end_at_start is not None
                    and next_offset >= end_at_start
                ):
                    self._mark_loaded()
            # Unreachable or not authorised: keep what was read, try again. Blind, because an
            # exception leaving this thread would stop following the topic for good.
            except Exception as exc:  # noqa: BLE001
                self.error = f"{type(exc).__name__}: {exc}"
                if consumer is not None:
                    consumer.close()
                    consumer = None
                self._stop.wait(1.0)
        if consumer is not None:
            consumer.close()

    def _read(
        self, offset: int, key: bytes, value: bytes | None, headers: dict[str, bytes]
    ) -> None:
        if value is None:
            return
        own = headers.get("replica") == self.replica_id.encode()
        if key == SNAPSHOT_KEY:
            try:
                through = int(headers.get("reports-through", b"-1"))
            except ValueError:
                through = -1
            if not self._loaded.is_set():
                self._latest_at_load = (
                    value,
                    through,
                )  # only the newest one is mirrored, once loaded
            elif not own:
                if self.leading and not self._assigned_place:
                    self._set_leading(
                        False
                    )  # another replica decides now: its snapshot is the truth
                try:  # decoded here, off the event loop (a 12,000-volume snapshot takes ~0.1 s)
                    prepared = self.prepare(value)
                except SnapshotError as exc:
                    log.warning(
                        "cannot mirror the decider's snapshot at offset %d: %s", offset, exc
                    )
                    return
                self._call_on_loop(lambda: self._mirror(prepared, through))
        elif key.startswith(NODE_KEY_PREFIX):
            if own:  # applied when this replica took it
                self.reports_through = max(self.reports_through, offset)
                return
            try:
                report = decode_node_report(json.loads(value))
            except (ValueError, KeyError, TypeError, SnapshotError) as exc:
                log.warning("state topic record at offset %d is not a node report: %s", offset, exc)
                return
            self._call_on_loop(lambda: self._node_report(report, offset))

    def _mirror(self, prepared: Any, through: int) -> None:
        if self.leading:
            return  # the decider's own state is the truth; a former decider's late snapshot is not
        self.snapshots_mirrored += 1
        self.on_snapshot(prepared, through)

    def _node_report(self, report: NodeReport, offset: int) -> None:
        self.reports_through = max(self.reports_through, offset)
        self.on_node_report(report, offset)

    def _mark_loaded(self) -> None:
        if self._loaded.is_set():
            return
        self._loaded.set()
        self._call_on_loop(self.on_loaded)
        log.info(
            "state topic %r read%s; following it",
            self.topic,
            "" if self._latest_at_load else " (no snapshot in it yet)",
        )

    # -- the election --------------------------------------------------------------------------
    def _elect(self) -> None:
        from confluent_kafka import Consumer

        consumer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    if not self._loaded.wait(1.0):
                        continue  # a replica runs for decider only once it holds the latest state
                    consumer = Consumer(
                        {
                            **self._client_config,
                            "group.id": f"{self.topic}-decider",
                            "enable.auto.commit": False,
                            "session.timeout.ms": SESSION_TIMEOUT_MS,
                            "heartbeat.interval.ms": 1000,
                            # The decider keeps its place when replicas join or leave: no handover then.
                            "partition.assignment.strategy": "cooperative-sticky",
                            "auto.offset.reset": "latest",
                            "error_cb": self._on_client_error,
                        }
                    )
                    consumer.subscribe(
                        [self.topic],
                        on_assign=self._assigned,
                        on_revoke=self._revoked,
                        on_lost=self._revoked,
                    )
                consumer.poll(0.5)  # heartbeats and rebalances; records are not read here
                assigned = consumer.assignment()
                if assigned:
                    consumer.pause(
                        assigned
                    )  # the follower reads the topic; this member only holds its place
            # Blind, because an exception leaving this thread would end this replica's candidacy
            # for good; whatever it is, the replica stops deciding and joins again.
            except Exception as exc:  # noqa: BLE001
                self.error = f"{type(exc).__name__}: {exc}"
                self._set_leading(False)
                if consumer is not None:
                    consumer.close()
                    consumer = None
                self._stop.wait(1.0)
        self._set_leading(False)
        if consumer is not None:
            consumer.close()  # leaves the group: another replica is elected at once

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        # Cooperative rebalancing hands over only what moves: an empty list changes nothing.
        if any(p.partition == PARTITION for p in partitions):
            self._assigned_place = True
            self._set_leading(True)

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        """The place is taken away: by a rebalance that gives it to another replica, or because
        the group's coordinator cannot be reached (its broker down). This replica keeps deciding
        until it reads a snapshot another replica wrote: with no coordinator nobody else can be
        elected, and a cluster in trouble is when a decision is needed most."""
        if any(p.partition == PARTITION for p in partitions):
            self._assigned_place = False
            if self.leading:
                log.info(
                    "this replica lost its place as the decider; it decides until another replica's snapshot is read"
                )

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading.is_set():
            return
        if leading:
            self._leading.set()
        else:
            self._leading.clear()
        log.info(
            "this replica %s the decider (state topic %r)",
            "is now" if leading else "is no longer",
            self.topic,
        )
        self._call_on_loop(lambda: self.on_leadership(leading))

    def _ensure_topic(self) -> None:
        config = {
            "max.message.bytes": str(MAX_RECORD_BYTES),
            # The snapshot key is rewritten every round: compact it soon, keep what a reader needs.
            "segment.ms": "600000",
            "min.cleanable.dirty.ratio": "0.1",
        }
        ensure_compacted_topic(
            self._client_config, self.topic, config, self._write_timeout, "state topic"
        )


class Replica:
    """Binds the state topic to this replica's loop and decider: mirrors the decider's snapshots
    while another replica decides, applies the node reports other replicas took, and takes over
    when elected."""

    def __init__(
        self, shared: SharedState, loop: ObservationLoop, intake: NodeIntake, clock: Clock
    ) -> None:
        self.shared = shared
        self.loop = loop
        self.intake = intake
        self.clock = clock
        # The node reports read from the topic by node, with their offsets: re-applied over a
        # snapshot that had not taken them yet.
        self._read: dict[int, tuple[int, NodeReport]] = {}
        # When the snapshot this replica mirrored last was saved; None once it observed itself.
        self._mirrored_from: float | None = None
        shared.prepare = lambda data: loop.decider.mirrored(data, clock())
        shared.on_snapshot = self.adopt
        shared.on_node_report = self.node_report
        shared.on_leadership = self.leadership
        shared.on_loaded = self.mirror_loaded
        self._loaded_mirrored = False
        loop.may_observe = lambda: shared.leading
        intake.shared = shared.node_report_taken
        loop.saved_state = shared

    def adopt(self, prepared: tuple[ThrottleDecider, Restored], reports_through: int) -> None:
        """Serve the decider's state (decoded by ``mirrored`` off the event loop), with the node
        reports read since that snapshot was taken applied over it."""
        fresh, restored = prepared
        decider = self.loop.decider
        decider.adopt(fresh)
        self._mirrored_from = restored.saved_at
        book = decider.metadata.book
        for node_id, (offset, report) in list(self._read.items()):
            if offset <= reports_through:
                del self._read[node_id]
                continue
            held = book.latest(node_id)
            if held is None or held.received_at < report.received_at:
                decider.record_node_report(report)
        self.loop.publisher.publish()

    def mirror_loaded(self) -> None:
        """Mirror the newest snapshot the topic held when this replica started, once: at
        start-up before serving, or, when the topic was read only after the start-up wait, as
        soon as it is (the follower hands that moment to the event loop)."""
        if self._loaded_mirrored:
            return
        self._loaded_mirrored = True
        latest = self.shared.latest_at_load
        if latest is not None:
            try:
                prepared = self.loop.decider.mirrored(latest[0], self.clock())
            except SnapshotError as exc:
                log.warning("cannot mirror the decider's latest snapshot: %s", exc)
                return
            self.adopt(prepared, latest[1])

    def node_report(self, report: NodeReport, offset: int) -> None:
        self._read[report.node_id] = (offset, report)
        self.intake.take(report, shared=True)

    def leadership(self, leading: bool) -> None:
        if not leading:
            return
        decider = self.loop.decider
        if self._mirrored_from is not None and decider.latest_round is not None:
            # Until its own first round it serves the last decision it mirrored, as last-valid.
            decider.resumed_from = self._mirrored_from
            decider.holder.resumed()
        self._mirrored_from = None
        self.loop.publisher.publish()
        self.loop.save_state()
        self.loop.observe_soon()
