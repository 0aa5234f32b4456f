"""The real service, over HTTP, observing a real 3-broker KRaft cluster on 64 MiB tmpfs volumes.

Tests that stop brokers restore them before they end, so the order of tests does not matter."""

from __future__ import annotations

import os
import signal
import time
from datetime import datetime

import pytest
from kafka import KafkaAdminClient

from app.kafka.volume_source import KafkaVolumeSource

from .conftest import SASL_USERS, MiB, VOLUME_MIB, create_topic_on, delete_topic, fill

CHECK = 1.0  # check interval in seconds used by these tests
FAST = {"storage_check_interval": "PT1S", "kafka_request_timeout": "PT0.8S"}


def breaching_volumes(decision: dict) -> set[tuple[int, str]]:
    return {(v["broker_id"], v["log_dir"]) for v in decision["breaching"]}


def test_healthy_cluster_gives_factor_one_and_volume_totals_equal_to_the_mounts(kafka_cluster, start_service):
    service = start_service(**FAST, storage_per_volume_limit_min_available_bytes=str(8 * MiB))
    decision, _ = service.wait_for(lambda d: d["source"] == "observed", 10, "observed")
    assert (decision["factor"], decision["state"]) == (1.0, "OPEN")
    assert decision["active_brokers"] == 3 and decision["active_log_dirs"] == 3
    assert decision["round"]["complete"] is True
    volumes = service.client.get("/volumes").json()["volumes"]
    assert {v["broker_id"] for v in volumes} == {1, 2, 3}
    for volume in volumes:
        assert volume["total_bytes"] == VOLUME_MIB * MiB
        assert VOLUME_MIB * MiB - 4 * MiB < volume["usable_bytes"] <= VOLUME_MIB * MiB
        assert volume["log_dir"] == str(kafka_cluster.log_dir(volume["broker_id"]))
    assert service.client.get("/readyz").status_code == 200
    metrics = service.client.get("/metrics").text
    series = f'kafka_throttle_volume_total_bytes{{broker_id="1",log_dir="{kafka_cluster.log_dir(1)}"}} '
    line = next(line for line in metrics.splitlines() if line.startswith(series))
    assert float(line[len(series) :]) == VOLUME_MIB * MiB


def test_describe_log_dirs_with_an_empty_topic_list_lists_no_partitions(kafka_cluster):
    create_topic_on(kafka_cluster, "listed", 1)
    try:
        fill(kafka_cluster, "listed", 1)
        source = KafkaVolumeSource(kafka_cluster.bootstrap_servers, request_timeout_seconds=5)
        try:
            round_ = source.observe()
        finally:
            source.close()
        assert round_.complete and len(round_.observations) == 3
        assert all(version >= 4 for version in source.log_dirs_versions.values()), source.log_dirs_versions
        assert source.topics_listed == 0
        # The library's own call (all topics) does list the partition: the empty list is what keeps answers small.
        admin = KafkaAdminClient(bootstrap_servers=kafka_cluster.bootstrap_servers)
        try:
            answer = admin.describe_log_dirs(brokers=[1])
        finally:
            admin.close()
        assert any(topic["name"] == "listed" for log_dir in answer[0]["log_dirs"] for topic in log_dir["topics"])
    finally:
        delete_topic(kafka_cluster, "listed")


def test_filling_one_volume_pauses_within_one_check_interval_and_recovers(kafka_cluster, start_service):
    service = start_service(**FAST, storage_per_volume_limit_min_available_bytes=str(40 * MiB))
    service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 10, "observed OPEN")
    create_topic_on(kafka_cluster, "fill-2", 2)
    try:
        fill(kafka_cluster, "fill-2", 28)
        filled_at = time.monotonic()
        decision, _ = service.wait_for(lambda d: d["state"] == "PAUSE", CHECK + 5, "PAUSE")
        assert time.monotonic() - filled_at <= CHECK + 5
        assert decision["factor"] == 0.0
        assert breaching_volumes(decision) == {(2, str(kafka_cluster.log_dir(2)))}
        assert decision["breaching"][0]["usable_bytes"] <= 40 * MiB
        assert "state OPEN -> PAUSE" in service.log()
    finally:
        delete_topic(kafka_cluster, "fill-2")
    decision, _ = service.wait_for(lambda d: d["state"] == "OPEN", 30, "OPEN again after deleting the topic")
    assert decision["breaching"] == []


def test_a_soft_limit_throttles_with_a_factor_between_zero_and_one(kafka_cluster, start_service):
    service = start_service(
        **FAST,
        storage_per_volume_limit_min_available_bytes=str(16 * MiB),
        storage_per_volume_soft_limit_min_available_bytes=str(56 * MiB),
    )
    service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 10, "observed OPEN")
    create_topic_on(kafka_cluster, "soft-3", 3)
    try:
        fill(kafka_cluster, "soft-3", 24)
        decision, _ = service.wait_for(lambda d: d["state"] == "THROTTLE", CHECK + 5, "THROTTLE")
        assert 0.0 < decision["factor"] < 1.0
        ramping = decision["ramping"][0]
        assert (ramping["broker_id"], ramping["log_dir"]) == (3, str(kafka_cluster.log_dir(3)))
        expected = (ramping["usable_bytes"] - 16 * MiB) / (40 * MiB)
        assert decision["factor"] == pytest.approx(expected, abs=1e-9)
    finally:
        delete_topic(kafka_cluster, "soft-3")


def test_a_frozen_broker_marks_the_round_incomplete_without_voiding_the_others(kafka_cluster):
    pid = kafka_cluster.pids()[3]
    source = KafkaVolumeSource(kafka_cluster.bootstrap_servers, request_timeout_seconds=2)
    try:
        deadline = time.monotonic() + 15
        while source.observe().answered_brokers != (1, 2, 3):  # every broker registered and unfenced
            assert time.monotonic() < deadline, "brokers did not all become active"
            time.sleep(0.2)
        os.kill(pid, signal.SIGSTOP)
        try:
            round_ = source.observe()
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        source.close()
    assert not round_.complete
    assert set(round_.missing_brokers) == {3}
    assert {o.broker_id for o in round_.observations} == {1, 2}
    # the brokers were asked at once: the round costs about one timeout, not one per broker
    assert round_.finished_at - round_.started_at < 2 * 2


def test_a_stopped_broker_is_kept_while_registered_or_with_expire_forgotten_after_the_validity(kafka_cluster, start_service):
    validity = 8.0
    settings = {**FAST, "throttle_factor_validity_duration": "PT8S", "storage_per_volume_limit_min_available_bytes": str(8 * MiB)}
    keeping = start_service(**settings)
    expiring = start_service(**settings, fenced_broker_observations="expire")
    for service in (keeping, expiring):
        service.wait_for(lambda d: d["source"] == "observed" and d["active_log_dirs"] == 3, 10, "observed")
    kafka_cluster.stop_broker(2)
    try:
        for service in (keeping, expiring):
            decision, _ = service.wait_for(lambda d: d["active_brokers"] == 2, 15, "broker 2 leaving DescribeCluster")
            assert decision["active_log_dirs"] == 3  # still remembered
            assert any(v["broker_id"] == 2 and not v["broker_active"] and v["broker_fenced"] for v in service.client.get("/volumes").json()["volumes"])
        [kept] = [v for v in expiring.client.get("/volumes").json()["volumes"] if v["broker_id"] == 2]
        observed_at = datetime.fromisoformat(kept["observed_at"]).timestamp()
        assert datetime.fromisoformat(kept["expires_at"]).timestamp() == pytest.approx(observed_at + validity, abs=0.002)
        decision, _ = expiring.wait_for(lambda d: d["active_log_dirs"] == 2, validity + 5, "broker 2 forgotten")
        # Forgotten once its last observation was older than the validity duration, not before.
        assert time.time() >= observed_at + validity
        assert decision["source"] == "observed" and decision["factor"] == 1.0
        # A gracefully stopped broker stays registered, fenced: with "keep" its observation stays.
        time.sleep(2)
        decision = keeping.decision()
        assert decision["active_log_dirs"] == 3 and [f["broker_id"] for f in decision["fenced_brokers"]] == [2], decision
        kept = [v for v in keeping.client.get("/volumes").json()["volumes"] if v["broker_id"] == 2]
        assert kept and all(v["broker_fenced"] and v["age_seconds"] > validity for v in kept), kept
        assert decision["source"] == "observed" and decision["factor"] == 1.0
    finally:
        kafka_cluster.start_broker(2)
    for service in (keeping, expiring):
        service.wait_for(lambda d: d["active_brokers"] == 3 and d["active_log_dirs"] == 3 and d["fenced_brokers"] == [], 30, "broker 2 back")


def test_all_brokers_stopped_gives_last_valid_then_fallback(kafka_cluster, start_service):
    service = start_service(
        **FAST,
        throttle_factor_validity_duration="PT6S",
        throttle_factor_fallback="0.0",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
    )
    service.wait_for(lambda d: d["source"] == "observed", 10, "observed")
    try:
        for broker in kafka_cluster.broker_ids:
            kafka_cluster.stop_broker(broker)
        decision, _ = service.wait_for(lambda d: d["source"] == "last-valid", 10, "last-valid")
        assert decision["factor"] == 1.0 and decision["round"]["error"]
        decision, _ = service.wait_for(lambda d: d["source"] == "fallback", 10, "fallback")
        assert (decision["factor"], decision["state"]) == (0.0, "PAUSE")
        assert service.client.get("/readyz").status_code == 200
        assert "fallback factor 0.000 applied" in service.log()
        assert "kafka_throttle_fallback_in_force 1.0" in service.client.get("/metrics").text
    finally:
        for broker in kafka_cluster.broker_ids:
            kafka_cluster.start_broker(broker)
    decision, _ = service.wait_for(lambda d: d["source"] == "observed", 60, "observed again")
    assert decision["factor"] == 1.0


def test_an_unreachable_bootstrap_at_start_gives_the_fallback_after_the_validity(start_service):
    service = start_service(
        **FAST,
        kafka_admin_bootstrap_servers="127.0.0.1:1",
        throttle_factor_validity_duration="PT4S",
        throttle_factor_fallback="0.0",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
    )
    initial = service.decision()
    assert (initial["source"], initial["factor"]) == ("initial", 1.0)
    assert service.client.get("/readyz").status_code == 503
    decision, _ = service.wait_for(lambda d: d["source"] == "fallback", 10, "fallback")
    assert decision["factor"] == 0.0 and decision["round"]["error"].startswith("DescribeCluster failed")
    # the fallback took over exactly when the start-up validity ran out
    assert decision["computed_at"] == initial["valid_until"]
    assert service.client.get("/readyz").status_code == 200


def sasl_env(password: str) -> dict[str, str]:
    prefix = "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_"
    return {
        prefix + "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        prefix + "SASL_MECHANISM": "PLAIN",
        prefix + "SASL_JAAS_CONFIG": f'org.apache.kafka.common.security.plain.PlainLoginModule required username="throttle" password="{password}";',
    }


def test_admin_client_properties_reach_the_admin_client(kafka_cluster, start_service):
    sasl_bootstrap = kafka_cluster.bootstrap_servers_for("SASL_PLAINTEXT")
    service = start_service(
        extra_env=sasl_env(SASL_USERS["throttle"]),
        kafka_admin_bootstrap_servers=sasl_bootstrap,
        storage_check_interval="PT1S",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
    )
    decision, _ = service.wait_for(lambda d: d["source"] == "observed", 15, "observed over SASL/PLAIN")
    assert decision["active_brokers"] == 3
    refused = start_service(
        extra_env=sasl_env("wrong"),
        kafka_admin_bootstrap_servers=sasl_bootstrap,
        # time enough for the SASL handshake to be refused (a round's request timeout is 0.8 x
        # the interval; on a loaded machine 2.4 s was not, and every round timed out instead)
        storage_check_interval="PT8S",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
    )
    # A round may also just time out during the handshake; the refusal must surface soon.
    decision, _ = refused.wait_for(
        lambda d: "Authentication failed: Invalid username or password" in (d["round"]["error"] or ""), 60, "the refusal reported"
    )
    assert decision["source"] == "initial"
    error = decision["round"]["error"]
    assert error.startswith("DescribeCluster failed"), error
    # kafka-python's per-attempt errors stay out of the log; the failure is logged once, with its cause
    log = refused.log()
    assert "SaslAuthenticationFailedError" not in log.replace(error, "")
    assert log.count("observation failing") == 1, log
