"""The alert rules for the Prometheus Operator: ``python -m devtools.prometheus_rule``.

``deploy/prometheus/alerts.yml`` is the one source of the alert rules. This writes them into
``deploy/kubernetes/base/prometheusrule.yaml`` (a ``PrometheusRule``), and a test fails when
the two differ. Each alert's ``runbook_url`` is its section of docs/operations.md under a
base. ``alerts.yml`` names the file by its path in the repository (``ALERTS_RUNBOOK_BASE``);
the ``PrometheusRule``, which Alertmanager's receivers read, names it by an absolute address,
``DEFAULT_RUNBOOK_BASE`` (the file on the project's default branch), the one place that
address is written. ``--runbook-base URL`` puts your copy of the docs there instead (e.g. the
file's address on your Git host), in the ``PrometheusRule`` and, with ``--alerts FILE``, in a
copy of the rule file for a plain Prometheus."""

from __future__ import annotations

import argparse
import copy
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "deploy/prometheus/alerts.yml"
PROMETHEUS_RULE = ROOT / "deploy/kubernetes/base/prometheusrule.yaml"
# The runbooks' address in the PrometheusRule (absolute: a receiver opens it as it is).
DEFAULT_RUNBOOK_BASE = "https://github.com/kafka-throttle/kafka-throttle-service/blob/main/docs/operations.md"
# The runbooks in alerts.yml: the file's path in this repository.
ALERTS_RUNBOOK_BASE = "docs/operations.md"

HEADER = """\
# Generated from deploy/prometheus/alerts.yml by `python -m devtools.prometheus_rule`: edit the
# rules there and run it again (tests/unit/test_kubernetes.py fails while the two differ).
# The runbook links are absolute; `--runbook-base URL` points them at your copy of the docs.
# The Prometheus Operator loads it where its ruleSelector matches these labels (with
# kube-prometheus-stack, add the release label of your installation).
"""


def runbook_url(alert: str, base: str = ALERTS_RUNBOOK_BASE) -> str:
    """The alert's runbook: the docs/operations.md section named after it."""
    return f"{base}#{alert.lower()}"


def alert_rules(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def with_runbook_base(groups: list[dict[str, Any]], base: str) -> list[dict[str, Any]]:
    groups = copy.deepcopy(groups)
    for rule in alert_rules(groups):
        rule["annotations"]["runbook_url"] = runbook_url(rule["alert"], base)
    return groups


class _BlockStrings(yaml.SafeDumper):
    """Multi-line strings (the longer PromQL expressions) as literal blocks, as written."""


_BlockStrings.add_representer(
    str,
    lambda dumper, text: dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None),
)


def _dump(document: dict[str, Any]) -> str:
    return yaml.dump(document, Dumper=_BlockStrings, sort_keys=False, width=10_000, allow_unicode=True)


def prometheus_rule(groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "throttle-service", "labels": {"role": "alert-rules"}},
        "spec": {"groups": groups},
    }


def render(runbook_base: str = DEFAULT_RUNBOOK_BASE, alerts: Path = ALERTS) -> str:
    groups = with_runbook_base(yaml.safe_load(alerts.read_text())["groups"], runbook_base)
    return HEADER + _dump(prometheus_rule(groups))


def render_alerts(runbook_base: str, alerts: Path = ALERTS) -> str:
    return _dump({"groups": with_runbook_base(yaml.safe_load(alerts.read_text())["groups"], runbook_base)})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m devtools.prometheus_rule", description=__doc__.splitlines()[0])
    parser.add_argument("--runbook-base", default=DEFAULT_RUNBOOK_BASE, metavar="URL", help=f"the address of docs/operations.md (default: {DEFAULT_RUNBOOK_BASE})")
    parser.add_argument("--output", type=Path, default=PROMETHEUS_RULE, metavar="FILE", help="the PrometheusRule to write")
    parser.add_argument("--alerts", type=Path, metavar="FILE", help="also write the rule file with this runbook base")
    args = parser.parse_args(argv)
    args.output.write_text(render(args.runbook_base))
    print(f"wrote {args.output}")
    if args.alerts:
        args.alerts.write_text(render_alerts(args.runbook_base))
        print(f"wrote {args.alerts}")


if __name__ == "__main__":
    main()
