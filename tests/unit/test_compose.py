"""docker-compose.yml, the Dockerfiles, the Prometheus and Grafana configuration, checked without
a Docker engine: the compose file validates against the Compose Specification JSON schema
(with a validator of the schema's own draft), publishes its ports on localhost only, every
setting it passes exists (the service's settings model, the shim's ConfigDef, the Kafka
image's KAFKA_* naming rule) and matches the no-Docker local stack, every one is documented
in docs/deploying.md, and Prometheus and Grafana get the files they are meant to load.
A real Prometheus runs the same rules and dashboard expressions in
tests/integration/test_prometheus_on_kafka.py."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sys
import urllib.request
import zipfile
from pathlib import Path

import jsonschema
import pytest
import yaml

from devtools.devcluster.jars import KAFKA_VERSION
from devtools.devcluster.shim import CALLBACK_CLASS, LOCAL_SHIM_PROPERTIES
from devtools.localstack import LOCAL_DEFAULTS
from app.settings import load_settings
from app.settings.model import Settings, env_name, property_name
from devtools.commands import run_command

from ..gotools import tool

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
BROKERS = ("broker-1", "broker-2", "broker-3")

# The Compose Specification's schema as published in compose-spec/compose-go (the reference
# implementation Docker Compose uses), fetched from the Go module proxy and pinned by hash.
SCHEMA_MODULE = "github.com/compose-spec/compose-go/v2"
SCHEMA_VERSION = "v2.16.2"
SCHEMA_SHA256 = "f266dcbb043229405d7cedd5aec918f9102c2b3d5e3850808fdd8edd564a43ff"


def compose_schema() -> dict:
    cached = ROOT / ".cache" / f"compose-spec-{SCHEMA_VERSION}.json"
    if not cached.exists():
        url = f"https://proxy.golang.org/{SCHEMA_MODULE}/@v/{SCHEMA_VERSION}.zip"
        with urllib.request.urlopen(url, timeout=60) as response:
            archive = zipfile.ZipFile(io.BytesIO(response.read()))
        data = archive.read(f"{SCHEMA_MODULE}@{SCHEMA_VERSION}/schema/compose-spec.json")
        assert hashlib.sha256(data).hexdigest() == SCHEMA_SHA256, "the compose schema changed under a pinned version"
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(data)
    return yaml.safe_load(cached.read_text())  # JSON is YAML


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def image_property(env: str) -> str:
    """The apache/kafka image's rule for KAFKA_* variables (docker/resources/utility): the
    prefix dropped, '___' -> '-', '__' -> '_', '_' -> '.', lower case."""
    key = env[len("KAFKA_") :]
    key = re.sub(r"(?<=[^_])_(?=[^_])", ".", key)
    return key.replace("___", "-").replace("__", "_").lower()


def shim_properties() -> set[str]:
    source = (ROOT / "shim/src/main/java/io/kafkathrottle/shim/ShimConfig.java").read_text()
    prefix = re.search(r'PREFIX = "([^"]+)"', source).group(1)
    return {prefix + name for name in re.findall(r'= PREFIX \+ "([^"]+)"', source)}


def broker_properties(compose: dict, service: str) -> dict[str, str]:
    env = compose["services"][service]["environment"]
    return {image_property(k): str(v) for k, v in env.items() if k.startswith("KAFKA_")}


def schema_validator() -> jsonschema.protocols.Validator:
    """A validator of the draft the schema declares (2020-12): an older draft's validator
    ignores keywords such as unevaluatedProperties, and with them misspelt keys."""
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema, default=None)
    assert validator is jsonschema.Draft202012Validator, schema.get("$schema")
    validator.check_schema(schema)
    return validator(schema)


def test_compose_file_is_valid_against_the_compose_specification(compose):
    schema_validator().validate(compose)


@pytest.mark.parametrize(
    "service, key, misspelt",
    [
        ("throttle-service", "environment", "enviroment"),
        ("broker-1", "healthcheck", "healtcheck"),
        ("prometheus", "volumes", "volums"),
        ("grafana", "depends_on", "depend_on"),
    ],
)
def test_a_misspelt_key_fails_the_schema_check(service, key, misspelt):
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"][service][misspelt] = broken["services"][service].pop(key)
    errors = list(schema_validator().iter_errors(broken))
    assert any(misspelt in error.message for error in errors), [error.message for error in errors]


def test_the_schema_check_rejects_what_compose_would_reject(compose):
    validator = schema_validator()
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["broker-1"]["depends_on"]["controller"]["condition"] = "service_up"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["broker-1"]["healthcheck"]["intervall"] = "10s"
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_every_port_is_published_on_localhost_only(compose):
    published = {name: svc["ports"] for name, svc in compose["services"].items() if "ports" in svc}
    assert set(published) == {*BROKERS, "throttle-service", "prometheus", "grafana"}
    for name, ports in published.items():
        for port in ports:
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), f"{name} publishes {port!r} beyond localhost"


def test_kafka_image_is_pinned_to_the_test_clusters_version(compose):
    kafka = {name: svc["image"] for name, svc in compose["services"].items() if "kafka" in svc.get("image", "") and "throttle" not in svc["image"]}
    assert set(kafka) == {"controller", *BROKERS}
    assert set(kafka.values()) == {f"apache/kafka:{KAFKA_VERSION}"}


def test_every_service_environment_variable_is_a_setting_of_the_model_and_loads(compose, tmp_path):
    env = {k: str(v) for k, v in compose["services"]["throttle-service"]["environment"].items()}
    known = {env_name(field.json_schema_extra["property"]) for field in Settings.model_fields.values()}
    unknown = [name for name in env if name not in known]
    assert unknown == [], f"not settings of the service: {unknown}"
    settings = load_settings(None, environ={**env, "THROTTLE_SERVICE_DATA_DIR": str(tmp_path)})
    assert settings.kafka_admin_bootstrap_servers == ",".join(f"{b}:19092" for b in BROKERS)
    assert settings.http_port == 8080


def test_service_gets_the_local_stacks_demonstration_settings(compose):
    env = compose["services"]["throttle-service"]["environment"]
    expected = {env_name(property_name(field)): value for field, value in LOCAL_DEFAULTS.items()}
    assert {k: str(v) for k, v in env.items() if k in expected} == expected


def test_every_shim_property_exists_in_the_shim_and_matches_the_local_stack(compose):
    known = shim_properties()
    assert "client.quota.callback.service.url" in known  # the parse found the ConfigDef
    for broker in BROKERS:
        props = broker_properties(compose, broker)
        shim = {k: v for k, v in props.items() if k.startswith("client.quota.callback.service.")}
        assert set(shim) <= known, f"{broker}: unknown shim properties {set(shim) - known}"
        assert props["client.quota.callback.class"] == CALLBACK_CLASS
        assert shim["client.quota.callback.service.url"] == "http://throttle-service:8080"
        assert {k: v for k, v in shim.items() if k in LOCAL_SHIM_PROPERTIES} == LOCAL_SHIM_PROPERTIES
        env = compose["services"][broker]["environment"]
        assert env["CLASSPATH"].endswith("/kafka-throttle-shim.jar")
        mounts = {m["target"]: m for m in compose["services"][broker]["volumes"]}
        assert mounts[str(Path(env["CLASSPATH"]).parent)]["source"] == "shim-jar"


def test_brokers_have_the_local_clusters_broker_settings_and_small_tmpfs_volumes(compose, tmp_path):
    from devtools.devcluster import LocalKafkaCluster

    cluster = LocalKafkaCluster(base_dir=tmp_path, brokers=3, tmpfs=False)
    local = cluster._broker_props(cluster._brokers[1])
    per_node = {"node.id", "listeners", "advertised.listeners", "listener.security.protocol.map", "inter.broker.listener.name",
                "controller.quorum.voters", "log.dirs", "metadata.log.dir"}
    for broker in BROKERS:
        props = broker_properties(compose, broker)
        shared = {k for k in props if k in local and k not in per_node}
        assert len(shared) >= 15
        assert {k: props[k] for k in shared} == {k: local[k] for k in shared}
        volumes = compose["services"][broker]["volumes"]
        tmpfs = [v for v in volumes if v["type"] == "tmpfs"]
        assert [v["tmpfs"]["size"] for v in tmpfs] == [64 * 1024 * 1024]
        assert props["log.dirs"].startswith(tmpfs[0]["target"] + "/")
        assert not props["metadata.log.dir"].startswith(tmpfs[0]["target"])
        assert compose["services"][broker]["depends_on"] == {
            "shim": {"condition": "service_completed_successfully"},
            "controller": {"condition": "service_healthy"},
        }


def test_start_up_order_rests_on_health_checks(compose):
    services = compose["services"]
    for name, svc in services.items():
        for dependency, condition in (svc.get("depends_on") or {}).items():
            if condition["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}, which has no health check"
    assert set(services["throttle-service"]["depends_on"]) == set(BROKERS)
    assert services["prometheus"]["depends_on"] == {"throttle-service": {"condition": "service_healthy"}}
    assert services["grafana"]["depends_on"] == {"prometheus": {"condition": "service_healthy"}}


def test_every_setting_the_compose_file_passes_is_documented_in_the_readme(compose):
    readme = (ROOT / "docs" / "deploying.md").read_text()
    names = set()
    for svc in compose["services"].values():
        names.update((svc.get("environment") or {}).keys())
    missing = sorted(name for name in names if f"`{name}`" not in readme)
    assert missing == [], f"compose settings not explained in docs/deploying.md: {missing}"


def mounts(compose: dict, service: str) -> dict[str, Path]:
    """Container path -> host path of a service's read-only bind mounts."""
    found = {}
    for volume in compose["services"][service]["volumes"]:
        source, target, mode = volume.split(":")
        assert mode == "ro" and source.startswith("./"), volume
        found[target] = ROOT / source
    return found


def test_prometheus_scrapes_the_service_and_loads_the_alert_rules(compose):
    (directory,) = mounts(compose, "prometheus").items()
    assert directory == ("/etc/prometheus", ROOT / "deploy/prometheus")
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["kafka-throttle-service"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert job["static_configs"][0]["targets"] == ["throttle-service:8080"]
    assert config["rule_files"] == ["alerts.yml"]
    assert (ROOT / "deploy/prometheus/alerts.yml").exists()
    # The alert rules select the job by this name.
    assert 'job="kafka-throttle-service"' in (ROOT / "deploy/prometheus/alerts.yml").read_text()


def test_grafana_is_provisioned_with_the_compose_prometheus_and_the_dashboard(compose):
    files = mounts(compose, "grafana")
    assert {target.rsplit("/", 1)[0] for target in files} == {
        "/etc/grafana/provisioning/datasources",
        "/etc/grafana/provisioning/dashboards",
        "/etc/grafana/dashboards",
    }
    by_dir = {target.rsplit("/", 1)[0]: source for target, source in files.items()}
    (datasource,) = yaml.safe_load(by_dir["/etc/grafana/provisioning/datasources"].read_text())["datasources"]
    assert (datasource["type"], datasource["url"]) == ("prometheus", "http://prometheus:9090")
    scrape = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())["global"]["scrape_interval"]
    assert datasource["jsonData"]["timeInterval"] == scrape
    (provider,) = yaml.safe_load(by_dir["/etc/grafana/provisioning/dashboards"].read_text())["providers"]
    assert provider["type"] == "file" and provider["options"]["path"] == "/etc/grafana/dashboards"
    dashboard = json.loads(by_dir["/etc/grafana/dashboards"].read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["datasource"]["current"]["value"] == datasource["uid"]
    env = compose["services"]["grafana"]["environment"]
    assert env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] in files


def test_every_dashboard_panel_queries_prometheus_through_the_variables_it_defines():
    dashboard = json.loads((ROOT / "deploy/grafana/kafka-throttle-service.json").read_text())
    defined = {v["name"] for v in dashboard["templating"]["list"]} | {"__rate_interval"}
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert len(panels) >= 15
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel.get("description"), panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\$(\w+)", target["expr"]))
            assert used <= defined, (panel["title"], used - defined)
            assert 'instance=~"$instance"' in target["expr"], (panel["title"], target["expr"])


def dockerfile_stages() -> dict[str, str]:
    """Stage name ("default" for the unnamed last stage) -> its instructions."""
    text = (ROOT / "Dockerfile").read_text()
    parts = re.split(r"^(FROM .+)$", text, flags=re.M)[1:]
    stages = {}
    for header, body in zip(parts[::2], parts[1::2]):
        words = header.split()
        stages[words[3] if len(words) > 3 else "default"] = header + body
    return stages


def test_service_image_is_slim_non_root_and_health_checked():
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert stages and all(image.startswith("python:3.11-slim") or image in ("service",) for image in stages)
    assert stages[-1] == "service", "the default (last) stage is the service image"
    final = dockerfile_stages()["service"]
    user = re.search(r"^USER (\S+)", final, re.M)
    assert user and not user.group(1).startswith(("root", "0")), "the service must not run as root"
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", final, re.M)
    assert re.search(r'^ENTRYPOINT \["throttle-service"\]', final, re.M)


def test_the_files_the_image_copies_make_a_complete_service_package(tmp_path):
    """The service image's wheel is built from pyproject.toml, README.md, app/ and spark/ only, at the
    versions of constraints.txt (see
    .dockerignore): that must build a wheel with the service, its console scripts (throttle-report
    among them, which without PySpark says how to add it) and no test or development code."""
    source = tmp_path / "src"
    source.mkdir()
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile_stages()["build"], re.M)
    for line in copied:
        for name in line.split():
            run_command(["cp", "-r", ROOT / name, source / name], 60, check=True)
    run_command(["find", source, "-name", "__pycache__", "-prune", "-exec", "rm", "-rf", "{}", "+"], 60, check=True)
    result = run_command([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", source], 600)
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "app/server/cli/main.py" in names and "app/settings/model.py" in names
    assert not any(n.startswith(("tests/", "devtools/", "app/devcluster/")) for n in names), names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    scripts = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "throttle-service = app.server.cli.main:main" in scripts and "throttle-demo" not in scripts
    # Every console script the wheel installs has its module in it.
    for module in re.findall(r"^\S+ = ([\w.]+):\w+$", scripts, re.M):
        assert module.replace(".", "/") + ".py" in names, (module, scripts)
    assert "throttle-report = spark.entry_point:main" in scripts
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert "*" in ignored and {"!pyproject.toml", "!README.md", "!constraints.txt", "!app/", "!spark/"} <= set(ignored)
    # Every package at the version CI ran.
    assert re.search(r"^RUN pip wheel .*-c constraints\.txt", dockerfile_stages()["build"], re.M)


def test_the_demo_image_adds_the_development_tools_to_the_service_image():
    demo = dockerfile_stages()["demo"]
    assert demo.startswith("FROM service AS demo")
    assert re.search(r"^COPY devtools \S+$", demo, re.M) and re.search(r'^ENTRYPOINT \["throttle-demo"\]', demo, re.M)
    assert re.search(r"^USER throttle", demo, re.M), "the demo, too, runs unprivileged"


def test_composes_own_loader_reads_the_file_as_docker_will():
    """`docker compose config` without an engine: compose-go, the loader Docker Compose is built
    on (devtools/composeconfig, built by `make test-tools`), validates, interpolates and
    normalises the file; the services and volumes it reads are the ones this file declares."""
    loaded = run_command([tool("compose-config"), "-f", COMPOSE], 60, cwd=ROOT)
    assert loaded.returncode == 0, loaded.stderr
    project = yaml.safe_load(loaded.stdout)
    declared = yaml.safe_load(COMPOSE.read_text())
    assert project["name"] == declared["name"]
    assert set(project["services"]) == set(declared["services"])
    assert set(project["volumes"]) == set(declared["volumes"])
    broker = project["services"]["broker-1"]
    (tmpfs,) = [volume for volume in broker["volumes"] if volume["type"] == "tmpfs"]
    assert int(tmpfs["tmpfs"]["size"]) == 64 * 1024 * 1024 and tmpfs["tmpfs"]["mode"] == 0o1777


def test_composes_own_loader_rejects_what_docker_would_reject(tmp_path):
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("read_only: true", "read_onyl: true"))
    loaded = run_command([tool("compose-config"), "-f", broken], 60, cwd=ROOT)
    assert loaded.returncode != 0
    assert "read_onyl" in loaded.stderr
