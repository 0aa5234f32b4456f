"""Several replicas sharing one quota table through the Kafka-backed store, on the real 3-broker
cluster: a change through one is served by the other within a second, a burst over both
leaves identical tables, a replica killed and restarted rebuilds the table from the topic, one
broker down does not stop writes, an unreachable topic refuses writes (503) while reads keep
the last table; and the one-shot copy from SQLite."""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
import uuid

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from devtools.commands import run_command

from .conftest import ROOT, RunningService

TOKEN = "replicas-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SETTINGS = {
    "storage_check_interval": "PT1S",
    "storage_per_volume_limit_min_available_ratio": "0.01",
    "admin_token": TOKEN,
    "quota_store": "kafka",
}


@pytest.fixture
def replicas(start_service):
    """Start ``count`` replicas sharing a topic of their own; waits until each is ready."""

    def start(count: int = 2, topic: str | None = None, **settings: str) -> list[RunningService]:
        topic = topic or f"quotas-{uuid.uuid4().hex[:8]}"
        started = [start_service(**{**SETTINGS, "quota_store_topic": topic, **settings}) for _ in range(count)]
        for service in started:
            service.wait_ready()
        return started

    return start


def table(service: RunningService) -> dict:
    """The overrides and groups a replica serves."""
    body = service.client.get("/quotas").json()
    return {"overrides": body["overrides"], "groups": body["groups"]}


def store_metrics(service: RunningService) -> dict[str, float]:
    """The quota store's samples on a replica's /metrics."""
    families = text_string_to_metric_families(service.client.get("/metrics").text)
    return {sample.name: sample.value for family in families for sample in family.samples if sample.name.startswith("kafka_throttle_quota")}


def put_override(service: RunningService, user: str, produce: float) -> httpx.Response:
    return service.client.put("/quotas/overrides", params={"user": user}, json={"produce": produce}, headers=AUTH)


def test_a_change_through_one_replica_is_served_at_once_by_it_and_within_a_second_by_the_other(replicas):
    one, other = replicas()
    assert put_override(one, "alice", 1048576).status_code == 200
    assert [o["entity"]["user"] for o in table(one)["overrides"]] == ["alice"], "read-your-writes"
    started = time.monotonic()
    while not table(other)["overrides"]:
        assert time.monotonic() - started < 1.0, "the other replica did not serve the change within a second"
        time.sleep(0.02)
    assert table(other) == table(one)
    print(f"\nthe other replica served the change {1000 * (time.monotonic() - started):.0f} ms after the first acknowledged it")


def test_a_burst_of_changes_over_both_replicas_leaves_identical_tables(replicas):
    one, other = replicas()
    errors: list[str] = []

    def burst(service: RunningService, worker: int) -> None:
        rng = random.Random(worker)
        client = httpx.Client(base_url=service.base_url, headers=AUTH, timeout=30)
        for n in range(50):
            user = f"user-{rng.randrange(40)}"
            if rng.random() < 0.2:
                response = client.delete("/quotas/overrides", params={"user": user})
                ok = response.status_code in (204, 404)
            elif rng.random() < 0.1:
                members = {"users": [f"member-{worker}-{n}"], "limits": {"fetch": 1_000_000 + n}}
                response = client.put(f"/quotas/groups/group-{rng.randrange(5)}", json=members)
                ok = response.status_code in (200, 409)
            else:
                response = client.put("/quotas/overrides", params={"user": user}, json={"produce": 1_000_000 + worker * 100 + n})
                ok = response.status_code == 200
            if not ok:
                errors.append(f"{response.request.method} {response.request.url}: {response.status_code} {response.text}")
        client.close()

    threads = [threading.Thread(target=burst, args=(service, worker)) for worker, service in enumerate([one, other, one, other])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    time.sleep(1.0)
    assert table(one) == table(other)
    assert len(table(one)["overrides"]) > 10
    held = {"kafka_throttle_quota_overrides": len(table(one)["overrides"]), "kafka_throttle_quota_groups": len(table(one)["groups"])}
    for service in (one, other):
        assert store_metrics(service) == {**held, "kafka_throttle_quota_store_lag_records": 0, "kafka_throttle_quota_store_write_failures_total": 0}
    print(f"\n200 changes over two replicas: {len(table(one)['overrides'])} overrides, {len(table(one)['groups'])} groups, identical")


def test_a_replica_killed_with_sigkill_rebuilds_the_same_table_from_the_topic(replicas, start_service):
    one, other = replicas()
    for n in range(20):
        assert put_override(one if n % 2 else other, f"user-{n}", 1_000_000 + n).status_code == 200
    assert one.client.put("/quotas/groups/etl", json={"client_ids": ["loader"], "limits": {"produce": 5_000_000}}, headers=AUTH).status_code == 200
    expected = table(one)
    topic = next(line for line in one.log().splitlines() if "quota topic" in line).split("'")[1]
    other.process.send_signal(signal.SIGKILL)
    other.process.wait(10)
    restarted = start_service(**{**SETTINGS, "quota_store_topic": topic})
    restarted.wait_ready()
    assert table(restarted) == expected


def enforcement_seen(service: RunningService) -> tuple:
    """The enforcement a replica serves: its own endpoint, and what /throttle-factor and /quotas say."""
    own = service.client.get("/enforcement").json()
    decision, quotas = service.decision(), service.client.get("/quotas").json()
    return (own["mode"], own["canary_brokers"], own["source"]), (decision["enforced"], decision["canary_brokers"]), (quotas["enforced"], quotas["canary_brokers"])


def test_a_change_of_enforcement_through_one_replica_is_served_by_the_other_within_a_second_and_survives_a_restart(replicas, start_service):
    one, other = replicas(enforcement="shadow")
    topic = next(line for line in one.log().splitlines() if "quota topic" in line).split("'")[1]
    assert enforcement_seen(other) == (("shadow", [], "settings"), (False, []), (False, []))
    quotas_etag = other.client.get("/quotas").headers["etag"]
    changed = one.client.put("/enforcement", json={"mode": "enforce", "canary_brokers": [2]}, headers=AUTH)
    assert changed.status_code == 200, changed.text
    expected = (("enforce", [2], "store"), (True, [2]), (True, [2]))
    assert enforcement_seen(one) == expected, "read-your-writes"
    started = time.monotonic()
    # What a shim on the other replica sees: its long-poll answers with the change.
    woken = other.client.get("/quotas", params={"wait": "10s"}, headers={"If-None-Match": quotas_etag})
    assert woken.status_code == 200 and (woken.json()["enforced"], woken.json()["canary_brokers"]) == (True, [2])
    assert time.monotonic() - started < 1.0, "the other replica did not serve the change within a second"
    assert enforcement_seen(other) == expected
    print(f"\nthe other replica served the change of enforcement {1000 * (time.monotonic() - started):.0f} ms after the first acknowledged it")

    # Invalid changes are refused by either replica and change nothing anywhere.
    for body, headers, status in (
        ({"mode": "audit"}, AUTH, 422),
        ({"mode": "enforce", "canary_brokers": [99]}, AUTH, 409),
        ({"mode": "shadow"}, {}, 401),
    ):
        refused = other.client.put("/enforcement", json=body, headers=headers)
        assert refused.status_code == status and refused.headers["content-type"].startswith("application/problem+json"), refused.text
    time.sleep(0.5)
    assert enforcement_seen(one) == enforcement_seen(other) == expected

    # Both stop; a new replica, whose settings still say shadow, serves what the store holds.
    for service in (one, other):
        service.process.send_signal(signal.SIGKILL)
        service.process.wait(10)
    restarted = start_service(**{**SETTINGS, "quota_store_topic": topic, "enforcement": "shadow"})
    restarted.wait_ready()
    assert enforcement_seen(restarted) == expected
    # DELETE returns to the settings, on every replica.
    back = restarted.client.delete("/enforcement", headers=AUTH)
    assert back.status_code == 200 and (back.json()["mode"], back.json()["source"]) == ("shadow", "settings")
    assert enforcement_seen(restarted) == (("shadow", [], "settings"), (False, []), (False, []))


def test_with_one_broker_down_the_store_still_accepts_writes(replicas, kafka_cluster):
    (one,) = replicas(count=1)
    kafka_cluster.stop_broker(3)
    try:
        started = time.monotonic()
        response = put_override(one, "while-broker-3-is-down", 2_097_152)
        assert response.status_code == 200, response.text
        assert any(o["entity"]["user"] == "while-broker-3-is-down" for o in table(one)["overrides"])
        print(f"\na write with broker 3 down took {1000 * (time.monotonic() - started):.0f} ms")
    finally:
        kafka_cluster.start_broker(3)


def test_with_the_topic_unreachable_writes_get_503_and_reads_keep_the_last_table(replicas, kafka_cluster):
    (one,) = replicas(count=1)
    assert put_override(one, "before", 1_000_000).status_code == 200
    before = table(one)
    for broker in kafka_cluster.broker_ids:
        kafka_cluster.freeze_broker(broker)
    try:
        started = time.monotonic()
        refused = one.client.put("/quotas/overrides", params={"user": "during"}, json={"produce": 2_000_000}, headers=AUTH, timeout=30)
        print(f"\nwith every broker frozen, a write was refused after {time.monotonic() - started:.1f} s")
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "quota topic" in refused.json()["detail"]
        assert one.client.get("/quotas").status_code == 200 and table(one) == before
        assert store_metrics(one)["kafka_throttle_quota_store_write_failures_total"] == 1
    finally:
        for broker in kafka_cluster.broker_ids:
            kafka_cluster.thaw_broker(broker)
    thawed = time.monotonic()
    deadline = thawed + 60  # a loaded machine: three clusters beside each other, brokers fenced after 3 s
    while (after := put_override(one, "after", 3_000_000)).status_code != 200:
        assert time.monotonic() < deadline, f"writes did not come back with the cluster: {after.status_code} {after.text}\nservice log:\n{one.log()[-3000:]}"
        time.sleep(1)
    print(f"writes came back {time.monotonic() - thawed:.1f} s after the brokers were thawed")


def test_migrate_store_copies_the_sqlite_overrides_groups_and_enforcement_into_the_topic(start_service, replicas, tmp_path):
    data_dir = str(tmp_path / "sqlite-replica")
    single = start_service(**{**SETTINGS, "quota_store": "sqlite"}, data_dir=data_dir)
    for n in range(5):
        assert put_override(single, f"user-{n}", 1_000_000 + n).status_code == 200
    assert single.client.put("/quotas/groups/etl", json={"users": ["bob"], "limits": {"fetch": 7_000_000}}, headers=AUTH).status_code == 200
    assert single.client.put("/enforcement", json={"mode": "shadow"}, headers=AUTH).status_code == 200
    expected = table(single)
    single.stop()

    topic = f"quotas-{uuid.uuid4().hex[:8]}"
    env = {**single.env, "THROTTLE_SERVICE_QUOTA_STORE": "kafka", "THROTTLE_SERVICE_QUOTA_STORE_TOPIC": topic}
    result = run_command([sys.executable, "-m", "app", "migrate-store"], 120, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "copied 5 overrides and 1 groups and the enforcement (shadow (no broker enforces))" in result.stdout
    (migrated,) = replicas(count=1, topic=topic)
    assert table(migrated) == expected
    assert enforcement_seen(migrated)[0] == ("shadow", [], "store")


def test_the_store_topic_is_created_compacted_with_three_replicas_and_two_in_sync(replicas, kafka_cluster):
    from confluent_kafka.admin import AdminClient, ConfigResource

    topic = f"quotas-{uuid.uuid4().hex[:8]}"
    replicas(count=1, topic=topic)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions
    assert [len(p.replicas) for p in partitions.values()] == [3]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(timeout=30)
    assert (config["cleanup.policy"].value, config["min.insync.replicas"].value) == ("compact", "2")


def test_a_replica_turns_ready_on_a_topic_whose_end_holds_no_record_it_can_read(replicas, kafka_cluster):
    """An aborted transaction at the end of the topic (or records compacted away) leaves offsets
    no consumer receives: reaching the end is judged by the consumer's position, not by the
    offset of the last record read."""
    from confluent_kafka import Producer

    topic = f"quotas-{uuid.uuid4().hex[:8]}"
    (writer,) = replicas(count=1, topic=topic)
    assert put_override(writer, "kept", 1048576).status_code == 200
    writer.stop()
    aborted = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "transactional.id": f"abort-{topic}"})
    aborted.init_transactions(30)
    aborted.begin_transaction()
    aborted.produce(topic, key=b"never", value=b"read")
    aborted.flush(30)
    aborted.abort_transaction(30)
    (reader,) = replicas(count=1, topic=topic)  # waits until ready
    assert [o["entity"]["user"] for o in table(reader)["overrides"]] == ["kept"]


# -- one decision on every replica (app/server/runtime/shared_state.py) ---------------------------------

NODE_TOKEN = "replicas-node-token-0123456"
DECIDING = {
    "node_token": NODE_TOKEN,
    "metadata_limit_min_available_ratio": "0.1",
    "throttle_factor_validity_duration": "PT30S",
}


def deciders(services: list[RunningService]) -> list[RunningService]:
    """The replicas whose log says they are the decider now (the last such line is 'is now')."""
    out = []
    for service in services:
        lines = [line for line in service.log().splitlines() if "the decider (state topic" in line]
        if lines and "is now the decider" in lines[-1]:
            out.append(service)
    return out


def etag(service: RunningService) -> tuple[str, dict]:
    response = service.client.get("/throttle-factor")
    response.raise_for_status()
    return response.headers["etag"], response.json()


def wait_until_agreed(services: list[RunningService], timeout: float) -> tuple[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        seen = [etag(s) for s in services]
        if len({tag for tag, _ in seen}) == 1:
            return seen[0]
        assert time.monotonic() < deadline, f"ETags still differ after {timeout} s: {[(t, d['source'], d['factor']) for t, d in seen]}"
        time.sleep(0.05)


def metadata_report(free_ratio: float) -> dict:
    """A node's report of one 64 MiB metadata volume with ``free_ratio`` of it usable."""
    total = 64 * 1024 * 1024
    return {"roles": ["broker", "controller"], "volumes": [{"log_dir": "/kafka/meta", "total_bytes": total, "usable_bytes": int(total * free_ratio), "holds": ["metadata"]}]}


def report_metadata_volume(service: RunningService, node_id: int, free_ratio: float) -> httpx.Response:
    return service.client.put(f"/nodes/{node_id}/volumes", json=metadata_report(free_ratio), headers={"Authorization": f"Bearer {NODE_TOKEN}"})


def test_replicas_elect_one_decider_serve_its_decision_share_node_reports_and_survive_its_kill(replicas, start_service, kafka_cluster):
    topic = f"quotas-{uuid.uuid4().hex[:8]}"
    one, other = replicas(topic=topic, **DECIDING)
    deadline = time.monotonic() + 30
    while len(deciders([one, other])) != 1:
        assert time.monotonic() < deadline, f"no single decider:\n{one.log()[-2000:]}\n{other.log()[-2000:]}"
        time.sleep(0.1)
    decider = deciders([one, other])[0]
    follower = other if decider is one else one
    _, decision = wait_until_agreed([one, other], 5)
    assert decision["source"] == "observed", decision

    # A metadata volume in breach reported to the replica that does not decide: both serve it within a second.
    node_id = kafka_cluster.broker_ids[0]
    assert report_metadata_volume(follower, node_id, 0.05).status_code == 204
    started = time.monotonic()
    while any(s.decision()["mutation_factor"] != 0.0 for s in (one, other)):
        assert time.monotonic() - started < 1.0, [s.decision()["metadata"] for s in (one, other)]
        time.sleep(0.02)
    seen_in = time.monotonic() - started
    _, decision = wait_until_agreed([one, other], 2.0)
    assert decision["mutation_factor"] == 0.0

    # A round-robin client while the decider is killed: the survivor takes over from the last
    # snapshot; no sample loses the metadata breach or changes the factor, and the ETags meet again.
    samples: list[dict] = []
    decider.process.send_signal(signal.SIGKILL)
    decider.process.wait(5)
    killed = time.monotonic()
    while not deciders([follower]) or follower.decision()["resumed_from"] is not None:
        samples.append(follower.decision())
        assert time.monotonic() - killed < 30, f"no takeover within 30 s:\n{follower.log()[-3000:]}"
        time.sleep(0.05)
    took_over = time.monotonic() - killed
    samples.append(follower.decision())
    assert {(d["factor"], d["mutation_factor"]) for d in samples} == {(decision["factor"], 0.0)}, samples[-3:]
    assert samples[-1]["source"] == "observed", samples[-1]

    # The killed replica started again mirrors the new decider: the same ETag within a check interval.
    restarted = start_service(**{**SETTINGS, "quota_store_topic": topic, **DECIDING})
    restarted.wait_ready()
    wait_until_agreed([follower, restarted], 2.0)
    assert restarted.decision()["mutation_factor"] == 0.0
    assert deciders([restarted]) == [], "the running decider keeps its place when a replica joins"
    print(f"\nreplicas: node report on both in {1000 * seen_in:.0f} ms; takeover {took_over:.1f} s after the decider's kill, "
          f"{len(samples)} samples all factor {decision['factor']}, mutation factor 0")
