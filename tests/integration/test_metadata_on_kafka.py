"""The metadata log protected end to end: the real service and the real shim on every node of a
KRaft cluster with three controller-only nodes (1000-1002) and three brokers, broker 3 a
combined node (``process.roles=broker,controller``) whose metadata log lives in its data dir,
every node's metadata log dir on its own tmpfs. One cluster for the module.

- the service lists every node's metadata volume as its shim reports it;
- a filler file taking a controller's metadata tmpfs past the metadata hard limit makes a real
  Admin client's CreateTopics fail with THROTTLING_QUOTA_EXCEEDED while a producer's rate stays
  what it was; deleting it restores topic creation within check interval + 2 s;
- filling the combined node's shared volume past the metadata limit (not the data limit)
  throttles both produce and partition mutations;
- a controller that stops (and so stops reporting) is forgotten a validity duration after its
  last report: its breach stops refusing mutations then, not before; a stopped broker, fenced,
  keeps its last report (docs/architecture.md, "Observing metadata volumes");
- librdkafka's CreateTopics (v4 at most) is throttled at mutation factor 0, not refused.

Numbers: check interval 1 s, validity 6 s, shim poll 0.5 s; data hard limit 4 MiB on 64 MiB
volumes, metadata hard limit 12 MiB on 16 MiB metadata volumes; a filled volume is left with
8 MiB usable, below the metadata limit and above the data limit.

Needs java, Maven and root (tmpfs mounts)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.shim import shim_broker_config

from .conftest import VOLUME_MIB, MiB, RunningService, free_port, launch_service
from .mutation_probe import MutationProbe
from .shim_harness import LoadProducer, wait_until

CHECK = 1.0
POLL = 0.5
VALIDITY = 6.0
METADATA_MIB = 16
DATA_HARD = 4 * MiB
METADATA_HARD = 12 * MiB
LEFT = 8 * MiB  # usable bytes a filled volume keeps: a metadata breach, not a data one
NODE_TOKEN = "node-report-token-0123456"
COMBINED = 3
RATE = 256 * 1024  # offered per partition: far above the 64 KiB/s floor

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")


class Stack:
    def __init__(self, cluster: LocalKafkaCluster, service: RunningService) -> None:
        self.cluster = cluster
        self.service = service
        self.admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        self.probe = MutationProbe(cluster.bootstrap_servers)

    def table(self) -> dict:
        return self.service.client.get("/quotas").json()

    def volumes(self) -> dict[int, dict]:
        """Node id -> its metadata volume as /volumes lists it."""
        listed = self.service.client.get("/volumes").json()["volumes"]
        return {v["broker_id"]: v for v in listed if v["observed_by"] == "node-report"}

    def created(self, topic: str) -> bool:
        answer = self.probe.create(topic)[topic]
        assert answer[0] in ("CREATED", "THROTTLING_QUOTA_EXCEEDED"), answer
        return answer[0] == "CREATED"

    def refuses_mutations(self, prefix: str) -> int:
        """Kafka's token bucket admits one topic while it is not in debt (docs/shim.md): of two
        topics in one CreateTopics the second, at the latest, is refused, and so is the next
        request; returns the throttle time (ms) of that refusal."""
        first = self.probe.create(f"{prefix}-a", f"{prefix}-b")
        assert [answer[0] for answer in first.values()].count("THROTTLING_QUOTA_EXCEEDED") >= 1, first
        [answer] = self.probe.create(f"{prefix}-c").values()
        assert answer[0] == "THROTTLING_QUOTA_EXCEEDED", answer
        return int(answer[1])


@pytest.fixture(scope="module")
def stack(shim_jar: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    port = free_port()
    shim = shim_broker_config(
        f"http://127.0.0.1:{port}",
        **{
            "client.quota.callback.service.token": NODE_TOKEN,
            "client.quota.callback.service.poll.interval.ms": str(int(POLL * 1000)),
            "client.quota.callback.service.long.poll.wait.ms": "10000",
            "client.quota.callback.service.request.timeout.ms": "2000",
        },
    )
    cluster = LocalKafkaCluster(
        brokers=3,
        log_dir_size_mib=VOLUME_MIB,
        controllers=3,
        metadata_tmpfs_mib=METADATA_MIB,
        tmpfs=True,
        combined_broker=COMBINED,
        broker_config={**shim, "log.segment.delete.delay.ms": "500", "log.retention.check.interval.ms": "500"},
        # The combined node keeps its metadata log in its data dir, Kafka's default.
        per_broker_config={COMBINED: {"metadata.log.dir": None}},
        controller_config=shim,
        extra_classpath=[shim_jar],
    )
    service = stack = None
    try:
        cluster.start()
        service = launch_service(
            tmp_path_factory.mktemp("metadata-service"),
            http_port=str(port),
            kafka_admin_bootstrap_servers=cluster.bootstrap_servers,
            storage_check_interval="PT1S",
            kafka_request_timeout="PT0.8S",
            throttle_factor_validity_duration=f"PT{VALIDITY:g}S",
            storage_per_volume_limit_min_available_bytes=str(DATA_HARD),
            node_token=NODE_TOKEN,
            metadata_limit_min_available_bytes=str(METADATA_HARD),
        )
        load = NewTopic(
            "load",
            num_partitions=3,
            replica_assignment=[[1], [2], [3]],
            config={"segment.bytes": str(MiB), "retention.bytes": str(MiB), "retention.ms": "2000"},
        )
        stack = Stack(cluster, service)
        stack.admin.create_topics([load])["load"].result(timeout=30)
        wait_until(lambda: len(stack.volumes()) == 6, 30, "every node's metadata volume listed", stack.volumes)
        yield stack
    finally:
        if service is not None:
            service.stop()
        if stack is not None:
            stack.probe.close()
        cluster.stop()


def fill(directory: Path, name: str = "filler.bin") -> Path:
    """A file that leaves LEFT bytes usable on ``directory``'s volume (a regular file: Kafka
    reads only directories as logs)."""
    stats = os.statvfs(directory)
    size = stats.f_bavail * stats.f_frsize - LEFT
    assert size > 0, f"{directory} has less than {LEFT} bytes usable already"
    filler = directory / name
    with filler.open("wb") as handle:
        for _ in range(size // MiB):
            handle.write(b"\0" * MiB)
        handle.write(b"\0" * (size % MiB))
    return filler


def test_the_service_lists_every_nodes_metadata_volume_controllers_included(stack):
    cluster = stack.cluster
    volumes = stack.volumes()
    assert sorted(volumes) == [1, 2, 3, 1000, 1001, 1002]
    for node in cluster.controller_ids:
        entry = volumes[node]
        assert (entry["log_dir"], entry["holds"], entry["total_bytes"]) == (str(cluster.metadata_log_dir(node)), ["metadata"], METADATA_MIB * MiB)
        assert entry["status"] == "ok" and entry["usable_bytes"] > METADATA_HARD
    assert (volumes[1]["log_dir"], volumes[1]["holds"]) == (str(cluster.metadata_log_dir(1)), ["metadata"])
    # The combined node's metadata log is in its data dir: one volume holding both.
    assert (volumes[COMBINED]["log_dir"], volumes[COMBINED]["holds"]) == (str(cluster.log_dir(COMBINED)), ["data", "metadata"])
    assert volumes[COMBINED]["total_bytes"] == VOLUME_MIB * MiB
    # /throttle-factor is published each round (and when a report changes what shims act on)
    decision, _ = stack.service.wait_for(lambda d: len(d["metadata"]["reporting_nodes"]) == 6, CHECK + 2, "every node reporting")
    assert (decision["factor"], decision["mutation_factor"], decision["metadata"]["source"]) == (1.0, 1.0, "observed")
    assert decision["metadata"]["reporting_nodes"] == [1, 2, 3, 1000, 1001, 1002]


def test_a_full_controller_metadata_volume_refuses_topic_creation_and_leaves_produce_alone(stack):
    service = stack.service
    assert stack.created("before-breach")
    producer = LoadProducer({"bootstrap.servers": stack.cluster.bootstrap_servers}, rate_per_partition=RATE)
    filler = None
    try:
        # Steady first: the offered load acknowledged (a warming producer would make any later rate look higher).
        offered = RATE * 3
        wait_until(lambda: producer.rate(time.monotonic() - 3, time.monotonic()) >= 0.85 * offered, 30, "the producer at its offered rate",
                   lambda: producer.rate(time.monotonic() - 3, time.monotonic()))
        before = time.monotonic()
        rate_before = producer.rate(before - 3, before)

        filler = fill(stack.cluster.metadata_log_dir(1000))
        decision, _ = service.wait_for(lambda d: d["mutation_factor"] == 0.0, CHECK + POLL + 5, "mutation factor 0")
        assert decision["factor"] == 1.0 and decision["state"] == "OPEN"
        [breaching] = decision["metadata"]["breaching"]
        assert (breaching["broker_id"], breaching["holds"], breaching["reason"]) == (1000, ["metadata"], "hard limit")
        assert stack.table()["mutation_factor"] == 0.0
        time.sleep(POLL + 1)  # every controller's shim has the table

        throttle_ms = stack.refuses_mutations("refused")
        assert 0 < throttle_ms < 2**31 - 1  # finite
        breach_started = time.monotonic()
        time.sleep(3)
        during = time.monotonic()
        rate_during = producer.rate(during - 3, during)
        # Untouched: not slower than before. Faster is a producer catching up with what a loaded
        # machine held back before the breach, never more than it offers.
        assert rate_during >= 0.8 * rate_before and rate_during <= 1.25 * offered, (rate_before, rate_during, offered)
        assert producer.throttled_brokers(breach_started) == {}, "a producer was throttled by a metadata-only breach"
    finally:
        producer.stop()
        if filler is not None:
            filler.unlink()

    freed = time.monotonic()
    attempt = 0
    while not stack.created(f"restored-{attempt}"):
        assert time.monotonic() - freed <= CHECK + 2, "topic creation not restored within check interval + 2 s"
        attempt += 1
        time.sleep(0.1)
    assert time.monotonic() - freed <= CHECK + 2, f"restored only after {time.monotonic() - freed:.1f} s"
    assert service.decision()["mutation_factor"] == 1.0


def test_a_full_combined_node_volume_throttles_both_produce_and_mutations(stack):
    service = stack.service
    producer = LoadProducer({"bootstrap.servers": stack.cluster.bootstrap_servers}, rate_per_partition=RATE)
    filler = None
    try:
        filler = fill(stack.cluster.mount_point(COMBINED))
        started = time.monotonic()
        decision, _ = service.wait_for(
            lambda d: d["mutation_factor"] == 0.0 and d["factor"] == 0.0 and [v["broker_id"] for v in d["metadata"]["breaching"]] == [COMBINED],
            CHECK + POLL + 5,
            "both factors 0, the combined node's volume in breach",
        )
        assert decision["state"] == "PAUSE" and decision["breaching"] == []  # the data limit is not what breaches
        assert decision["metadata"]["breaching"][0]["holds"] == ["data", "metadata"]
        table = stack.table()
        assert (table["factor"], table["mutation_factor"]) == (0.0, 0.0)
        wait_until(lambda: len(producer.throttled_brokers(started)) == 3, CHECK + POLL + 10, "every broker throttling produce", lambda: producer.throttled_brokers(started))
        stack.refuses_mutations("combined")
    finally:
        producer.stop()
        if filler is not None:
            filler.unlink()
    service.wait_for(lambda d: d["mutation_factor"] == 1.0 and d["factor"] == 1.0, CHECK + POLL + 5, "both factors back to 1")
    wait_until(lambda: stack.created(f"combined-restored-{time.monotonic_ns()}"), CHECK + 4, "topic creation restored")


def test_an_older_admin_client_is_throttled_not_refused(stack):
    """librdkafka (confluent-kafka 2.16) sends CreateTopics v4 at most: Kafka records its
    mutations permissively (KIP-599, for the versions before 6), so at mutation factor 0 its
    topics are still created, and the answer carries the throttle time for the debt."""
    service = stack.service
    filler = fill(stack.cluster.metadata_log_dir(1002))
    throttles: list = []
    try:
        service.wait_for(lambda d: d["mutation_factor"] == 0.0, CHECK + POLL + 5, "mutation factor 0")
        time.sleep(POLL + 1)  # every controller's shim has the table
        admin = AdminClient({"bootstrap.servers": stack.cluster.bootstrap_servers, "throttle_cb": throttles.append})
        names = ["older-a", "older-b"]
        futures = admin.create_topics([NewTopic(name, 1, 1) for name in names], operation_timeout=10, request_timeout=20)
        for name in names:
            futures[name].result(30)  # created: not refused
        admin.poll(1)
        assert max(event.throttle_time for event in throttles) > 60, throttles  # seconds: the debt at 0.01 partitions/s
    finally:
        filler.unlink()
    service.wait_for(lambda d: d["mutation_factor"] == 1.0, CHECK + POLL + 5, "mutation factor 1")


def test_a_stopped_controller_is_forgotten_one_validity_duration_after_its_last_report_a_fenced_broker_kept(stack):
    """Last: it stops a quorum voter (three of four remain) and broker 1."""
    service = stack.service
    # A broker that stops stays registered, fenced: its last report is kept while rounds list it so.
    stack.cluster.stop_broker(1)
    broker_stopped = time.monotonic()
    service.wait_for(lambda d: [f["broker_id"] for f in d["fenced_brokers"]] == [1], CHECK + 10, "broker 1 listed as fenced")

    fill(stack.cluster.metadata_log_dir(1001))
    service.wait_for(lambda d: d["mutation_factor"] == 0.0, CHECK + POLL + 5, "mutation factor 0")
    stack.cluster.stop_node(1001)
    # Its last report, and when /volumes says it leaves the view (the report's arrival + validity).
    last = stack.volumes()[1001]
    expires = datetime.fromisoformat(last["expires_at"].replace("Z", "+00:00")).timestamp()
    assert expires == pytest.approx(datetime.fromisoformat(last["observed_at"].replace("Z", "+00:00")).timestamp() + VALIDITY, abs=0.01)
    # Kept while its last report is valid: the breach still refuses mutations...
    if expires - time.time() > 1:
        time.sleep((expires - time.time()) / 2)
        assert service.decision()["mutation_factor"] == 0.0
        assert 1001 in stack.volumes()
    # ...and forgotten once it is older than the validity duration.
    decision, _ = service.wait_for(lambda d: d["mutation_factor"] == 1.0, max(0.0, expires - time.time()) + 2, "the stopped controller forgotten")
    assert time.time() > expires
    assert 1001 not in stack.volumes() and 1001 not in decision["metadata"]["reporting_nodes"]
    # The fenced broker's last report outlives the validity.
    time.sleep(max(0.0, broker_stopped + VALIDITY + 1 - time.monotonic()))
    kept = stack.volumes()[1]
    assert kept["log_dir"] == str(stack.cluster.metadata_log_dir(1)) and kept["broker_fenced"] is True, kept
    assert kept["age_seconds"] > VALIDITY
