"""What the simulated cluster is at one moment: its brokers, their registration, their log dirs
and the volumes under them. Plain data; the runtime (``cluster.py``) changes it on its event
loop and the answers (``answers.py``) read it."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field

MiB = 1024 * 1024


@dataclass(slots=True)
class LogDir:
    path: str
    total_bytes: int
    usable_bytes: int
    offline: bool = False  # Kafka took it offline after an I/O error (KAFKA_STORAGE_ERROR)


@dataclass(slots=True)
class Broker:
    broker_id: int
    host: str
    log_dirs: list[LogDir]
    port: int = 0  # known once it listens
    rack: str | None = None
    registered: bool = True  # listed by DescribeCluster (KRaft keeps a stopped broker registered)
    fenced: bool = False  # registered but fenced: listed only with IncludeFencedBrokers, not in Metadata
    listening: bool = True  # False: its port refuses connections (stopped or killed)
    frozen: bool = False  # reads requests but answers none until thawed (a hung or SIGSTOPped broker)

    @property
    def alive(self) -> bool:
        """Listed in Metadata: registered and unfenced."""
        return self.registered and not self.fenced


@dataclass(slots=True)
class ClusterState:
    brokers: dict[int, Broker]
    cluster_id: str = field(default_factory=lambda: base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))

    def alive_brokers(self) -> list[Broker]:
        return [broker for _, broker in sorted(self.brokers.items()) if broker.alive]

    def registered_brokers(self) -> list[Broker]:
        return [broker for _, broker in sorted(self.brokers.items()) if broker.registered]


def default_log_dir(broker_id: int, index: int) -> str:
    """Where the devtools cluster puts a broker's log dirs, so paths look alike."""
    return f"/var/lib/kafka/broker-{broker_id}/data{'' if index == 0 else f'-{index + 1}'}/kafka-logs"


def new_cluster(
    brokers: int,
    log_dirs_per_broker: int = 1,
    total_bytes: int = 64 * MiB,
    usable_bytes: int | None = None,
    host: str = "127.0.0.1",
) -> ClusterState:
    """Brokers 1..``brokers``, each with ``log_dirs_per_broker`` log dirs on volumes of
    ``total_bytes``, ``usable_bytes`` of them free (all of them by default)."""
    if brokers < 1 or log_dirs_per_broker < 1:
        raise ValueError("a cluster needs at least one broker with at least one log dir")
    usable = total_bytes if usable_bytes is None else usable_bytes
    return ClusterState(
        {
            broker_id: Broker(broker_id, host, [LogDir(default_log_dir(broker_id, i), total_bytes, usable) for i in range(log_dirs_per_broker)])
            for broker_id in range(1, brokers + 1)
        }
    )
