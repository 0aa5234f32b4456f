"""schemathesis against the running service and its committed OpenAPI document, with every
check it has: the service takes what the document allows and refuses what it does not, answers
only the statuses, headers and bodies the document states, never a 5xx, for every operation.
One fixed seed and a bounded number of cases per operation keep the run repeatable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT
from .schemathesis_hooks import NODE_TOKEN

TOKEN = "schemathesis-admin-token"
SEED = 20261126
EXAMPLES_PER_OPERATION = 25  # bounded so CI stays fast: about 500 requests in all
DOCUMENT = ROOT / "openapi" / "openapi.json"


def test_schemathesis_with_every_check_finds_nothing(start_service, tmp_path: Path):
    service = start_service(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_ratio="0.05",
        admin_token=TOKEN,
        node_token=NODE_TOKEN,
        produce="1000000",
    )
    events = tmp_path / "events.ndjson"
    command = [
        # The configuration adds 413 to the statuses that reject invalid data (see the file).
        str(Path(sys.executable).parent / "st"), "--config-file", str(Path(__file__).parent / "schemathesis.toml"), "run", str(DOCUMENT),
        "--url", service.base_url,
        "--header", f"Authorization: Bearer {TOKEN}",
        # Every check; positive_data_acceptance through the hooks' copy of it, which knows the
        # one rule the document cannot state (tests/integration/schemathesis_hooks.py).
        "--checks", "all", "--exclude-checks", "positive_data_acceptance",
        "--seed", str(SEED), "--max-examples", str(EXAMPLES_PER_OPERATION), "--workers", "1",
        "--request-timeout", "10", "--report", "ndjson", "--report-ndjson-path", str(events),
    ]
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.integration.schemathesis_hooks", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert result.returncode == 0, f"{result.stdout[-12000:]}\n{result.stderr[-2000:]}\nservice log:\n{service.log()[-3000:]}"

    document = json.loads(DOCUMENT.read_text())
    documented = {f"{method.upper()} {path}" for path, operations in document["paths"].items() for method in operations}
    assert documented <= _tested_operations(events), "an operation was not tested"


def _tested_operations(events: Path) -> set[str]:
    """The labels of the operations schemathesis sent requests to, from its event stream."""
    labels: set[str] = set()
    for line in events.read_text().splitlines():
        labels.update(_labels_in(json.loads(line)))
    return labels


def _labels_in(value: object) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        label = value.get("label")
        if isinstance(label, str) and " /" in label:
            found.add(label)
        for item in value.values():
            found |= _labels_in(item)
    elif isinstance(value, list):
        for item in value:
            found |= _labels_in(item)
    return found
