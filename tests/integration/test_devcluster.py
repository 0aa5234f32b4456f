"""The local Kafka KRaft cluster harness (devtools.devcluster) against a real cluster.

Needs java, Maven (first run fetches the Kafka jars) and root (tmpfs mounts).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient

from devtools.devcluster import KAFKA_VERSION, LocalKafkaCluster, ensure_kafka_jars
from devtools.commands import run_command

MiB = 1024 * 1024
SIZE_MIB = 64

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs log dirs need root")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalKafkaCluster]:
    c = LocalKafkaCluster(brokers=3, log_dir_size_mib=SIZE_MIB)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def describe_cluster(cluster: LocalKafkaCluster) -> dict:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=10000)
    try:
        return admin.describe_cluster()
    finally:
        admin.close()


def active_brokers(cluster: LocalKafkaCluster) -> set[int]:
    """Broker ids DescribeCluster reports as unfenced.

    kafka-python 3.0 sends DescribeCluster with include_fenced_brokers=True, so a
    stopped broker stays listed (with is_fenced=True) until it is restarted.
    """
    return {b["broker_id"] for b in describe_cluster(cluster)["brokers"] if not b.get("is_fenced")}


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # noqa: BLE001 - a broker may just be going away
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def test_jars_are_cached_and_complete():
    ensure_kafka_jars()  # may download on a fresh machine
    t0 = time.monotonic()
    jars = ensure_kafka_jars()
    assert time.monotonic() - t0 < 1.0, "cached call must not run Maven"
    names = {p.name for p in jars.glob("*.jar")}
    assert f"kafka_2.13-{KAFKA_VERSION}.jar" in names
    assert f"kafka-clients-{KAFKA_VERSION}.jar" in names
    assert any(n.startswith("log4j-slf4j-impl-") for n in names)
    assert any(n.startswith("log4j-core-") for n in names)


def test_cluster_lists_three_unfenced_brokers(cluster):
    info = describe_cluster(cluster)
    brokers = {b["broker_id"]: b for b in info["brokers"]}
    assert sorted(brokers) == [1, 2, 3] == cluster.broker_ids
    assert not any(b["is_fenced"] for b in brokers.values())
    assert info["cluster_id"] == cluster.cluster_id
    for bid, b in brokers.items():
        assert (b["host"], b["port"]) == ("127.0.0.1", cluster.broker_port(bid))
    assert set(cluster.pids()) == {1000, 1, 2, 3}
    assert cluster.bootstrap_servers == ",".join(
        f"127.0.0.1:{cluster.broker_port(b)}" for b in (1, 2, 3)
    )


def test_log_dirs_are_tmpfs_of_configured_size(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        result = admin.describe_log_dirs(topic_partitions={}, brokers=[1, 2, 3])
    finally:
        admin.close()
    assert sorted(r["broker"] for r in result) == [1, 2, 3]
    for r in result:
        (log_dir,) = r["log_dirs"]  # metadata.log.dir is separate and not reported
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == str(cluster.log_dir(r["broker"]))
        assert log_dir["total_bytes"] == SIZE_MIB * MiB
        assert SIZE_MIB * MiB - 8 * MiB < log_dir["usable_bytes"] < SIZE_MIB * MiB
    mounts = Path("/proc/mounts").read_text()
    for bid in cluster.broker_ids:
        assert f" {cluster.mount_point(bid)} tmpfs " in mounts


def test_produce_gets_delivery_confirmations(cluster):
    topic = f"devcluster-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg)

    for i in range(10):
        producer.produce(topic, key=str(i).encode(), value=b"x" * 1000, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []
    assert len(delivered) == 10
    assert {m.topic() for m in delivered} == {topic}
    assert all(m.offset() >= 0 for m in delivered)


def test_stopped_broker_leaves_and_rejoins(cluster):
    victim = 2
    old_pid = cluster.pids()[victim]
    cluster.stop_broker(victim)
    assert victim not in cluster.pids()
    wait_for(lambda: active_brokers(cluster) == {1, 3}, 30, f"broker {victim} to be fenced")

    cluster.start_broker(victim)
    assert cluster.pids()[victim] != old_pid
    wait_for(lambda: active_brokers(cluster) == {1, 2, 3}, 30, f"broker {victim} to rejoin")
    # its log dir (and data) survived the restart
    assert cluster.log_dir(victim).is_dir()


def test_killed_broker_restarts_with_its_data(cluster):
    victim = 3
    topic = f"devcluster-kill-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce(topic, value=b"before kill")
    assert producer.flush(30) == 0
    before = {p.name for p in cluster.log_dir(victim).iterdir()}

    cluster.kill_broker(victim)
    assert not cluster.is_running(victim)
    assert victim not in cluster.pids()
    cluster.start_broker(victim)
    assert cluster.is_running(victim)
    wait_for(lambda: active_brokers(cluster) == {1, 2, 3}, 30, f"broker {victim} to be active")
    assert before <= {p.name for p in cluster.log_dir(victim).iterdir()}


def test_stop_leaves_no_process_and_no_mount(cluster):
    pids = cluster.pids()
    mount_points = [cluster.mount_point(b) for b in cluster.broker_ids]
    base_dir = cluster.base_dir
    assert len(pids) == 4

    cluster.stop()
    cluster.stop()  # idempotent

    assert cluster.pids() == {}
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists(), f"pid {pid} still alive"
    mounts = Path("/proc/mounts").read_text()
    for mp in mount_points:
        assert str(mp) not in mounts
    assert str(base_dir) not in mounts
    if not os.environ.get("KAFKA_DEVCLUSTER_KEEP"):
        assert not base_dir.exists()  # harness-created temp dir is removed


def test_cleanup_of_a_crashed_run():
    """A harness-created dir whose owner died: its mounts and the dir go away."""
    import json
    import subprocess
    import tempfile

    from devtools.devcluster import cleanup_stale_clusters
    from devtools.devcluster.cluster import OWNER_FILE, TEMP_PREFIX

    stale = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    mnt = stale / "broker-1" / "data"
    mnt.mkdir(parents=True)
    run_command(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt], 30, check=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (stale / OWNER_FILE).write_text(json.dumps({"pid": dead.pid, "start_time": "0"}))
    try:
        assert stale in cleanup_stale_clusters()
        assert f" {mnt} " not in Path("/proc/mounts").read_text()
        assert not stale.exists()
    finally:
        if f" {mnt} " in Path("/proc/mounts").read_text():
            run_command(["umount", "-l", mnt], 30)
