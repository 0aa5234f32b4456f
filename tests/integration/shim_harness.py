"""What the tests of the shim inside real brokers share: a 3-broker KRaft cluster with the shim
as every broker's client.quota.callback.class, producers whose throttle_cb reports each
throttled produce response, a watch on a broker's volume, and the shim's broker log lines.

Numbers: check interval 1 s, shim poll interval 0.5 s, hard limit 24 MiB available on 64 MiB
volumes, the default quota floor of 64 KiB/s, no base produce quota (unlimited while OPEN)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.devcluster import LocalKafkaCluster

from .conftest import MiB, VOLUME_MIB

CHECK = 1.0
POLL = 0.5
BOUND = CHECK + POLL + 5.0  # the bound on reaction and recovery
HARD_LIMIT = 24 * MiB
FLOOR = 64 * 1024
# Offered load per broker: well above the floor, well below what fills a 64 MiB volume
# between two retention checks.
LOAD_RATE = 3 * MiB
OPERATOR = ("operator", "operator-secret")  # an excluded principal
SERVICE_SETTINGS = {
    "storage_check_interval": "PT1S",
    "kafka_request_timeout": "PT0.8S",
    "storage_per_volume_limit_min_available_bytes": str(HARD_LIMIT),
    "excluded_principal_name_list": f"User:{OPERATOR[0]}",
}
SHIM_TABLE_LINE = "Throttle service shim: table from"


@contextmanager
def running_shim_cluster(
    shim_jar: Path, service_port: int, shim_config: dict[str, str] | None = None, **cluster_options: Any
) -> Iterator[LocalKafkaCluster]:
    """3 brokers with the shim as every broker's quota callback polling the service at
    ``service_port``, a SASL operator user, and a ``load`` topic with one partition per broker.
    ``shim_config`` adds to or replaces the brokers' shim properties (e.g. its node token or poll
    interval); ``cluster_options`` go to LocalKafkaCluster (e.g. ``extra_log_dirs``)."""
    cluster = LocalKafkaCluster(
        brokers=3,
        log_dir_size_mib=VOLUME_MIB,
        extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        extra_classpath=[shim_jar],
        broker_config={
            "client.quota.callback.class": "io.kafkathrottle.shim.ServiceQuotaCallback",
            "client.quota.callback.service.url": f"http://127.0.0.1:{service_port}",
            "client.quota.callback.service.poll.interval.ms": str(int(POLL * 1000)),
            "client.quota.callback.service.long.poll.wait.ms": "10000",
            "client.quota.callback.service.request.timeout.ms": "2000",
            "client.quota.callback.service.fallback.factor": "0.0",
            "log.segment.delete.delay.ms": "500",
            "log.retention.check.interval.ms": "500",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'user_{OPERATOR[0]}="{OPERATOR[1]}";'
            ),
            **(shim_config or {}),
        },
        controller_config={"broker.session.timeout.ms": "3000"},
        **cluster_options,
    )
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        # Small segments and retention keep the load topic from filling the volumes itself.
        load = NewTopic(
            "load",
            num_partitions=3,
            replica_assignment=[[1], [2], [3]],
            config={"segment.bytes": str(MiB), "retention.bytes": str(MiB), "retention.ms": "2000"},
        )
        admin.create_topics([load])["load"].result(timeout=30)
        yield cluster
    finally:
        cluster.stop()


def operator_config(cluster: LocalKafkaCluster) -> dict:
    return {
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": OPERATOR[0],
        "sasl.password": OPERATOR[1],
    }


class LoadProducer:
    """Produces without pause, one producer and thread per partition (so a throttled broker
    does not fill a queue shared with the others), and records acknowledged bytes and every
    throttle event (broker id, throttle time) the brokers report."""

    def __init__(
        self,
        config: dict,
        topic: str = "load",
        partitions: int | Sequence[int] = 3,
        message_bytes: int = 4096,
        rate_per_partition: float = LOAD_RATE,
    ) -> None:
        self.rate_per_partition = rate_per_partition
        self.acked: list[tuple[float, int]] = []
        self.throttles: list[tuple[float, int, float]] = []
        self.errors: list[str] = []
        self.topic = topic
        self.payload = os.urandom(message_bytes)
        self._stop = threading.Event()
        self.partitions = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
        self.producers = [
            Producer(
                {
                    "acks": "1",
                    "linger.ms": 5,
                    "batch.size": 65536,
                    "queue.buffering.max.kbytes": 2048,
                    "compression.type": "none",
                    "throttle_cb": self._on_throttle,
                    **config,
                }
            )
            for _ in self.partitions
        ]
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(self.partitions))]
        for thread in self._threads:
            thread.start()

    def _on_throttle(self, event) -> None:
        if event.throttle_time > 0:
            self.throttles.append((time.monotonic(), event.broker_id, event.throttle_time))

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((time.monotonic(), len(msg.value())))
        else:
            self.errors.append(str(err))

    def _run(self, index: int) -> None:
        # A token bucket with a 0.2 s burst: a steady offered load that does not make up for
        # lost time after a pause.
        producer = self.producers[index]
        partition = self.partitions[index]
        size = len(self.payload)
        tokens, last = 0.0, time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            tokens = min(tokens + (now - last) * self.rate_per_partition, 0.2 * self.rate_per_partition)
            last = now
            if tokens < size:
                producer.poll(0.005)
                continue
            try:
                producer.produce(self.topic, self.payload, partition=partition, on_delivery=self._delivered)
                tokens -= size
                producer.poll(0)
            except BufferError:
                producer.poll(0.05)

    def bytes(self, start: float, end: float) -> int:
        """Acknowledged bytes in [start, end)."""
        return sum(size for at, size in list(self.acked) if start <= at < end)

    def rate(self, start: float, end: float) -> float:
        """Acknowledged bytes per second in [start, end)."""
        return self.bytes(start, end) / (end - start)

    def throttled_brokers(self, since: float) -> dict[int, float]:
        """Broker id -> time of its first throttle event since ``since``."""
        first: dict[int, float] = {}
        for at, broker, _ in list(self.throttles):
            if at >= since and broker not in first:
                first[broker] = at
        return first

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        for producer in self.producers:
            producer.purge()
            producer.flush(5)
        self.producers = []  # destroyed now, not when the cluster is already gone


class VolumeWatch:
    """Watches one broker's volume with statvfs (what Kafka reports as UsableBytes) and
    records when its usable bytes cross the hard limit, each way."""

    def __init__(self, path: Path, limit: int = HARD_LIMIT) -> None:
        self.path = path
        self.limit = limit
        self.crossed_at: float | None = None
        self.freed_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def usable(self) -> int:
        stats = os.statvfs(self.path)
        return stats.f_bavail * stats.f_frsize

    def _run(self) -> None:
        while not self._stop.is_set():
            usable = self.usable()
            now = time.monotonic()
            if self.crossed_at is None and usable <= self.limit:
                self.crossed_at = now
            elif self.crossed_at is not None and self.freed_at is None and usable > self.limit:
                self.freed_at = now
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def wait_until(condition, timeout: float, what: str, detail=lambda: "") -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic()
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout}s: {what}\n{detail()}")


def broker_log_count(cluster: LocalKafkaCluster, text: str) -> dict[int, int]:
    return {bid: cluster.server_log(bid).read_text(errors="replace").count(text) for bid in cluster.broker_ids}


def shim_lines(cluster: LocalKafkaCluster) -> str:
    return "\n".join(
        f"broker {bid}: {line}"
        for bid in cluster.broker_ids
        for line in cluster.server_log(bid).read_text(errors="replace").splitlines()
        if "Throttle service shim" in line
    )


def wait_for_shims(cluster: LocalKafkaCluster, before: dict[int, int], timeout: float = 15) -> None:
    """Until every broker's shim logged a (new) table from the service."""
    wait_until(
        lambda: all(count > before[bid] for bid, count in broker_log_count(cluster, SHIM_TABLE_LINE).items()),
        timeout,
        "every broker's shim holding a table from the service",
    )


class VolumeRamp:
    """Drives a broker's volume along a straight line with a filler file on its tmpfs (what
    statvfs, and so DescribeLogDirs, reports): usable bytes go from ``start`` to ``end`` over
    ``seconds``, then stay at ``end`` until ``free()`` deletes the file. Kafka itself writes
    nothing for it, so a producer elsewhere is measured against a factor that falls at a known
    pace."""

    def __init__(self, mount_point: Path, start: int, end: int, seconds: float) -> None:
        self.path = mount_point / "ramp-filler"
        self.mount_point = mount_point
        self.start, self.end, self.seconds = start, end, seconds
        self.started_at = time.monotonic()
        self.freed_at: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def usable(self) -> int:
        stats = os.statvfs(self.mount_point)
        return stats.f_bavail * stats.f_frsize

    def target(self, at: float) -> int:
        done = min(1.0, max(0.0, (at - self.started_at) / self.seconds))
        return int(self.start + (self.end - self.start) * done)

    def _run(self) -> None:
        with open(self.path, "ab") as filler:
            while not self._stop.is_set():
                missing = self.usable() - self.target(time.monotonic())
                if missing > 0:
                    filler.write(b"\0" * missing)
                    filler.flush()
                time.sleep(0.02)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def free(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.path.unlink(missing_ok=True)
        self.freed_at = time.monotonic()


class FactorTimeline:
    """Follows the service's decision with the same long-poll a shim uses and records when each
    factor came into force (monotonic seconds, factor, state), and every decision answered with
    its arrival (wall-clock seconds, to compare with what other processes time)."""

    def __init__(self, base_url: str) -> None:
        self.changes: list[tuple[float, float, str]] = []
        self.decisions: list[tuple[float, dict]] = []
        self.errors: list[str] = []
        self._client = httpx.Client(base_url=base_url, timeout=40)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        etag = None
        while not self._stop.is_set():
            try:
                response = self._client.get(
                    "/throttle-factor", params={"wait": "5s"} if etag else None, headers={"If-None-Match": etag} if etag else {}
                )
            except httpx.HTTPError as exc:
                self.errors.append(repr(exc))
                time.sleep(0.1)
                continue
            if response.status_code == 200:
                etag = response.headers.get("ETag")
                decision = response.json()
                self.decisions.append((time.time(), decision))
                if not self.changes or self.changes[-1][1:] != (decision["factor"], decision["state"]):
                    self.changes.append((time.monotonic(), decision["factor"], decision["state"]))

    def first(self, state: str, since: float = 0.0) -> float | None:
        return next((at for at, _, s in list(self.changes) if s == state and at >= since), None)

    def first_decision(self, state: str, since: float) -> tuple[float, dict] | None:
        """The first decision in ``state`` that arrived at or after ``since`` (wall clock)."""
        return next(((at, d) for at, d in list(self.decisions) if at >= since and d["state"] == state), None)

    def latest_decision(self, before: float) -> dict:
        return [d for at, d in list(self.decisions) if at < before][-1]

    def decisions_since(self, start: float) -> list[tuple[float, dict]]:
        return [(at, d) for at, d in list(self.decisions) if at >= start]

    def intervals(self, start: float, end: float) -> list[tuple[float, float, float, str]]:
        """(from, to, factor, state) for each factor in force within [start, end)."""
        changes = list(self.changes)
        out = []
        for i, (at, factor, state) in enumerate(changes):
            until = changes[i + 1][0] if i + 1 < len(changes) else end
            lo, hi = max(at, start), min(until, end)
            if hi > lo:
                out.append((lo, hi, factor, state))
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()
