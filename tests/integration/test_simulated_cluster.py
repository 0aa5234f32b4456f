"""The simulated cluster (devtools.simcluster) against the real one, and the real service against
the simulated one.

The same requests, raw (kafka-python's protocol classes, a version each), go to the session's
real 3-broker cluster and to a simulated cluster configured like it; the answers must agree in
structure: the response version, every field and tagged field, the API table, error codes,
flags. Values that differ between any two clusters (hosts, ports, the cluster id, byte counts,
log dir paths) are compared by type only. The benchmarks at 1,000 brokers rely on this."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from devtools.simcluster import MiB, SimulatedCluster
from devtools.simcluster.wire import RawConnection

from .conftest import VOLUME_MIB

# Compared by value: what a client acts on. Everything else by type.
COMPARED_BY_VALUE = {
    "error_code", "error_message", "endpoint_type", "is_fenced", "is_internal", "throttle_time_ms",
    "api_key", "min_version", "max_version", "name", "max_version_level", "min_version_level",
    "authorized_operations", "broker_id", "node_id", "rack", "topics", "partitions", "topic_id",
}
STORAGE_ERROR = "log dir error KAFKA_STORAGE_ERROR"


def shape(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list) and key not in ("authorized_operations",):
        return [shape(v, key) for v in value]
    if key in COMPARED_BY_VALUE:
        return sorted(value) if isinstance(value, (list, set)) else value
    return type(value).__name__


def answer_shape(response: Any) -> dict[str, Any]:
    return {"version": response.version, "tagged fields sent": sorted(response.tags or ()), **shape(response.to_dict())}


def requests() -> list[tuple[str, Any]]:
    """The requests compared, built afresh each time (a request object carries its header)."""
    missing_topic = [MetadataRequest.MetadataRequestTopic(name="no-such-topic", topic_id=None)]
    return [
        *[(f"ApiVersions v{v}", ApiVersionsRequest[v]()) for v in range(3)],
        *[(f"ApiVersions v{v}", ApiVersionsRequest[v](client_software_name="probe", client_software_version="1")) for v in (3, 4)],
        ("Metadata v13, no topics", MetadataRequest[13](topics=[], allow_auto_topic_creation=False)),
        ("Metadata v12, no topics", MetadataRequest[12](topics=[], allow_auto_topic_creation=False)),
        ("Metadata v13, a missing topic", MetadataRequest[13](topics=missing_topic, allow_auto_topic_creation=False)),
        *[(f"DescribeCluster v{v}", DescribeClusterRequest[v](include_cluster_authorized_operations=False, include_fenced_brokers=True)) for v in range(3)],
        ("DescribeCluster v2, fenced left out", DescribeClusterRequest[2](include_cluster_authorized_operations=False, include_fenced_brokers=False)),
        ("DescribeCluster v2, authorized operations", DescribeClusterRequest[2](include_cluster_authorized_operations=True, include_fenced_brokers=True)),
        ("DescribeCluster v2, controllers", DescribeClusterRequest[2](endpoint_type=2, include_cluster_authorized_operations=False, include_fenced_brokers=True)),
        *[(f"DescribeLogDirs v{v}, no topics", DescribeLogDirsRequest[v](topics=[])) for v in range(1, 5)],
        ("DescribeLogDirs v4, a missing topic", DescribeLogDirsRequest[4](topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic="no-such-topic", partitions=[0])])),
    ]


def answers(port: int) -> dict[str, dict[str, Any]]:
    with RawConnection("127.0.0.1", port) as connection:
        return {name: answer_shape(connection.send(request)) for name, request in requests()}


def fenced_answers(port: int) -> dict[str, dict[str, Any]]:
    chosen = {"Metadata v13, no topics", "DescribeCluster v2", "DescribeCluster v2, fenced left out"}
    with RawConnection("127.0.0.1", port) as connection:
        return {name: answer_shape(connection.send(request)) for name, request in requests() if name in chosen}


def assert_same(real: dict[str, dict[str, Any]], simulated: dict[str, dict[str, Any]]) -> None:
    assert real.keys() == simulated.keys()
    for name in real:
        assert simulated[name] == real[name], f"{name}: the simulated cluster answers differently"


def registered(port: int) -> dict[int, bool]:
    """Each registered broker, and whether it is fenced."""
    with RawConnection("127.0.0.1", port) as connection:
        response = connection.send(DescribeClusterRequest[2](include_cluster_authorized_operations=False, include_fenced_brokers=True))
    return {b.broker_id: b.is_fenced for b in response.brokers}


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} within {timeout:g} s"
        time.sleep(0.2)


def test_the_simulated_cluster_answers_every_request_the_service_sends_as_a_real_kafka_cluster_does(kafka_cluster):
    with SimulatedCluster(brokers=3, log_dirs_per_broker=1, total_bytes=VOLUME_MIB * MiB) as simulated:
        assert_same(answers(kafka_cluster.broker_port(1)), answers(simulated.broker_port(1)))
        # A stopped broker: fenced, listed only when fenced brokers are asked for, gone from Metadata.
        kafka_cluster.stop_broker(3)
        try:
            wait_until(lambda: registered(kafka_cluster.broker_port(1)).get(3) is True, 30, "broker 3 fenced")
            simulated.stop_broker(3)
            assert_same(fenced_answers(kafka_cluster.broker_port(1)), fenced_answers(simulated.broker_port(1)))
        finally:
            kafka_cluster.start_broker(3)
            wait_until(lambda: registered(kafka_cluster.broker_port(1)) == {1: False, 2: False, 3: False}, 60, "broker 3 back")


def test_an_offline_log_dir_is_answered_as_kafka_answers_it():
    """Kafka (ReplicaManager.describeLogDirs): KAFKA_STORAGE_ERROR, no topics, no byte counts."""
    with SimulatedCluster(brokers=1, log_dirs_per_broker=2) as simulated:
        simulated.take_log_dir_offline(1, index=1)
        with RawConnection("127.0.0.1", simulated.broker_port(1)) as connection:
            response = connection.send(DescribeLogDirsRequest[4](topics=[]))
        online, offline = response.results
        assert (online.error_code, online.total_bytes) == (0, 64 * MiB)
        assert (offline.error_code, offline.topics, offline.total_bytes, offline.usable_bytes) == (56, [], -1, -1)


@pytest.fixture
def simulated_cluster():
    with SimulatedCluster(brokers=5, log_dirs_per_broker=3, total_bytes=1024 * MiB) as cluster:
        yield cluster


def volumes(service) -> dict[tuple[int, str], dict]:
    return {(v["broker_id"], v["log_dir"]): v for v in service.client.get("/volumes").json()["volumes"]}


def test_the_service_observes_the_simulated_cluster_over_http(simulated_cluster, start_service):
    cluster = simulated_cluster
    service = start_service(
        kafka_admin_bootstrap_servers=cluster.bootstrap_servers,
        storage_check_interval="PT1S",
        kafka_request_timeout="PT0.8S",
        storage_per_volume_limit_min_available_bytes=str(100 * MiB),
    )
    decision, _ = service.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 15, "observed")
    assert (decision["state"], decision["active_brokers"], decision["active_log_dirs"]) == ("OPEN", 5, 15)
    seen = volumes(service)
    assert set(seen) == {(b, d) for b in cluster.broker_ids for d in cluster.log_dirs(b)}
    assert all((v["total_bytes"], v["usable_bytes"]) == (1024 * MiB, 1024 * MiB) for v in seen.values())

    # A volume filling up past the hard limit pauses, naming it.
    filling = (2, cluster.log_dirs(2)[1])
    cluster.set_usable_bytes(2, 50 * MiB, index=1)
    decision, _ = service.wait_for(lambda d: d["state"] == "PAUSE", 10, "PAUSE")
    assert [(v["broker_id"], v["log_dir"], v["usable_bytes"]) for v in decision["breaching"]] == [(*filling, 50 * MiB)]
    cluster.set_usable_bytes(2, 1024 * MiB, index=1)
    service.wait_for(lambda d: d["state"] == "OPEN", 10, "OPEN again")

    # A fenced broker is listed as fenced and no longer asked.
    cluster.fence(4)
    decision, _ = service.wait_for(lambda d: [b["broker_id"] for b in d["fenced_brokers"]] == [4], 10, "broker 4 fenced")
    assert decision["active_brokers"] == 4
    cluster.unfence(4)
    service.wait_for(lambda d: d["fenced_brokers"] == [] and d["active_brokers"] == 5, 10, "broker 4 unfenced")

    # An offline log dir counts as breaching the hard limit.
    offline = (3, cluster.log_dirs(3)[0])
    cluster.take_log_dir_offline(3, index=0)
    decision, _ = service.wait_for(lambda d: any(e["reason"] == STORAGE_ERROR for e in d["breaching"]), 10, "the offline dir breaching")
    assert [(v["broker_id"], v["log_dir"]) for v in decision["breaching"]] == [offline] and decision["state"] == "PAUSE"
    assert volumes(service)[offline]["error"] == "KAFKA_STORAGE_ERROR"
    cluster.bring_log_dir_online(3, index=0)
    service.wait_for(lambda d: d["state"] == "OPEN", 10, "OPEN after the dir came back")

    # A broker that stops answering makes the round incomplete, and only it is missing.
    cluster.freeze_broker(5)
    decision, _ = service.wait_for(lambda d: not d["round"]["complete"], 10, "an incomplete round")
    assert [m["broker_id"] for m in decision["round"]["missing_brokers"]] == [5]
    cluster.thaw_broker(5)
    service.wait_for(lambda d: d["round"]["complete"], 15, "complete rounds again")

    log = service.log()
    assert "broker 4 fenced" in log and f"broker 3 log dir {offline[1]} offline: KAFKA_STORAGE_ERROR" in log, log[-3000:]
