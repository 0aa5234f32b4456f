"""docs/reliability.md's security model stays true: it names every secret setting and every
endpoint with who may call it, and every test it cites exists; its quota store section names
the store's files and commands, and the tests it cites exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from app.quotas.generation import generation_path
from app.quotas.store import store_file, wal_file
from app.server.app import create_app
from app.redaction import HIDDEN, MIN_REDACTED_LENGTH, is_secret_key
from app.settings import load_settings
from app.settings.model import ADMIN_PREFIX, HISTORY_PRODUCER_PREFIX, PROPERTY_FIELDS
from app.kafka.admin_config import SUPPORTED_PROPERTIES

ROOT = Path(__file__).resolve().parents[2]


def security_model() -> str:
    text = (ROOT / "docs" / "reliability.md").read_text()
    assert text.startswith("# Reliability and security\n")
    start = text.index("## Security model")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def test_every_secret_setting_is_named():
    section = security_model()
    secret_settings = [key for key in PROPERTY_FIELDS if is_secret_key(key)]
    secret_settings += [ADMIN_PREFIX + key for key in SUPPORTED_PROPERTIES if is_secret_key(key)]
    assert len(secret_settings) >= 5
    for key in secret_settings:
        assert f"`{key}`" in section, key
    assert f"`{HISTORY_PRODUCER_PREFIX}*`" in section
    assert f"`{HIDDEN}`" in section and f"{MIN_REDACTED_LENGTH} characters or more" in section


def test_every_endpoint_is_listed_with_who_may_call_it(tmp_path):
    settings = load_settings(
        environ={}, storage_check_interval="PT0S", storage_per_volume_limit_min_available_bytes="1", data_dir=str(tmp_path)
    )
    schema = create_app(settings).openapi()
    expected = {
        f"{method.upper()} {path}": "bearer token" if operation.get("security") else "anyone"
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    }
    listed = dict(re.findall(r"^\| `([A-Z]+ /[^`]*)` \| ([^|]+?) \|$", security_model(), re.MULTILINE))
    assert listed == expected


def test_every_cited_test_exists():
    cited = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", security_model())
    assert len(cited) >= 10
    for path, name in cited:
        tree = ast.parse((ROOT / path).read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in names, f"{path}::{name} is cited but does not exist"


def test_the_quota_store_section_names_the_files_and_commands_and_its_tests_exist():
    text = (ROOT / "docs" / "reliability.md").read_text()
    section = text[text.index("## The quota store") :]
    section = section[: section.index("\n## ")]
    store = store_file(Path("/data"))
    for name in (store.name, generation_path(store).name, wal_file(store).name, "--accept-empty-store", "throttle-service --config throttle.properties backup"):
        assert name in section, name
    cited = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", section)
    assert len(cited) >= 8
    for path, name in cited:
        tree = ast.parse((ROOT / path).read_text())
        assert name in {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}, f"{path}::{name} is cited but does not exist"
