"""A real Prometheus (Debian's package) scrapes the real service observing the real cluster and
evaluates deploy/prometheus/alerts.yml; every rule and every query of the Grafana dashboard
(deploy/grafana/kafka-throttle-service.json) is run through Prometheus' HTTP API.

Four scrape targets of the job the rules select: a service with byte limits just below broker
1's usable bytes (it is filled past them), one with the same limits as ratios, one whose
cluster does not answer (a short validity, so the fallback takes over at once) and a port
where nothing listens. Prometheus scrapes and evaluates every second."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from devtools.commands import read_log, start_logged
from devtools.processes import stop_process

from ..promtools import binary, promtool
from .conftest import ROOT, MiB, RunningService, create_topic_on, delete_topic, fill, free_port, launch_service

RULES = ROOT / "deploy/prometheus/alerts.yml"
DASHBOARD = ROOT / "deploy/grafana/kafka-throttle-service.json"
FILLED_BROKER = 1
TOPIC = "prometheus-fill"
# Below broker 1's usable bytes at the start: the soft limit 6 MiB down, the hard one 22 MiB
# down; 12 MiB written lands between them, 16 MiB more goes past the hard limit.
SOFT_BELOW, HARD_BELOW, FIRST_FILL, SECOND_FILL = 6 * MiB, 22 * MiB, 12, 16
FAST = {"storage_check_interval": "PT1S", "kafka_request_timeout": "PT0.8S", "throttle_factor_validity_duration": "PT1M"}


@dataclass
class Stack:
    prometheus: httpx.Client
    byte_limits: RunningService
    ratio_limits: RunningService
    blind: RunningService
    down: str  # instance label of the target where nothing listens

    @staticmethod
    def instance(service: RunningService) -> str:
        return service.base_url.removeprefix("http://")

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = self.prometheus.get("/api/v1/query", params={"query": expr})
        body = response.json()
        assert response.status_code == 200 and body["status"] == "success", (expr, body)
        return body["data"]["result"]

    def alerts(self) -> dict[tuple[str, str | None], str]:
        """(alert name, instance) -> pending or firing."""
        body = self.prometheus.get("/api/v1/alerts").json()
        assert body["status"] == "success", body
        return {(a["labels"]["alertname"], a["labels"].get("instance")): a["state"] for a in body["data"]["alerts"]}


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"not {what} within {timeout:.0f} s; last: {last}")


def alerting_rules() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) with the dashboard's variables as Grafana would fill them:
    every instance, and a rate window of a few scrape intervals."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], target["expr"].replace("$instance", ".+").replace("$__rate_interval", "10s"))
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


@pytest.fixture(scope="module")
def stack(kafka_cluster, tmp_path_factory) -> Iterator[Stack]:
    directory = tmp_path_factory.mktemp("prometheus")
    disk = shutil.disk_usage(kafka_cluster.log_dir(FILLED_BROKER))
    assert disk.free > HARD_BELOW + 16 * MiB, f"broker {FILLED_BROKER}'s volume is too full to start: {disk}"
    hard, soft = disk.free - HARD_BELOW, disk.free - SOFT_BELOW
    services: list[RunningService] = []
    prometheus = None
    try:
        byte_limits = launch_service(
            directory,
            **FAST,
            kafka_admin_bootstrap_servers=kafka_cluster.bootstrap_servers,
            storage_per_volume_limit_min_available_bytes=str(hard),
            storage_per_volume_soft_limit_min_available_bytes=str(soft),
        )
        services.append(byte_limits)
        ratio_limits = launch_service(
            directory,
            **FAST,
            kafka_admin_bootstrap_servers=kafka_cluster.bootstrap_servers,
            storage_per_volume_limit_min_available_ratio=repr(hard / disk.total),
            storage_per_volume_soft_limit_min_available_ratio=repr(soft / disk.total),
        )
        services.append(ratio_limits)
        blind = launch_service(
            directory,
            **{**FAST, "throttle_factor_validity_duration": "PT4S", "kafka_request_timeout": "PT0.5S"},
            kafka_admin_bootstrap_servers=f"127.0.0.1:{free_port()}",
            storage_per_volume_limit_min_available_bytes=str(8 * MiB),
        )
        services.append(blind)
        down = f"127.0.0.1:{free_port()}"

        # The compose stack's configuration, with this test's targets and a 1 s rhythm.
        config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(ROOT / "deploy/prometheus" / name) for name in config["rule_files"]]
        (job,) = config["scrape_configs"]
        job["static_configs"] = [{"targets": [Stack.instance(s) for s in services] + [down]}]
        config_file = directory / "prometheus.yml"
        config_file.write_text(yaml.safe_dump(config))
        port = free_port()
        log = directory / "prometheus.log"
        prometheus = start_logged(
            [
                binary("prometheus"),
                f"--config.file={config_file}",
                f"--storage.tsdb.path={directory / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            log,
        )
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)

        def ready() -> bool:
            assert prometheus.poll() is None, read_log(log)
            try:
                return client.get("/-/ready").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, 30, "Prometheus ready")
        result = Stack(client, byte_limits, ratio_limits, blind, down)
        wait_until(lambda: len(result.query('up{job="kafka-throttle-service"}')) == 4, 20, "4 targets scraped")
        # Requests of every kind for the HTTP panels: plain reads and long-polls.
        for service in (byte_limits, ratio_limits):
            service.wait_for(lambda d: d["source"] == "observed", 15, "observed")
            etag = service.client.get("/throttle-factor").headers["etag"]
            service.client.get("/quotas")
            held = service.client.get("/throttle-factor", params={"wait": "0.5"}, headers={"If-None-Match": etag})
            assert held.status_code == 304
        yield result
    finally:
        if prometheus is not None:
            stop_process(prometheus, 30)
        for service in services:
            service.stop()


def test_promtool_finds_nothing_in_the_real_services_metrics(stack):
    for service in (stack.byte_limits, stack.ratio_limits, stack.blind):
        text = service.client.get("/metrics").text
        checked = promtool("check", "metrics", stdin=text)
        assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", ""), service.base_url
        assert "process_open_fds" in text and "_created" not in text


def test_every_dashboard_query_returns_data_for_the_series_it_shows(stack, kafka_cluster):
    byte_limits, ratio_limits = stack.instance(stack.byte_limits), stack.instance(stack.ratio_limits)
    brokers = {str(b) for b in kafka_cluster.broker_ids}

    def shows_what_it_is_for(expr: str, result: list[dict[str, Any]]) -> bool:
        labels = [series["metric"] for series in result]
        instances = {series.get("instance") for series in labels} - {None}
        if "kafka_throttle_limit_min_available_ratio" in expr:
            return instances == {ratio_limits}
        if "kafka_throttle_limit_min_available_bytes" in expr:
            return instances == {byte_limits, stack.instance(stack.blind)}
        if instances and byte_limits not in instances:
            return False
        if "kafka_throttle_volume_" in expr:
            return {series["broker_id"] for series in labels if series.get("instance") == byte_limits} == brokers
        if "by (handler" in expr:
            return "/throttle-factor" in {series.get("handler") for series in labels}
        return bool(result)

    queries = dashboard_queries()
    assert len(queries) >= 25
    for title, expr in queries:
        # A rate needs two scrapes after the first request: wait for them.
        wait_until(lambda: shows_what_it_is_for(expr, stack.query(expr)), 20, f"data for {title!r}: {expr}")


def test_every_rule_reads_series_the_real_services_export(stack):
    services = {stack.instance(s) for s in (stack.byte_limits, stack.ratio_limits, stack.blind)}
    for alert, expr in alerting_rules().items():
        for name in set(re.findall(r"\b(kafka_throttle_\w+|up)\b", expr)):
            instances = {series["metric"]["instance"] for series in stack.query(name)}
            if name == "up":
                assert instances == services | {stack.down}, alert
            elif name == "kafka_throttle_limit_min_available_ratio":
                assert instances == {stack.instance(stack.ratio_limits)}, alert
            elif name == "kafka_throttle_limit_min_available_bytes":
                assert instances == services - {stack.instance(stack.ratio_limits)}, alert
            elif name.startswith("kafka_throttle_volume_"):
                assert instances == services - {stack.instance(stack.blind)}, (alert, name)
            else:
                assert instances == services, (alert, name)
    # The rules that need a broker older than Kafka 3.3 or a failed disk stay quiet here.
    for alert in ("KafkaThrottleLogDirOffline", "KafkaThrottleLogDirsUnjudged"):
        assert stack.query(alerting_rules()[alert]) == []


def test_a_blind_service_and_a_missing_one_raise_their_alerts_and_the_healthy_ones_none(stack):
    blind, down = stack.instance(stack.blind), stack.down
    # Firing at once where the rule has no `for`; pending, or firing if this module ran long,
    # where it has (the durations are checked by the rules' unit tests).
    expected = {
        ("KafkaThrottleFallbackInForce", blind): {"firing"},
        ("KafkaThrottleNoSuccessfulRound", blind): {"firing"},
        ("KafkaThrottleAdminDisconnected", blind): {"pending", "firing"},
        ("KafkaThrottleServiceDown", down): {"pending", "firing"},
    }

    def raised() -> dict | None:
        alerts = stack.alerts()
        return alerts if all(alerts.get(key) in states for key, states in expected.items()) else None

    alerts = wait_until(raised, 30, f"alerts {expected}")
    assert set(alerts) == set(expected), alerts
    rules = alerting_rules()
    for alert, instance in expected:
        assert instance in {series["metric"].get("instance") for series in stack.query(rules[alert])}, alert


def test_a_volume_filled_past_the_soft_then_the_hard_limit_raises_the_throttle_then_the_pause_alerts(stack, kafka_cluster):
    byte_limits, ratio_limits = stack.instance(stack.byte_limits), stack.instance(stack.ratio_limits)
    observed = {byte_limits, ratio_limits}

    def alerts_of(name: str) -> dict[str, str]:
        return {instance: state for (alert, instance), state in stack.alerts().items() if alert == name and instance in observed}

    def on_both(name: str) -> Callable[[], dict[str, str] | None]:
        def raised() -> dict[str, str] | None:
            alerts = alerts_of(name)
            return alerts if set(alerts) == observed else None

        return raised

    assert {i for (_, i) in stack.alerts()} & observed == set(), "healthy services raise nothing"
    create_topic_on(kafka_cluster, TOPIC, FILLED_BROKER)
    try:
        fill(kafka_cluster, TOPIC, FIRST_FILL)
        for service in (stack.byte_limits, stack.ratio_limits):
            service.wait_for(lambda d: d["state"] == "THROTTLE", 10, "THROTTLE")
        persisting = wait_until(on_both("KafkaThrottleThrottlingPersists"), 15, "THROTTLE alerts pending")
        assert set(persisting.values()) == {"pending"}  # for 30 minutes
        # The trend of the last minute projects both volumes (bytes and ratio limits) past the hard limit.
        filling = wait_until(on_both("KafkaThrottleVolumeFillingUp"), 15, "filling-up alerts pending")
        assert set(filling.values()) == {"pending"}
        volumes = stack.query(alerting_rules()["KafkaThrottleVolumeFillingUp"])
        assert {(v["metric"]["instance"], v["metric"]["broker_id"]) for v in volumes} >= {(i, str(FILLED_BROKER)) for i in observed}
        assert alerts_of("KafkaThrottlePaused") == {}

        fill(kafka_cluster, TOPIC, SECOND_FILL)
        stack.byte_limits.wait_for(lambda d: d["state"] == "PAUSE", 10, "PAUSE")
        paused = wait_until(lambda: alerts_of("KafkaThrottlePaused").get(byte_limits), 15, "the PAUSE alert pending")
        assert paused == "pending"  # for 1 minute
        wait_until(lambda: byte_limits not in alerts_of("KafkaThrottleVolumeFillingUp"), 15,
                   "the filling-up alert resolved once the volume is past the hard limit")
        paused_now = stack.query(alerting_rules()["KafkaThrottlePaused"])
        assert byte_limits in {series["metric"]["instance"] for series in paused_now}
    finally:
        delete_topic(kafka_cluster, TOPIC)
    stack.byte_limits.wait_for(lambda d: d["state"] == "OPEN", 30, "OPEN again after deleting the topic")
