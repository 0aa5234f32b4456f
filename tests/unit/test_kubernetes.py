"""deploy/kubernetes/: every overlay rendered by the real kustomize and each object validated
against the Kubernetes API schemas of supported releases (kubernetes-validate, strict: an
unknown field fails); the Prometheus Operator's objects by their structure and the alert
rules by promtool; the Deployment held to the image it runs and to the settings model. No
cluster runs here: this is the check a cluster's API server would make on apply."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from app.settings import load_settings
from devtools import prometheus_rule

from ..gotools import kustomize_build
from ..integration.pki import Pki
from ..promtools import promtool

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy/kubernetes"
OVERLAYS = ("single", "replicated")
# The oldest and the newest release the package's schemas cover among those maintained upstream.
KUBERNETES_VERSIONS = ("1.33.0", "1.37.0")
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}  # CRDs: no schema in the Kubernetes API
DATA_DIR = "/var/lib/kafka-throttle-service"
# Values of the Secrets the Deployment reads, for loading its settings here.
SECRET_VALUES = {
    "THROTTLE_SERVICE_ADMIN_TOKEN": "a-token-of-sixteen-characters",
    "THROTTLE_SERVICE_NODE_TOKEN": "another-token-of-sixteen",
    "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SASL_JAAS_CONFIG": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="throttle-service" password="secret";'
    ),
}


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, kustomize_build(KUBERNETES / "overlays" / request.param)


def by_kind(objects: list[dict], kind: str) -> dict:
    (found,) = [obj for obj in objects if obj["kind"] == kind]
    return found


def container(objects: list[dict]) -> dict:
    (only,) = by_kind(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return only


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_for_the_kubernetes_api(rendered, version):
    _, objects = rendered
    checked = set()
    for obj in objects:
        if obj["kind"] in OPERATOR_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)  # raises on any problem
        checked.add(obj["kind"])
    assert {"ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} <= checked


def test_a_misspelt_field_fails_the_validation(rendered):
    _, objects = rendered
    deployment = by_kind(objects, "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_prometheus_rule_is_generated_from_the_alert_rules():
    committed = (KUBERNETES / "base/prometheusrule.yaml").read_text()
    assert committed == prometheus_rule.render(), "run: python -m devtools.prometheus_rule"
    alerts = yaml.safe_load((ROOT / "deploy/prometheus/alerts.yml").read_text())
    assert yaml.safe_load(committed)["spec"]["groups"] == alerts["groups"]


def test_a_runbook_base_moves_every_runbook_url():
    document = yaml.safe_load(prometheus_rule.render("https://docs.example.org/ops.md"))
    urls = [rule["annotations"]["runbook_url"] for rule in prometheus_rule.alert_rules(document["spec"]["groups"])]
    assert urls and all(re.fullmatch(r"https://docs\.example\.org/ops\.md#kafkathrottle\w+", url) for url in urls)


def test_the_operator_objects_have_the_shape_the_prometheus_operator_reads(rendered, tmp_path):
    _, objects = rendered
    rule = by_kind(objects, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule["spec"]) == {"groups"}
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    checked = promtool("check", "rules", rules_file)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    monitor = by_kind(objects, "ServiceMonitor")
    service = by_kind(objects, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor["spec"]) == {"jobLabel", "selector", "endpoints"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    # KafkaThrottleServiceDown watches up{job="kafka-throttle-service"}: the job is this label's value.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "kafka-throttle-service"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"


def test_the_pods_run_locked_down_as_the_image_user(rendered):
    _, objects = rendered
    dockerfile = (ROOT / "Dockerfile").read_text()
    uid = int(re.search(r"useradd .*--uid (\d+)", dockerfile).group(1))
    assert f"THROTTLE_SERVICE_DATA_DIR={DATA_DIR}" in dockerfile and "EXPOSE 8080" in dockerfile
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    main = container(objects)
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    writable = {mount["mountPath"] for mount in main["volumeMounts"] if not mount.get("readOnly")}
    assert writable == {DATA_DIR, "/tmp"}
    assert main["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]


def test_the_probes_ask_the_health_endpoints(rendered):
    _, objects = rendered
    main = container(objects)
    paths = set(yaml.safe_load((ROOT / "openapi/openapi.json").read_text())["paths"])
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"/healthz", "/readyz"} <= paths
    assert "memory" in main["resources"]["limits"] and "cpu" in main["resources"]["requests"]


def test_the_settings_load_in_the_service_settings_model(rendered, tmp_path):
    name, objects = rendered
    settings_map = by_kind(objects, "ConfigMap")
    referenced = {
        entry["name"] for entry in container(objects)["env"] if "secretKeyRef" in entry.get("valueFrom", {})
    }
    assert referenced <= set(SECRET_VALUES)
    environ = {**settings_map["data"], **{key: SECRET_VALUES[key] for key in referenced}}
    # A file the settings name from a mounted Secret (the cluster CA) is a real CA here.
    mounted = {mount["mountPath"] for mount in container(objects)["volumeMounts"] if mount.get("readOnly")}
    ca = Pki(tmp_path).ca_cert
    for key, value in environ.items():
        if any(value.startswith(f"{path}/") for path in mounted):
            environ[key] = str(ca)
    settings = load_settings(environ=environ)
    assert settings.data_dir == DATA_DIR
    assert settings.log_format == "json"
    env_from = container(objects)["envFrom"][0]["configMapRef"]["name"]
    assert env_from == settings_map["metadata"]["name"]
    if name == "replicated":
        assert settings.quota_store == "kafka"
        assert settings.excluded_principals == {"CN=my-cluster-entity-topic-operator", "CN=my-cluster-cruise-control"}


def test_two_replicas_share_the_kafka_store_and_one_always_serves():
    objects = kustomize_build(KUBERNETES / "overlays/replicated")
    assert by_kind(objects, "Deployment")["spec"]["replicas"] == 2
    assert by_kind(objects, "ConfigMap")["data"]["THROTTLE_SERVICE_QUOTA_STORE"] == "kafka"
    assert by_kind(objects, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "kafka-throttle-service"}},
    }


def test_the_single_replica_keeps_its_store_on_a_claim():
    objects = kustomize_build(KUBERNETES / "overlays/single")
    deployment = by_kind(objects, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {volume["name"]: volume for volume in deployment["spec"]["template"]["spec"]["volumes"]}
    claim = by_kind(objects, "PersistentVolumeClaim")
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]


def test_only_brokers_prometheus_and_operators_reach_the_service(rendered):
    _, objects = rendered
    policy = by_kind(objects, "NetworkPolicy")
    service = by_kind(objects, "Service")
    assert policy["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]
    (rule,) = policy["spec"]["ingress"]
    peers = [
        ({**peer.get("namespaceSelector", {}).get("matchLabels", {})}, peer["podSelector"]["matchLabels"])
        for peer in rule["from"]
    ]
    assert peers == [
        ({}, {"strimzi.io/broker-role": "true"}),
        ({"kubernetes.io/metadata.name": "monitoring"}, {"app.kubernetes.io/name": "prometheus"}),
        ({}, {"kafka-throttle-service/access": "operator"}),
    ]


def test_the_replicated_overlay_and_the_strimzi_cluster_name_each_other():
    """The names Strimzi derives from the cluster's name (its bootstrap Service, CA Secret and
    the TLS users of the Topic Operator and Cruise Control) and the KafkaUser's Secret are what
    the overlay uses; the shim polls the Service the base defines."""
    strimzi = {doc["kind"] + "/" + doc["metadata"]["name"]: doc for doc in yaml.safe_load_all((ROOT / "deploy/strimzi/kafka.yaml").read_text())}
    (cluster,) = [doc for key, doc in strimzi.items() if key.startswith("Kafka/")]
    name = cluster["metadata"]["name"]
    user = yaml.safe_load((ROOT / "deploy/strimzi/kafka-user.yaml").read_text())
    objects = kustomize_build(KUBERNETES / "overlays/replicated")
    settings = by_kind(objects, "ConfigMap")["data"]
    (listener,) = [entry for entry in cluster["spec"]["kafka"]["listeners"] if entry["authentication"]["type"] == user["spec"]["authentication"]["type"]]
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS"] == f"{name}-kafka-bootstrap:{listener['port']}"
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SECURITY_PROTOCOL"] == ("SASL_SSL" if listener["tls"] else "SASL_PLAINTEXT")
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_EXCLUDED_PRINCIPAL_NAME_LIST"].split(";") == [
        f"User:CN={name}-entity-topic-operator",
        f"User:CN={name}-cruise-control",
    ]
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    secrets = {volume["secret"]["secretName"] for volume in pod["volumes"] if "secret" in volume}
    assert secrets == {f"{name}-cluster-ca-cert"}
    jaas = [entry for entry in container(objects)["env"] if entry["name"].endswith("SASL_JAAS_CONFIG")]
    assert jaas[0]["valueFrom"]["secretKeyRef"] == {"name": user["metadata"]["name"], "key": "sasl.jaas.config"}
    assert user["metadata"]["labels"]["strimzi.io/cluster"] == name
    service = by_kind(objects, "Service")
    url = cluster["spec"]["kafka"]["config"]["client.quota.callback.service.url"]
    assert re.fullmatch(rf"http://{service['metadata']['name']}\.[a-z0-9-]+\.svc:{service['spec']['ports'][0]['port']}", url)
