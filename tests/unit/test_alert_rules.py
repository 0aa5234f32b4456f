"""deploy/prometheus/alerts.yml: valid for promtool, each alert unit-tested firing and not firing
(tests/unit/prometheus/alerts_test.yml) on series shaped like the service's real /metrics, and
each with a summary and a runbook section in docs/operations.md. A real Prometheus evaluates
the same rules against the real service in tests/integration/test_prometheus_on_kafka.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from devtools.prometheus_rule import runbook_url

from ..promtools import promtool
from .exposition import BYTES_LIMITS, RATIO_LIMITS, busy_service, parse, scrape_after

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy/prometheus/alerts.yml"
RULE_TESTS = ROOT / "tests/unit/prometheus/alerts_test.yml"
OPERATIONS = ROOT / "docs/operations.md"
SCRAPE_LABELS = {"job", "instance"}  # added by Prometheus, not by the service


def alerting_rules() -> list[dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


@pytest.fixture(scope="module")
def real_series() -> dict[str, set[frozenset[str]]]:
    """Sample name -> the label name sets the service exports, with either kind of limits."""
    shapes: dict[str, set[frozenset[str]]] = {}
    for limits in (BYTES_LIMITS, RATIO_LIMITS):
        for name, labels in parse(scrape_after(busy_service, limits)):
            shapes.setdefault(name, set()).add(frozenset(dict(labels)))
    return shapes


def test_promtool_accepts_the_rules_and_the_prometheus_configuration_that_loads_them():
    rules = promtool("check", "rules", RULES)
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert f"SUCCESS: {len(alerting_rules())} rules found" in rules.stdout
    config = promtool("check", "config", ROOT / "deploy/prometheus/prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr
    assert "SUCCESS: 1 rule files found" in config.stdout


def test_promtool_unit_tests_of_every_alert_pass():
    result = promtool("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_is_unit_tested_firing_and_not_firing():
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing, quiet = set(), set()
    for case in tests:
        for check in case["alert_rule_test"]:
            (firing if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alerting_rules()}
    assert len(names) == 21
    assert names - firing == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested staying quiet"


def test_the_unit_tests_feed_series_shaped_like_the_service_output(real_series):
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    checked = 0
    for case in tests:
        for entry in case["input_series"]:
            (family,) = text_string_to_metric_families(entry["series"] + " 0\n")
            (sample,) = family.samples
            labels = set(sample.labels)
            assert labels >= SCRAPE_LABELS, f"{entry['series']}: Prometheus adds job and instance"
            if sample.name == "up":
                continue
            assert sample.name in real_series, f"{sample.name} is not in the service's /metrics"
            assert frozenset(labels - SCRAPE_LABELS) in real_series[sample.name], (
                f"{entry['series']}: the service exports {sample.name} with labels {real_series[sample.name]}"
            )
            if sample.name == "kafka_throttle_state":
                assert sample.labels["kafka_throttle_state"] in ("OPEN", "THROTTLE", "PAUSE")
            checked += 1
    assert checked >= 30


def test_every_metric_a_rule_reads_is_one_the_service_exports(real_series):
    for rule in alerting_rules():
        names = set(re.findall(r"\b(kafka_throttle_\w+|http_\w+_total|process_\w+|up)\b", rule["expr"]))
        assert names, rule["alert"]
        missing = sorted(name for name in names - {"up"} if name not in real_series)
        assert missing == [], f"{rule['alert']} reads series the service does not export: {missing}"


def test_every_alert_has_a_summary_a_severity_and_a_runbook_section_in_the_docs():
    docs = OPERATIONS.read_text()
    headings = {heading.strip(): heading.strip().lower() for heading in re.findall(r"^### (.+)$", docs, re.MULTILINE)}
    for rule in alerting_rules():
        name = rule["alert"]
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"], name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert annotations["runbook_url"] == runbook_url(name), name
        assert name in headings, f"docs/operations.md has no runbook section '### {name}'"
        section = docs.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert len(section.split()) >= 40, f"the runbook of {name} says too little"
