"""The one shim jar (compiled against the oldest Kafka line kept, devtools/devcluster/jars.py)
inside real brokers of every other Kafka version we support: a smoke per version in
SMOKE_KAFKA_VERSIONS. The full suite runs KAFKA_VERSION (4.3.1); this module covers the rest.

Each version gets its own small cluster, a broker (node 1) and a controller-only node, both with
the shim as their client.quota.callback.class, polling a loopback stand-in of the service
(devtools/stand_in_service.py: a quota table the test sets, the volume reports recorded):

- the shim loads on both nodes: each logs its poller and reports its volumes with its roles;
- the mutation factor 0 refuses CreateTopics (a real Java Admin client) with
  THROTTLING_QUOTA_EXCEEDED and a finite throttle of about 89 s, after the one topic Kafka's
  token bucket admits while not in debt (docs/shim.md); 1 again lets topics through;
- a PAUSE (factor 0, the 64 KiB/s floor) throttles a producer: throttle times in its responses
  and its acknowledged rate a small part of what it was;
- with the service gone, the fallback factor (0.0 here) applies on both nodes and throttles a
  producer that was not throttled before.

One test per version runs these steps in order on one cluster. Every cluster and stand-in takes
free ports of its own, so the versions can run at once: each version is its own xdist group
(``pytest -n 3 --dist loadgroup``). Needs java, Maven and root."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.jars import SMOKE_KAFKA_VERSIONS, ensure_kafka_jars
from devtools.devcluster.shim import shim_broker_config
from devtools.stand_in_service import StandInService

from .conftest import MiB
from .mutation_probe import MutationProbe
from .shim_harness import LoadProducer, wait_until

BROKER = 1
POLL_MS = 500
TOKEN = "smoke-node-token"
POLLING_LINE = "Throttle service shim: polling "
HARD_LIMIT_LINE = "mutation factor 0.0 (metadata hard limit"
PAUSE_LINE = "factor 0.0 (PAUSE"
FALLBACK_LINE = "fallback factor 0.0 (PAUSE) applies until it answers"
RESTORED_LINE = "factor 1.0 (OPEN, source observed), was 0.0 (PAUSE"
INT_MAX_MS = 2**31 - 1
ADMIN_DEFAULT_API_TIMEOUT_MS = 60_000
LOAD = 2 * MiB  # bytes/s offered: 32 times the floor

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")


class Smoke:
    """One version's cluster, stand-in service and Admin client probe."""

    def __init__(self, version: str, cluster: LocalKafkaCluster, stand_in: StandInService, probe: MutationProbe) -> None:
        self.version = version
        self.cluster = cluster
        self.stand_in = stand_in
        self.probe = probe

    @property
    def nodes(self) -> list[int]:
        return [BROKER, *self.cluster.controller_ids]

    def log_count(self, node: int, text: str) -> int:
        return self.cluster.server_log(node).read_text(errors="replace").count(text)

    def counts(self, text: str) -> dict[int, int]:
        return {node: self.log_count(node, text) for node in self.nodes}

    def wait_for_log(self, text: str, before: dict[int, int], nodes: list[int], timeout: float = 15) -> None:
        wait_until(
            lambda: all(self.log_count(n, text) > before.get(n, 0) for n in nodes),
            timeout,
            f"Kafka {self.version}: {text!r} logged by nodes {nodes}",
            self.shim_lines,
        )

    def shim_lines(self) -> str:
        return "\n".join(
            f"node {node}: {line}"
            for node in self.nodes
            for line in self.cluster.server_log(node).read_text(errors="replace").splitlines()
            if "Throttle service shim" in line
        )[-4000:]

    def producer(self, client_id: str) -> LoadProducer:
        return LoadProducer(
            {"bootstrap.servers": self.cluster.bootstrap_servers, "client.id": client_id},
            topic="load", partitions=1, rate_per_partition=LOAD,
        )


def version_param(version: str):
    return pytest.param(version, id=version, marks=pytest.mark.xdist_group(f"kafka-{version}"))


@pytest.fixture(params=[version_param(v) for v in SMOKE_KAFKA_VERSIONS])
def smoke(request: pytest.FixtureRequest, shim_jar: Path) -> Iterator[Smoke]:
    version = request.param
    stand_in = StandInService()
    shim = shim_broker_config(
        stand_in.url,
        **{
            "client.quota.callback.service.token": TOKEN,
            "client.quota.callback.service.poll.interval.ms": str(POLL_MS),
            "client.quota.callback.service.long.poll.wait.ms": "10000",
            "client.quota.callback.service.request.timeout.ms": "2000",
            "client.quota.callback.service.fallback.factor": "0.0",
        },
    )
    cluster = LocalKafkaCluster(
        brokers=1,
        log_dir_size_mib=32,
        version=version,
        broker_config=shim,
        controller_config=shim,
        extra_classpath=[shim_jar],
    )
    probe = None
    started = time.monotonic()
    try:
        # The probe's JVM compiles and starts while the cluster does (its ports are known already).
        probe = MutationProbe(cluster.bootstrap_servers)
        cluster.start()
        print(f"\nKafka {version}: cluster up in {time.monotonic() - started:.1f} s")
        yield Smoke(version, cluster, stand_in, probe)
    finally:
        if probe is not None:
            probe.close()
        cluster.stop()
        stand_in.close()
        print(f"\nKafka {version} smoke: {time.monotonic() - started:.1f} s, cluster start included")


def the_shim_loads_on_the_broker_and_on_the_controller_only_node(smoke: Smoke) -> None:
    cluster, stand_in = smoke.cluster, smoke.stand_in
    jars = str(ensure_kafka_jars(smoke.version))
    for node, pid in cluster.pids().items():
        classpath = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        assert f"{jars}/*" in ":".join(classpath), f"node {node} does not run Kafka {smoke.version}: {classpath}"
    wait_until(
        lambda: all(stand_in.report_counts().get(n, 0) >= 2 for n in smoke.nodes),
        30,
        f"Kafka {smoke.version}: two volume reports from the broker and the controller",
        stand_in.report_counts,
    )
    reports = stand_in.last_reports()
    assert set(reports) == set(smoke.nodes), reports.keys()
    for node, report in reports.items():
        assert report.authorization == f"Bearer {TOKEN}", node
        assert report.body["roles"] == (["broker"] if node == BROKER else ["controller"]), report.body
        assert report.body["volumes"], report.body
    for node in smoke.nodes:
        # One poller per process, and the node's own id in it.
        assert smoke.log_count(node, POLLING_LINE) == 1, smoke.shim_lines()
        assert smoke.log_count(node, f"for broker {node} ") == 1, smoke.shim_lines()


def the_mutation_factor_zero_refuses_create_topics_as_documented(smoke: Smoke) -> None:
    assert smoke.probe.create("open-a") == {"open-a": ["CREATED"]}
    controller = smoke.cluster.controller_ids[0]
    before = smoke.counts(HARD_LIMIT_LINE)
    smoke.stand_in.table(0.0)
    smoke.wait_for_log(HARD_LIMIT_LINE, before, [controller])
    answers = smoke.probe.create("hard-a", "hard-b")
    # Kafka's token bucket admits one request while it is not in debt: the first topic.
    assert sorted(answer[0] for answer in answers.values()) == ["CREATED", "THROTTLING_QUOTA_EXCEEDED"], answers
    throttle_ms = next(int(answer[1]) for answer in answers.values() if answer[0] == "THROTTLING_QUOTA_EXCEEDED")
    assert ADMIN_DEFAULT_API_TIMEOUT_MS < throttle_ms < INT_MAX_MS, throttle_ms
    assert throttle_ms <= 89_000 + 1_000, "0.89 partitions of debt at 0.01 partitions/s"

    restored = smoke.counts("mutation factor 1.0 on node")
    smoke.stand_in.table(1.0)
    smoke.wait_for_log("mutation factor 1.0 on node", restored, [controller])
    assert smoke.probe.create("open-b") == {"open-b": ["CREATED"]}


def a_pause_throttles_a_producer(smoke: Smoke) -> None:
    smoke.probe.create("load")
    load = smoke.producer("pause-smoke")
    try:
        wait_until(lambda: load.bytes(0, time.monotonic()) >= MiB, 20, "the producer's first MiB acknowledged")
        open_from = time.monotonic()
        time.sleep(2.5)
        open_rate = load.rate(open_from, time.monotonic())
        assert not load.throttled_brokers(open_from), "throttled while OPEN"

        before = smoke.counts(PAUSE_LINE)
        paused_at = time.monotonic()
        smoke.stand_in.table(1.0, factor=0.0, state="PAUSE")
        smoke.wait_for_log(PAUSE_LINE, before, [BROKER])
        wait_until(lambda: BROKER in load.throttled_brokers(paused_at), 10, "a throttle time in a produce response")
        measured_from = time.monotonic() + 1.0
        time.sleep(5.0)
        paused_rate = load.rate(measured_from, time.monotonic())
        assert paused_rate < 0.25 * open_rate, (paused_rate, open_rate)
        assert not load.errors, load.errors[:3]
        print(f"\nKafka {smoke.version}: OPEN {open_rate / MiB:.2f} MiB/s, PAUSE {paused_rate / 1024:.0f} KiB/s")
    finally:
        load.stop()
        restored = smoke.counts(RESTORED_LINE)
        smoke.stand_in.table(1.0)
        smoke.wait_for_log(RESTORED_LINE, restored, [BROKER])


def the_fallback_applies_on_both_nodes_when_the_service_is_down(smoke: Smoke) -> None:
    load = smoke.producer("fallback-smoke")
    try:
        started = time.monotonic()
        wait_until(lambda: load.bytes(started, time.monotonic()) >= MiB, 20, "the producer's first MiB acknowledged")
        open_from = time.monotonic()
        time.sleep(2.0)
        open_rate = load.rate(open_from, time.monotonic())
        assert not load.throttled_brokers(started), "a fresh producer throttled while OPEN"

        before = smoke.counts(FALLBACK_LINE)
        down_at = time.monotonic()
        smoke.stand_in.close()
        smoke.wait_for_log(FALLBACK_LINE, before, smoke.nodes)
        wait_until(lambda: BROKER in load.throttled_brokers(down_at), 10, "a throttle time in a produce response")
        measured_from = time.monotonic() + 1.0
        time.sleep(4.0)
        fallback_rate = load.rate(measured_from, time.monotonic())
        assert fallback_rate < 0.25 * open_rate, (fallback_rate, open_rate)
        print(f"\nKafka {smoke.version}: OPEN {open_rate / MiB:.2f} MiB/s, fallback {fallback_rate / 1024:.0f} KiB/s")
    finally:
        load.stop()


def test_the_shim_in_a_broker_and_a_controller_of_this_kafka_version(smoke: Smoke):
    """One cluster per version, the steps in order (the last one stops the service): one test,
    so a pytest-xdist worker never tears the cluster down between steps."""
    steps = [
        the_shim_loads_on_the_broker_and_on_the_controller_only_node,
        the_mutation_factor_zero_refuses_create_topics_as_documented,
        a_pause_throttles_a_producer,
        the_fallback_applies_on_both_nodes_when_the_service_is_down,
    ]
    for step in steps:
        started = time.monotonic()
        step(smoke)
        print(f"\nKafka {smoke.version}: {step.__name__} in {time.monotonic() - started:.1f} s")
