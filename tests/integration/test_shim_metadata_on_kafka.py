"""The shim alone inside real KRaft nodes, three controller-only nodes and two brokers (broker 2
a combined node, a fourth voter), the metadata logs on tmpfs, against a loopback stand-in of the service
(devtools/stand_in_service.py: it serves a quota table and records the volume reports; the
service's own endpoint is tested end to end with the real service elsewhere):

- every node, controllers included, reports its volumes (PUT /nodes/{node.id}/volumes, the
  shim's token as Bearer, once per poll interval): its metadata log dir with the tmpfs's real
  total and usable bytes and the right holds; combined node 2 keeps its metadata log in its data
  dir (no metadata.log.dir), so that volume holds both; one reporter per process, though a
  combined node configures the callback twice;
- with the table's mutation_factor 0 a real Java Admin client's CreateTopics is refused with
  THROTTLING_QUOTA_EXCEEDED and a finite throttle time (after the one topic Kafka's token bucket
  admits while it is not in debt, docs/shim.md); with 1 it succeeds.

Needs java, Maven and root (tmpfs mounts)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.shim import shim_broker_config
from devtools.stand_in_service import StandInService

from .conftest import VOLUME_MIB, MiB
from .mutation_probe import MutationProbe
from .shim_harness import wait_until

METADATA_MIB = 16
TOKEN = "node-report-token-0123"
POLL_MS = 500
COMBINED = 2
HARD_LIMIT_LINE = "mutation factor 0.0 (metadata hard limit"
INT_MAX_MS = 2**31 - 1
ADMIN_DEFAULT_API_TIMEOUT_MS = 60_000

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")


@pytest.fixture(scope="module")
def stub() -> Iterator[StandInService]:
    service = StandInService()
    try:
        yield service
    finally:
        service.close()


@pytest.fixture(scope="module")
def quorum(stub: StandInService, shim_jar: Path) -> Iterator[LocalKafkaCluster]:
    shim = shim_broker_config(
        stub.url,
        **{
            "client.quota.callback.service.token": TOKEN,
            "client.quota.callback.service.poll.interval.ms": str(POLL_MS),
            "client.quota.callback.service.long.poll.wait.ms": "10000",
            "client.quota.callback.service.request.timeout.ms": "2000",
        },
    )
    cluster = LocalKafkaCluster(
        brokers=2,
        log_dir_size_mib=VOLUME_MIB,
        controllers=3,
        metadata_tmpfs_mib=METADATA_MIB,
        tmpfs=True,
        broker_config=shim,
        controller_config=shim,
        # A combined node keeping its metadata log in its (first) data dir, Kafka's default.
        combined_broker=2,
        per_broker_config={2: {"metadata.log.dir": None}},
        extra_classpath=[shim_jar],
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def probe(quorum: LocalKafkaCluster) -> Iterator[MutationProbe]:
    started = MutationProbe(quorum.bootstrap_servers)
    try:
        yield started
    finally:
        started.close()


def log_count(cluster: LocalKafkaCluster, node_id: int, text: str) -> int:
    return cluster.server_log(node_id).read_text(errors="replace").count(text)


def voters(cluster: LocalKafkaCluster) -> list[int]:
    """The nodes that can be the active controller, where the mutation quota is decided."""
    return [*cluster.controller_ids, COMBINED]


def wait_for_voters(cluster: LocalKafkaCluster, text: str, before: dict[int, int]) -> None:
    """Every voter's shim logged ``text`` once more than ``before``."""
    wait_until(
        lambda: all(log_count(cluster, nid, text) > before[nid] for nid in voters(cluster)),
        15,
        f"every voter's shim logging {text!r}",
        lambda: {nid: log_count(cluster, nid, text) for nid in voters(cluster)},
    )


def volume_of(path: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system holding ``path``, as Java's FileStore gives them."""
    stats = os.statvfs(path)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


def test_every_node_controllers_included_reports_its_metadata_volume(quorum, stub):
    nodes = [*quorum.controller_ids, *quorum.broker_ids]
    wait_until(lambda: all(stub.report_counts().get(n, 0) >= 3 for n in nodes), 30, "three reports from every node", stub.report_counts)
    reports = stub.last_reports()
    assert set(reports) == set(nodes), "no report from a node that is not in the cluster"
    for node, report in reports.items():
        body = report.body
        assert report.authorization == f"Bearer {TOKEN}", node
        volumes = {v["log_dir"]: v for v in body["volumes"]}
        if node in quorum.controller_ids:
            assert body["roles"] == ["controller"]
            # A controller-only node's log.dirs is its metadata dir: nothing else to report.
            assert list(volumes) == [str(quorum.metadata_log_dir(node))], body
            metadata = volumes[str(quorum.metadata_log_dir(node))]
            assert metadata["holds"] == ["metadata"]
            expected_total = METADATA_MIB * MiB
        elif node == 1:
            assert body["roles"] == ["broker"]
            assert list(volumes) == [str(quorum.metadata_log_dir(1)), str(quorum.log_dir(1))], body
            metadata = volumes[str(quorum.metadata_log_dir(1))]
            assert metadata["holds"] == ["metadata"]
            assert volumes[str(quorum.log_dir(1))]["holds"] == ["data"]
            assert volumes[str(quorum.log_dir(1))]["total_bytes"] == VOLUME_MIB * MiB
            expected_total = METADATA_MIB * MiB
        else:
            assert body["roles"] == ["broker", "controller"]
            # No metadata.log.dir: the metadata log lives in the data dir, one volume holding both.
            assert list(volumes) == [str(quorum.log_dir(2))], body
            metadata = volumes[str(quorum.log_dir(2))]
            assert metadata["holds"] == ["data", "metadata"]
            expected_total = VOLUME_MIB * MiB
        path = Path(metadata["log_dir"])
        total, usable = volume_of(path)
        assert metadata["total_bytes"] == total == expected_total, node
        # The log grows between the report and this statvfs; a report made up of numbers would not be this close.
        assert abs(metadata["usable_bytes"] - usable) <= MiB, (node, metadata, usable)
        assert 0 < metadata["usable_bytes"] < total
    # Once per poll interval, not once per Kafka request or per callback instance.
    for node in nodes:
        assert log_count(quorum, node, f"reporting node {node}'s volumes") == 1, node
    since = time.monotonic()
    time.sleep(10 * POLL_MS / 1000)
    recent = stub.report_counts(since)
    for node in nodes:
        assert 4 <= recent.get(node, 0) <= 11, (node, recent)


def test_mutation_factor_zero_refuses_topic_creation_with_a_finite_throttle_and_one_allows_it(quorum, stub, probe):
    assert probe.create("open-a") == {"open-a": ["CREATED"]}

    before = {nid: log_count(quorum, nid, HARD_LIMIT_LINE) for nid in voters(quorum)}
    stub.table(0.0)
    wait_for_voters(quorum, HARD_LIMIT_LINE, before)
    answers = probe.create("hard-a", "hard-b")
    # Kafka's token bucket admits one request while it is not in debt: the first topic.
    assert sorted(answer[0] for answer in answers.values()) == ["CREATED", "THROTTLING_QUOTA_EXCEEDED"], answers
    throttle_ms = next(int(answer[1]) for answer in answers.values() if answer[0] == "THROTTLING_QUOTA_EXCEEDED")
    assert ADMIN_DEFAULT_API_TIMEOUT_MS < throttle_ms < INT_MAX_MS, throttle_ms
    assert throttle_ms <= 89_000 + 1_000, "0.89 partitions of debt at 0.01 partitions/s"
    refused = probe.create("hard-c")
    assert refused["hard-c"][0] == "THROTTLING_QUOTA_EXCEEDED", refused
    assert 0 < int(refused["hard-c"][1]) < INT_MAX_MS
    # An Admin client that retries on quota violations (the default) gives up when its API
    # timeout ends before the throttle does, instead of retrying into an admission.
    started = time.monotonic()
    retried = probe.create("hard-d", retry_ms=15_000)
    assert retried["hard-d"][0] == "THROTTLING_QUOTA_EXCEEDED", retried
    assert time.monotonic() - started < 15 + 15, "within its timeout (plus the JVM's start)"

    restored = {nid: log_count(quorum, nid, "mutation factor 1.0 on node") for nid in voters(quorum)}
    stub.table(1.0)
    wait_for_voters(quorum, "mutation factor 1.0 on node", restored)
    assert probe.create("open-b", "open-c") == {"open-b": ["CREATED"], "open-c": ["CREATED"]}
