"""Security against a real cluster: the admin client over mutual TLS and over SASL_SSL with
SCRAM-SHA-512, certificate files rotated under a running service (Strimzi
kafka-quotas-plugin#63), the broker shim polling the service over HTTPS with a keytool-made
trust store, and no configured secret anywhere the service writes or answers.

One cluster for the module: 2 brokers (enough for "every broker", lighter on a shared
machine), each with an SSL listener that requires a client certificate and a SASL_SSL
listener with SCRAM-SHA-512, and the shim as client.quota.callback.class."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from app.settings.loading import environ_without_settings
from app.settings.model import env_name, property_name
from devtools.commands import run_command
from devtools.devcluster import LocalKafkaCluster

from .conftest import ROOT, MiB, free_port
from .pki import STORE_PASSWORD, Pki

ADMIN = "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_"
PRODUCER = "THROTTLE_SERVICE_HISTORY_KAFKA_PRODUCER_"
KEY_PASSWORD = "key-pass-Zr8Wn4"
SCRAM_USERS = {"throttle": "scram-pw-Q7xK2m", "history": "history-pw-Tb5Jy1"}
ADMIN_TOKEN = "admin-token-Hq3Vd9Lp0sXc"
SHIM_TABLE_LINE = "Throttle service shim: table from"
# ACLs are enforced (KRaft's own authorizer); a resource without any ACL stays open to every
# principal, and the plaintext listeners (inter-broker, controller, the fixture's admin) are
# super users, so only what a test denies is denied.
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
    "super.users": "User:ANONYMOUS",
}
TIMING = {
    "storage_check_interval": "PT2S",
    "kafka_request_timeout": "PT1.5S",  # TLS and SCRAM handshakes on a busy machine
    "throttle_factor_validity_duration": "PT30S",
    "storage_per_volume_limit_min_available_bytes": str(8 * MiB),
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def https_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def secure_cluster(pki: Pki, shim_jar: Path, https_port: int) -> Iterator[LocalKafkaCluster]:
    broker = pki.leaf("broker")
    shim_truststore = pki.truststore("shim-truststore")
    cluster = LocalKafkaCluster(
        brokers=2,
        log_dir_size_mib=64,
        extra_listeners={"SSL": "SSL", "SASL_SSL": "SASL_SSL"},
        extra_classpath=[shim_jar],
        broker_config={
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(broker.pkcs12),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca_cert),
            "listener.name.ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "client.quota.callback.class": "io.kafkathrottle.shim.ServiceQuotaCallback",
            "client.quota.callback.service.url": f"https://127.0.0.1:{https_port}",
            "client.quota.callback.service.ssl.truststore.location": str(shim_truststore),
            "client.quota.callback.service.ssl.truststore.password": STORE_PASSWORD,
            "client.quota.callback.service.ssl.truststore.type": "PKCS12",
            "client.quota.callback.service.poll.interval.ms": "500",
            "client.quota.callback.service.long.poll.wait.ms": "5000",
            "client.quota.callback.service.request.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "500",
            **AUTHORIZER,
        },
        controller_config={"broker.session.timeout.ms": "3000", **AUTHORIZER},
    )
    cluster.start()
    try:
        # SCRAM users live in the cluster metadata (what kafka-configs --alter --add-config does)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        upserts = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
            for user, password in SCRAM_USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(timeout=30)
        yield cluster
    finally:
        cluster.stop()


def tls_env(truststore: Path, keystore: Path | None = None, store_type: str = "PEM", **passwords: str) -> dict[str, str]:
    env = {ADMIN + "SECURITY_PROTOCOL": "SSL", ADMIN + "SSL_TRUSTSTORE_LOCATION": str(truststore), ADMIN + "SSL_TRUSTSTORE_TYPE": store_type}
    if keystore is not None:
        env |= {ADMIN + "SSL_KEYSTORE_LOCATION": str(keystore), ADMIN + "SSL_KEYSTORE_TYPE": store_type}
    env |= {ADMIN + name.upper(): value for name, value in passwords.items()}
    return env


def scram_env(pki: Pki, password: str) -> dict[str, str]:
    return {
        ADMIN + "SECURITY_PROTOCOL": "SASL_SSL",
        ADMIN + "SASL_MECHANISM": "SCRAM-SHA-512",
        ADMIN + "SASL_JAAS_CONFIG": (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="throttle" password="{password}";'
        ),
        ADMIN + "SSL_TRUSTSTORE_LOCATION": str(pki.ca_cert),
    }


def observed(decision: dict) -> bool:
    return decision["source"] == "observed" and decision["round"]["error"] is None and decision["active_brokers"] == 2


def test_service_observes_the_cluster_over_mutual_tls_with_pem_files(secure_cluster, pki, start_service):
    client = pki.leaf("client-pem", key_password=KEY_PASSWORD)
    service = start_service(
        extra_env=tls_env(pki.ca_cert, client.bundle, ssl_key_password=KEY_PASSWORD),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SSL"),
        **TIMING,
    )
    decision, _ = service.wait_for(observed, 30, "observed over mutual TLS")
    assert decision["active_log_dirs"] == 2


def test_pkcs12_key_and_trust_stores_made_by_keytool_and_openssl_work_like_pem(secure_cluster, pki, start_service):
    client = pki.leaf("client-p12", key_password=KEY_PASSWORD)
    service = start_service(
        extra_env=tls_env(pki.truststore("admin-truststore"), client.pkcs12, "PKCS12",
                          ssl_truststore_password=STORE_PASSWORD, ssl_keystore_password=KEY_PASSWORD),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SSL"),
        **TIMING,
    )
    service.wait_for(observed, 30, "observed with PKCS12 stores")


def test_a_certificate_the_brokers_do_not_trust_is_refused(secure_cluster, pki, start_service):
    rogue = pki.leaf("client-rogue", rogue=True)
    service = start_service(
        extra_env=tls_env(pki.ca_cert, rogue.bundle),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SSL"),
        **TIMING,
    )
    time.sleep(6)  # several rounds
    decision = service.decision()
    assert decision["source"] == "initial" and decision["round"]["error"], decision


def replace_atomically(target: Path, source: Path) -> None:
    """As a certificate manager does: write beside, then rename over the old file."""
    staging = target.with_suffix(".new")
    staging.write_bytes(source.read_bytes())
    os.replace(staging, target)


def test_rotated_certificate_files_are_used_without_a_restart(secure_cluster, pki, start_service, tmp_path):
    """#63: the files named by the ssl settings are re-read when they change. A rotation to
    a certificate the brokers refuse must stop the observations (the old connections must
    not carry on with the old certificate), and a rotation to a good one must restore them."""
    first, rogue, second = (
        pki.leaf("client-first", key_password=KEY_PASSWORD),
        pki.leaf("client-rogue-rotated", key_password=KEY_PASSWORD, rogue=True),
        pki.leaf("client-second", key_password=KEY_PASSWORD),
    )
    live = tmp_path / "tls" / "client.pem"
    live.parent.mkdir()
    replace_atomically(live, first.bundle)
    service = start_service(
        extra_env=tls_env(pki.ca_cert, live, ssl_key_password=KEY_PASSWORD),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SSL"),
        **TIMING,
    )
    pid = service.process.pid
    service.wait_for(observed, 30, "observed with the first certificate")
    time.sleep(2)  # the client's connections are established and idle-free

    replace_atomically(live, rogue.bundle)
    decision, _ = service.wait_for(lambda d: d["round"]["error"] is not None, 30, "the rotated (untrusted) certificate used")
    assert decision["source"] == "last-valid"  # the factor observed with the first certificate still holds

    replace_atomically(live, second.bundle)
    service.wait_for(observed, 30, "observed again with the second certificate")
    assert service.process.poll() is None and service.process.pid == pid  # no restart
    log = service.log()
    assert log.count("admin client TLS files changed") == 2, log
    assert str(live) in log and KEY_PASSWORD not in log


def test_service_observes_over_sasl_ssl_with_scram_sha_512(secure_cluster, pki, start_service):
    bootstrap = secure_cluster.bootstrap_servers_for("SASL_SSL")
    service = start_service(extra_env=scram_env(pki, SCRAM_USERS["throttle"]), kafka_admin_bootstrap_servers=bootstrap, **TIMING)
    service.wait_for(observed, 30, "observed over SASL_SSL/SCRAM-SHA-512")

    wrong = "wrong-scram-pw-Lm4Rt8"
    slow = {**TIMING, "storage_check_interval": "PT6S", "kafka_request_timeout": "PT5S"}
    refused = start_service(extra_env=scram_env(pki, wrong), kafka_admin_bootstrap_servers=bootstrap, **slow)
    # kafka-python reports the refusal as an authentication error or, when the broker's
    # delayed refusal outlasts the bootstrap deadline, as a timeout: either way, no observation
    decision, _ = refused.wait_for(lambda d: d["round"]["error"] is not None, 30, "the round with a wrong password failed")
    time.sleep(6)  # another round
    decision = refused.decision()
    assert decision["source"] in ("initial", "fallback") and decision["active_brokers"] == 0, decision
    assert wrong not in str(decision) and wrong not in refused.log()


def test_the_kafka_quota_store_connects_with_the_admin_clients_tls_and_sasl_settings(secure_cluster, pki, start_service):
    token = "secure-store-admin-token"
    service = start_service(
        extra_env=scram_env(pki, SCRAM_USERS["throttle"]),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SASL_SSL"),
        quota_store="kafka",
        admin_token=token,
        **TIMING,
    )
    service.wait_for(observed, 30, "observed over SASL_SSL/SCRAM-SHA-512")
    service.wait_ready(30)
    response = service.client.put(
        "/quotas/overrides", params={"user": "alice"}, json={"produce": 4_194_304}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    assert [o["entity"]["user"] for o in service.client.get("/quotas").json()["overrides"]] == ["alice"]
    assert "created the quota topic 'kafka-throttle-quotas' (replication factor 2, min.insync.replicas 1" in service.log()


def _store_acls(topic: str) -> list[AclBinding]:
    """The service's user may read the quota topic but not write to it."""
    def acl(operation: AclOperation, permission: AclPermissionType) -> AclBinding:
        return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:throttle", "*", operation, permission)

    return [
        acl(AclOperation.READ, AclPermissionType.ALLOW),
        acl(AclOperation.DESCRIBE, AclPermissionType.ALLOW),
        acl(AclOperation.WRITE, AclPermissionType.DENY),
    ]


def test_a_quota_topic_the_service_may_not_write_gets_503_on_writes_while_reads_keep_the_table(secure_cluster, pki, start_service):
    """Issue: failures of the topic (unreachable, not authorised) are a problem+json 503 on
    writes, reads keep serving the last table; and once the ACL is lifted, writes work again
    without a restart."""
    topic = "acl-denied-quotas"
    token = "acl-store-admin-token"
    auth = {"Authorization": f"Bearer {token}"}
    service = start_service(
        extra_env=scram_env(pki, SCRAM_USERS["throttle"]),
        kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SASL_SSL"),
        quota_store="kafka",
        quota_store_topic=topic,
        admin_token=token,
        **TIMING,
    )
    service.wait_ready(60)
    assert service.client.put("/quotas/overrides", params={"user": "alice"}, json={"produce": 4_194_304}, headers=auth).status_code == 200

    admin = AdminClient({"bootstrap.servers": secure_cluster.bootstrap_servers})  # a super user
    for future in admin.create_acls(_store_acls(topic)).values():
        future.result(timeout=30)
    try:
        deadline = time.monotonic() + 30
        while True:  # an ACL reaches the brokers through the metadata log
            refused = service.client.put("/quotas/overrides", params={"user": "bob"}, json={"produce": 2_097_152}, headers=auth)
            if refused.status_code != 200 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "authoriz" in refused.json()["detail"].lower(), refused.json()
        table = service.client.get("/quotas")
        assert table.status_code == 200
        assert [o["entity"]["user"] for o in table.json()["overrides"]] == ["alice"], "reads keep the last table, without bob"
        assert service.client.get("/readyz").status_code == 200
    finally:
        filters = [AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY)]
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)

    deadline = time.monotonic() + 30
    while True:  # the ACL lifted: the same service writes again
        accepted = service.client.put("/quotas/overrides", params={"user": "bob"}, json={"produce": 2_097_152}, headers=auth)
        if accepted.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert accepted.status_code == 200, accepted.text + service.log()[-3000:]
    assert sorted(o["entity"]["user"] for o in service.client.get("/quotas").json()["overrides"]) == ["alice", "bob"]


def test_the_shim_in_every_broker_polls_the_service_over_https_with_its_trust_store(secure_cluster, pki, https_port, start_service):
    service_cert = pki.leaf("service-https")
    marks = {b: secure_cluster.server_log(b).stat().st_size for b in secure_cluster.broker_ids}
    service = start_service(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
        produce="1048576",
        http_port=str(https_port),
        http_ssl_certfile=str(service_cert.cert),
        http_ssl_keyfile=str(service_cert.key),
        ready_url=f"https://127.0.0.1:{https_port}",
        ready_verify=str(pki.ca_cert),
    )
    url = f"https://127.0.0.1:{https_port}/quotas"
    deadline = time.monotonic() + 30
    pending = set(secure_cluster.broker_ids)
    while pending and time.monotonic() < deadline:
        for broker in list(pending):
            with secure_cluster.server_log(broker).open(errors="replace") as log:
                log.seek(marks[broker])
                if any(SHIM_TABLE_LINE in line and url in line for line in log):
                    pending.discard(broker)
        time.sleep(0.3)
    assert not pending, f"brokers {sorted(pending)} never got the table over HTTPS:\n" + secure_cluster.server_log(min(pending)).read_text(errors="replace")[-3000:]
    # the service saw the shims' polls over TLS (the HTTP metrics count them)
    metrics = service.client.get("/metrics").text
    assert 'handler="/quotas"' in metrics


# -- secrets ------------------------------------------------------------------------------


def secret_env(pki: Pki, client_bundle: Path, bootstrap: str, data_dir: Path) -> dict[str, str]:
    settings = {
        **TIMING,
        "kafka_admin_bootstrap_servers": bootstrap,
        "admin_token": ADMIN_TOKEN,
        "history_kafka_enabled": "true",
        "log_level": "DEBUG",
        "data_dir": str(data_dir),
    }
    env = {env_name(property_name(field)): value for field, value in settings.items()}
    env |= scram_env(pki, SCRAM_USERS["throttle"])
    env |= {ADMIN + "SSL_KEYSTORE_LOCATION": str(client_bundle), ADMIN + "SSL_KEY_PASSWORD": KEY_PASSWORD}
    env |= {
        PRODUCER + "SECURITY_PROTOCOL": "SASL_SSL",
        PRODUCER + "SASL_MECHANISMS": "SCRAM-SHA-512",
        PRODUCER + "SASL_USERNAME": "history",
        PRODUCER + "SASL_PASSWORD": SCRAM_USERS["history"],
        PRODUCER + "SSL_CA_LOCATION": str(pki.ca_cert),
    }
    return env


SECRETS = (KEY_PASSWORD, SCRAM_USERS["throttle"], SCRAM_USERS["history"], ADMIN_TOKEN)


def assert_no_secret(where: str, text: str) -> None:
    leaked = [secret for secret in SECRETS if secret in text]
    assert not leaked, f"{where} shows {leaked}:\n{text[:3000]}"


def check_config(env: dict[str, str], config: Path | None = None) -> subprocess.CompletedProcess:
    clean = environ_without_settings()
    args = [sys.executable, "-m", "app", "--check-config"] + (["--config", str(config)] if config else [])
    return run_command(args, 60, cwd=ROOT, env={**clean, **env})


def test_no_secret_appears_in_logs_metrics_answers_errors_or_check_config(secure_cluster, pki, start_service, tmp_path):
    client = pki.leaf("client-secrets", key_password=KEY_PASSWORD)
    env = secret_env(pki, client.bundle, secure_cluster.bootstrap_servers_for("SASL_SSL"), tmp_path / "state")
    service = start_service(extra_env=env)
    service.wait_for(observed, 30, "observed over SASL_SSL with every secret configured")
    time.sleep(4)  # a few rounds, with their history rows published over SASL_SSL too

    answers = {path: service.client.get(path) for path in ("/throttle-factor", "/volumes", "/quotas", "/metrics", "/readyz", "/openapi.json")}
    metrics = answers["/metrics"].text
    assert "kafka_throttle_history_rows_written_total" in metrics and "kafka_throttle_history_topic_errors_total 0.0" in metrics
    for path, response in answers.items():
        assert response.status_code == 200, (path, response.text)
        assert_no_secret(path, response.text)
    override = "/quotas/overrides?user=alice&client-id=%3Cdefault%3E"
    errors = [
        service.client.put(override, json={"produce": 1024}),  # no token
        service.client.put(override, json={"produce": 1024}, headers={"Authorization": f"Bearer {ADMIN_TOKEN[:-1]}x"}),
        service.client.put(override, json={"produce": -1}, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}),
        service.client.get("/quotas/resolve?user=alice&type=nonsense"),
    ]
    assert [e.status_code for e in errors[:3]] == [401, 403, 422] and errors[3].status_code >= 400
    for error in errors:
        assert error.headers["content-type"].startswith("application/problem+json")
        assert_no_secret(f"error body {error.request.method} {error.request.url}", error.text)
        assert ADMIN_TOKEN[:-1] not in error.text  # nor the wrong token that was sent

    service.process.send_signal(signal.SIGTERM)
    service.process.wait(20)
    log = service.log()
    assert "DEBUG" in log and "<hidden>" in log  # kafka-python logged its configuration, scrubbed
    assert_no_secret("the service log", log)

    valid = check_config(env)
    assert valid.returncode == 0, valid.stderr
    assert_no_secret("--check-config", valid.stdout + valid.stderr)
    # Invalid: secrets under keys the service does not know, a wrong key password, a short token.
    bad = tmp_path / "bad.properties"
    bad.write_text(
        f"client.quota.callback.static.kafka.admin.sasl.password={SCRAM_USERS['throttle']}\n"
        f"throttle.service.admin.tokn={ADMIN_TOKEN}\n"
    )
    short_token = "short-token-x1"
    invalid = check_config({**env, ADMIN + "SSL_KEY_PASSWORD": KEY_PASSWORD[::-1], "THROTTLE_SERVICE_ADMIN_TOKEN": short_token}, bad)
    assert invalid.returncode == 2, invalid.stdout + invalid.stderr
    output = invalid.stdout + invalid.stderr
    for key in ("kafka.admin.sasl.password", "throttle.service.admin.tokn", "kafka.admin.ssl.key.password", "throttle.service.admin.token"):
        assert key in output, output
    assert "Traceback" not in output
    assert_no_secret("--check-config of a bad configuration", output)
    assert KEY_PASSWORD[::-1] not in output and short_token not in output


def kafka_user_acls(principal: str) -> list[AclBinding]:
    """The ACLs of deploy/strimzi/kafka-user.yaml, as Strimzi's User Operator creates them."""
    user = yaml.safe_load((ROOT / "deploy/strimzi/kafka-user.yaml").read_text())
    bindings = []
    for rule in user["spec"]["authorization"]["acls"]:
        resource = rule["resource"]
        if resource["type"] == "cluster":
            target = (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL)
        else:
            target = (ResourceType[resource["type"].upper()], resource["name"], ResourcePatternType[resource["patternType"].upper()])
        for operation in rule["operations"]:  # Strimzi's names (DescribeConfigs) -> the client's (DESCRIBE_CONFIGS)
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", operation).upper()
            bindings.append(AclBinding(*target, principal, "*", AclOperation[name], AclPermissionType.ALLOW))
    return bindings


def test_the_strimzi_kafka_users_acls_are_all_the_service_needs(secure_cluster, pki, start_service):
    """With only the ACLs deploy/strimzi/kafka-user.yaml grants: the service observes the cluster
    (DescribeCluster, DescribeLogDirs), creates and follows the Kafka quota store's topic,
    takes a change, and publishes history rows to the history topic the operator created; with
    the Kafka store it also creates and follows the state topic and is elected the decider through
    the one group it may read. Every other consumer group is someone else's: the store and the
    state follower read by assignment and need none."""
    quota_topic, history_topic = "kafka-throttle-quotas", "kafka-throttle-history"  # the defaults
    state_topic, decider_group = f"{quota_topic}-state", f"{quota_topic}-state-decider"
    admin = AdminClient({"bootstrap.servers": secure_cluster.bootstrap_servers})  # a super user
    for made in (quota_topic, state_topic):
        if made in admin.list_topics(timeout=30).topics:  # made by an earlier test: the service must create it
            admin.delete_topics([made])[made].result(timeout=30)
            while made in admin.list_topics(timeout=30).topics:
                time.sleep(0.2)
    if history_topic not in admin.list_topics(timeout=30).topics:  # what the KafkaTopic resource does
        admin.create_topics([NewTopic(history_topic, 1, 2, config={"cleanup.policy": "delete", "retention.ms": "2592000000"})])[history_topic].result(timeout=30)
    granted = kafka_user_acls("User:throttle")
    assert {binding.name for binding in granted} == {"kafka-cluster", quota_topic, state_topic, decider_group, history_topic}
    # Someone else's ACL on every resource the service touches, its consumer groups included:
    # none is open for want of ACLs, so what the user was not granted is denied.
    others = [
        AclBinding(restype, name, pattern, "User:nobody", "*", AclOperation.ALL, AclPermissionType.ALLOW)
        for restype, name, pattern in (
            (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL),
            (ResourceType.TOPIC, quota_topic, ResourcePatternType.LITERAL),
            (ResourceType.TOPIC, state_topic, ResourcePatternType.LITERAL),
            (ResourceType.TOPIC, history_topic, ResourcePatternType.LITERAL),
            (ResourceType.GROUP, "kafka-throttle", ResourcePatternType.PREFIXED),
        )
    ]
    for future in admin.create_acls(granted + others).values():
        future.result(timeout=30)
    token = "least-acls-admin-token"
    try:
        time.sleep(2)  # ACLs reach the brokers through the metadata log
        service = start_service(
            extra_env={
                **scram_env(pki, SCRAM_USERS["throttle"]),
                PRODUCER + "SECURITY_PROTOCOL": "SASL_SSL",
                PRODUCER + "SASL_MECHANISMS": "SCRAM-SHA-512",
                PRODUCER + "SASL_USERNAME": "throttle",
                PRODUCER + "SASL_PASSWORD": SCRAM_USERS["throttle"],
                PRODUCER + "SSL_CA_LOCATION": str(pki.ca_cert),
            },
            kafka_admin_bootstrap_servers=secure_cluster.bootstrap_servers_for("SASL_SSL"),
            quota_store="kafka",
            admin_token=token,
            history_kafka_enabled="true",
            **TIMING,
        )
        service.wait_for(observed, 60, "observed with the KafkaUser's ACLs")
        service.wait_ready(60)
        changed = service.client.put(
            "/quotas/overrides", params={"user": "alice"}, json={"produce": 4_194_304}, headers={"Authorization": f"Bearer {token}"}
        )
        assert changed.status_code == 200, changed.text + service.log()[-3000:]
        assert f"created the quota topic '{quota_topic}'" in service.log()
        assert f"created the state topic '{state_topic}'" in service.log()
        assert "this replica is now the decider" in service.log(), "elected through the decider group it may read"
        reader = Consumer({"bootstrap.servers": secure_cluster.bootstrap_servers, "group.id": "least-acls-check"})
        try:
            deadline = time.monotonic() + 30
            while reader.get_watermark_offsets(TopicPartition(history_topic, 0), timeout=10)[1] == 0:
                assert time.monotonic() < deadline, "no history row reached the history topic\n" + service.log()[-3000:]
                time.sleep(0.5)
        finally:
            reader.close()
        assert "authoriz" not in service.log().lower(), service.log()[-3000:]
    finally:
        resources = {(b.restype, b.name, b.resource_pattern_type, b.principal) for b in granted + others}
        filters = [AclBindingFilter(*resource, None, AclOperation.ANY, AclPermissionType.ANY) for resource in resources]
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)
