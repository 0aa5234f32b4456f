"""deploy/kubernetes/: every overlay rendered by the real kustomize and each object validated
against the Kubernetes API schemas of supported releases (kubernetes-validate, strict: an
unknown field fails); the Prometheus Operator's objects by their structure and the alert
rules by promtool; the Deployment held to the image it runs and to the settings model. No
cluster runs here: this is the check a cluster's API server would make on apply."""

from __future__ import annotations

import re
import shutil
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


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def container_environment(objects: list[dict], secrets: dict[str, str] = SECRET_VALUES) -> dict[str, str]:
    """The container's environment as the kubelet makes it: the ConfigMaps of envFrom, then each
    env entry in order (a Secret's value from ``secrets``), a $(NAME) in a value expanded from
    the variables before it ($$ is a $; an unknown name is left as written). As
    kubernetes/kubernetes pkg/kubelet/kubelet_pods.go, makeEnvironmentVariables: the envFrom
    variables go into tmpEnv first, then each env value is expanded with
    expansion.MappingFuncFor(tmpEnv, serviceEnv)."""
    configmaps = {obj["metadata"]["name"]: obj["data"] for obj in objects if obj["kind"] == "ConfigMap"}
    main = container(objects)
    environ: dict[str, str] = {}
    for source in main.get("envFrom", []):
        environ.update(configmaps[source["configMapRef"]["name"]])
    for entry in main.get("env", []):
        if "value" in entry:
            environ[entry["name"]] = _REFERENCE.sub(
                lambda match: "$" if match.group(0) == "$$" else environ.get(match.group(1), match.group(0)), entry["value"]
            )
        elif "secretKeyRef" in entry.get("valueFrom", {}):
            environ[entry["name"]] = secrets[entry["name"]]
    return environ


def strimzi_cluster() -> dict:
    (cluster,) = [doc for doc in yaml.safe_load_all((ROOT / "deploy/strimzi/kafka.yaml").read_text()) if doc["kind"] == "Kafka"]
    return cluster


def strimzi_principals(cluster: str) -> list[str]:
    """Strimzi's own users, as it lists them in the brokers' super.users (strimzi/strimzi-kafka-
    operator, cluster-operator/src/main/java/io/strimzi/operator/cluster/model/
    KafkaBrokerConfigurationBuilder.java, withAuthorization: "User:CN=%s,O=io.strimzi" of
    <cluster>-kafka, <cluster>-entity-topic-operator, -entity-user-operator, -cruise-control;
    the exporter, which only reads, is left out): each the subject of the certificate Strimzi
    signs, which Kafka's default principal builder gives in full
    (shim/src/test/java/io/kafkathrottle/shim/StrimziPrincipalExclusionTest.java)."""
    return [
        f"User:CN={cluster}-{component},O=io.strimzi"
        for component in ("kafka", "entity-topic-operator", "entity-user-operator", "cruise-control")
    ]


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
    groups = yaml.safe_load(committed)["spec"]["groups"]
    assert groups == prometheus_rule.with_runbook_base(alerts["groups"], prometheus_rule.DEFAULT_RUNBOOK_BASE)


def test_the_applied_runbook_urls_are_absolute_under_the_one_base(rendered):
    """Alertmanager's receivers open runbook_url as it is: in what the kit applies it is an
    absolute https address, each alert's section under the generator's one default base."""
    _, objects = rendered
    rules = prometheus_rule.alert_rules(by_kind(objects, "PrometheusRule")["spec"]["groups"])
    base = prometheus_rule.DEFAULT_RUNBOOK_BASE
    assert re.fullmatch(r"https://[a-z0-9.-]+/\S+/docs/operations\.md", base)
    assert rules and all(rule["annotations"]["runbook_url"] == f"{base}#{rule['alert'].lower()}" for rule in rules)
    headings = set(re.findall(r"^### (\w+)$", (ROOT / "docs/operations.md").read_text(), re.MULTILINE))
    assert {rule["alert"] for rule in rules} <= headings


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
    environ = container_environment(objects)
    assert not [value for value in environ.values() if "$(" in value], "every $(NAME) is defined before it is used"
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


def test_no_setting_is_given_twice(rendered):
    """A variable the Deployment's env sets would silently win over the same one in settings.env."""
    _, objects = rendered
    settings = by_kind(objects, "ConfigMap")["data"]
    assert [entry["name"] for entry in container(objects)["env"] if entry["name"] in settings] == []


def test_the_replicated_overlay_excludes_exactly_strimzis_own_principals():
    """The four users Strimzi gives its own clients, by the full names their certificates
    carry (the shim matches names exactly), for the cluster deploy/strimzi defines."""
    objects = kustomize_build(KUBERNETES / "overlays/replicated")
    environ = container_environment(objects)
    name = strimzi_cluster()["metadata"]["name"]
    listed = environ["CLIENT_QUOTA_CALLBACK_STATIC_EXCLUDED_PRINCIPAL_NAME_LIST"].split(";")
    assert listed == strimzi_principals(name)
    assert listed == [
        "User:CN=my-cluster-kafka,O=io.strimzi",
        "User:CN=my-cluster-entity-topic-operator,O=io.strimzi",
        "User:CN=my-cluster-entity-user-operator,O=io.strimzi",
        "User:CN=my-cluster-cruise-control,O=io.strimzi",
    ]
    settings = load_settings(environ={**environ, "CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SSL_TRUSTSTORE_LOCATION": ""})
    assert settings.excluded_principals == {principal.removeprefix("User:") for principal in listed}


def test_the_cluster_name_is_written_once_and_every_derived_name_follows_it(tmp_path):
    """Renamed in base/settings.env only, the kit follows: the principals never throttled, the
    bootstrap address, the cluster CA's Secret and the NetworkPolicy's selector."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(KUBERNETES, copy)
    settings_env = copy / "base/settings.env"
    assert settings_env.read_text().count("my-cluster") == 1
    settings_env.write_text(settings_env.read_text().replace("STRIMZI_CLUSTER_NAME=my-cluster", "STRIMZI_CLUSTER_NAME=prod-kafka"))
    objects = kustomize_build(copy / "overlays/replicated")
    environ = container_environment(objects)
    assert environ["CLIENT_QUOTA_CALLBACK_STATIC_EXCLUDED_PRINCIPAL_NAME_LIST"].split(";") == strimzi_principals("prod-kafka")
    assert environ["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS"] == "prod-kafka-kafka-bootstrap:9093"
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    assert {volume["secret"]["secretName"] for volume in pod["volumes"] if "secret" in volume} == {"prod-kafka-cluster-ca-cert"}
    policy = by_kind(objects, "NetworkPolicy")
    assert admitted(policy, strimzi_node("prod-kafka", broker=True, controller=False))
    assert not admitted(policy, strimzi_node("my-cluster", broker=True, controller=False))
    assert "my-cluster" not in yaml.safe_dump_all(objects)


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


NAMESPACE = {"kubernetes.io/metadata.name": "kafka"}  # where the kit and the Kafka cluster run
MONITORING = {"kubernetes.io/metadata.name": "monitoring"}


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A Kubernetes label selector (matchLabels and matchExpressions, ANDed) against labels."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        holds = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not holds:
            return False
    return True


def admitted(policy: dict, pod: tuple[dict[str, str], dict[str, str]]) -> bool:
    """Whether the policy's ingress lets a pod (its namespace's labels, its own) reach the
    service: a peer with only a podSelector selects pods in the policy's namespace."""
    namespace, labels = pod
    for rule in policy["spec"]["ingress"]:
        for peer in rule["from"]:
            in_namespace = selects(peer["namespaceSelector"], namespace) if "namespaceSelector" in peer else namespace == NAMESPACE
            if in_namespace and selects(peer.get("podSelector", {}), labels):
                return True
    return False


def strimzi_node(cluster: str, broker: bool, controller: bool, pool: str = "pool-a") -> tuple[dict, dict]:
    """The labels Strimzi puts on a pod of a KafkaNodePool, from Strimzi's own code
    (strimzi/strimzi-kafka-operator, cluster-operator/src/main/java/io/strimzi/operator/cluster/
    model/KafkaPool.java: strimzi.io/kind, strimzi.io/name <cluster>-kafka "so it is selectable
    through the KafkaCluster selector", strimzi.io/cluster, strimzi.io/component-type,
    strimzi.io/pool-name and the app.kubernetes.io labels; KafkaCluster.java, generatePodSets:
    pool.labels.withStrimziBrokerRole(node.broker()).withStrimziControllerRole(node.controller()),
    each "true" or "false")."""
    return NAMESPACE, {
        "strimzi.io/cluster": cluster,
        "strimzi.io/kind": "Kafka",
        "strimzi.io/name": f"{cluster}-kafka",
        "strimzi.io/component-type": "kafka",
        "strimzi.io/pool-name": pool,
        "strimzi.io/broker-role": str(broker).lower(),
        "strimzi.io/controller-role": str(controller).lower(),
        "app.kubernetes.io/name": "kafka",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/part-of": f"strimzi-{cluster}",
        "app.kubernetes.io/managed-by": "strimzi-cluster-operator",
        "statefulset.kubernetes.io/pod-name": f"{cluster}-{pool}-0",
    }


def strimzi_component(cluster: str, component: str) -> tuple[dict, dict]:
    """A pod of another Strimzi component of the cluster (the Entity Operator, Cruise Control,
    the Kafka Exporter): the same kind and cluster, its own strimzi.io/name."""
    return NAMESPACE, {
        "strimzi.io/cluster": cluster,
        "strimzi.io/kind": "Kafka",
        "strimzi.io/name": f"{cluster}-{component}",
        "strimzi.io/component-type": component,
        "app.kubernetes.io/name": component,
        "app.kubernetes.io/instance": cluster,
    }


def test_every_node_of_the_cluster_and_prometheus_reach_the_service_and_nothing_else(rendered):
    _, objects = rendered
    policy = by_kind(objects, "NetworkPolicy")
    service = by_kind(objects, "Service")
    assert policy["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    name = strimzi_cluster()["metadata"]["name"]
    prometheus = {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}
    let_in = {
        "broker-only node": strimzi_node(name, broker=True, controller=False, pool="brokers"),
        "controller-only node": strimzi_node(name, broker=False, controller=True, pool="controllers"),
        "combined node": strimzi_node(name, broker=True, controller=True, pool="dual-role"),
        "Prometheus in monitoring": (MONITORING, prometheus),
    }
    kept_out = {
        "Entity Operator": strimzi_component(name, "entity-operator"),
        "Cruise Control": strimzi_component(name, "cruise-control"),
        "Kafka Exporter": strimzi_component(name, "kafka-exporter"),
        "a node of another cluster": strimzi_node("other-cluster", broker=True, controller=True),
        "a node of the same name in another namespace": ({"kubernetes.io/metadata.name": "elsewhere"}, strimzi_node(name, True, False)[1]),
        "Prometheus in another namespace": ({"kubernetes.io/metadata.name": "apps"}, prometheus),
        "a pod labelled prometheus outside monitoring's namespace": (NAMESPACE, prometheus),
        "a random pod": (NAMESPACE, {"app": "web", "pod-template-hash": "5d9c7"}),
        "the service's own pod": (NAMESPACE, by_kind(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]),
    }
    assert [who for who, pod in let_in.items() if not admitted(policy, pod)] == []
    assert [who for who, pod in kept_out.items() if admitted(policy, pod)] == []


def test_the_policy_evaluation_refuses_what_a_selector_does_not_match():
    policy = {"spec": {"ingress": [{"from": [{"podSelector": {"matchLabels": {"a": "1"}, "matchExpressions": [
        {"key": "b", "operator": "In", "values": ["x"]}, {"key": "c", "operator": "DoesNotExist"}]}}]}]}}
    assert admitted(policy, (NAMESPACE, {"a": "1", "b": "x"}))
    assert not admitted(policy, (NAMESPACE, {"a": "1", "b": "y"}))
    assert not admitted(policy, (NAMESPACE, {"a": "1", "b": "x", "c": ""}))
    assert not admitted(policy, (MONITORING, {"a": "1", "b": "x"}))


def test_the_replicated_overlay_and_the_strimzi_cluster_name_each_other():
    """The names Strimzi derives from the cluster's name (its bootstrap Service, CA Secret) and
    the KafkaUser's Secret are what the overlay uses; the shim polls the Service the base defines."""
    cluster = strimzi_cluster()
    name = cluster["metadata"]["name"]
    user = yaml.safe_load((ROOT / "deploy/strimzi/kafka-user.yaml").read_text())
    objects = kustomize_build(KUBERNETES / "overlays/replicated")
    settings = container_environment(objects)
    assert settings["STRIMZI_CLUSTER_NAME"] == name
    (listener,) = [entry for entry in cluster["spec"]["kafka"]["listeners"] if entry["authentication"]["type"] == user["spec"]["authentication"]["type"]]
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_BOOTSTRAP_SERVERS"] == f"{name}-kafka-bootstrap:{listener['port']}"
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SECURITY_PROTOCOL"] == ("SASL_SSL" if listener["tls"] else "SASL_PLAINTEXT")
    assert settings["CLIENT_QUOTA_CALLBACK_STATIC_KAFKA_ADMIN_SASL_MECHANISM"] == "SCRAM-SHA-512"
    pod = by_kind(objects, "Deployment")["spec"]["template"]["spec"]
    secrets = {volume["secret"]["secretName"] for volume in pod["volumes"] if "secret" in volume}
    assert secrets == {f"{name}-cluster-ca-cert"}
    jaas = [entry for entry in container(objects)["env"] if entry["name"].endswith("SASL_JAAS_CONFIG")]
    assert jaas[0]["valueFrom"]["secretKeyRef"] == {"name": user["metadata"]["name"], "key": "sasl.jaas.config"}
    assert user["metadata"]["labels"]["strimzi.io/cluster"] == name
    service = by_kind(objects, "Service")
    url = cluster["spec"]["kafka"]["config"]["client.quota.callback.service.url"]
    assert re.fullmatch(rf"http://{service['metadata']['name']}\.[a-z0-9-]+\.svc:{service['spec']['ports'][0]['port']}", url)


NODE_TOKEN_SECRET = "throttle-service-node-token"


def test_the_node_token_is_read_from_one_secret_and_written_nowhere(rendered):
    """The service and every Kafka node read the node token from the Secret
    throttle-service-node-token (key token): the Deployment through secretKeyRef, the nodes
    through Strimzi's config provider; no file of the kit holds a token."""
    _, objects = rendered
    (entry,) = [entry for entry in container(objects)["env"] if entry["name"] == "THROTTLE_SERVICE_NODE_TOKEN"]
    assert entry["valueFrom"]["secretKeyRef"] == {"name": NODE_TOKEN_SECRET, "key": "token", "optional": True}
    assert "Secret" not in {obj["kind"] for obj in objects}, "the kit makes no Secret: its value would be in the repository"
    assert not [key for obj in objects if obj["kind"] == "ConfigMap" for key in obj["data"] if "TOKEN" in key]
    config = strimzi_cluster()["spec"]["kafka"]["config"]
    reference = re.fullmatch(r"\$\{(\w+):([a-z0-9-]+)/([a-z0-9.-]+):(\w+)\}", config["client.quota.callback.service.token"])
    assert reference, "the shims' token is a config provider's reference, not the value"
    provider, namespace, secret, key = reference.groups()
    assert config["config.providers"].split(",") == [provider]
    assert config[f"config.providers.{provider}.class"] == "io.strimzi.kafka.KubernetesSecretConfigProvider"
    assert (namespace, secret, key) == (NAMESPACE["kubernetes.io/metadata.name"], NODE_TOKEN_SECRET, "token")
    texts = [path.read_text() for path in (ROOT / "deploy").rglob("*") if path.is_file() and path.suffix in {".yaml", ".yml", ".env"}]
    for value in SECRET_VALUES.values():
        assert not [text for text in texts if value in text]
    assert not [text for text in texts if re.search(r"(?im)^\s*(stringData|data):\s*$\s+token:", text)]


def test_the_nodes_may_get_that_secret_and_nothing_else():
    """deploy/strimzi/node-token-access.yaml: a Role granting get on exactly the node token's
    Secret, bound to the ServiceAccount every node of the cluster runs as (Strimzi names it
    <cluster>-kafka); both valid for the Kubernetes API."""
    documents = list(yaml.safe_load_all((ROOT / "deploy/strimzi/node-token-access.yaml").read_text()))
    role = by_kind(documents, "Role")
    binding = by_kind(documents, "RoleBinding")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [NODE_TOKEN_SECRET], "verbs": ["get"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]}
    name = strimzi_cluster()["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"{name}-kafka", "namespace": NAMESPACE["kubernetes.io/metadata.name"]}]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_kubernetes_document_of_the_strimzi_kit_is_valid(version):
    """deploy/strimzi/check reads the kafka.strimzi.io documents with Strimzi's model; the
    others (the Role and RoleBinding of the node token) are checked against the Kubernetes API."""
    checked = []
    for path in sorted((ROOT / "deploy/strimzi").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not document["apiVersion"].startswith("kafka.strimzi.io/"):
                kubernetes_validate.validate(document, version, strict=True)
                checked.append(document["kind"])
    assert {"Role", "RoleBinding"} <= set(checked)
