"""throttle.service.log.format: text lines by default; with json, every line the real service
process writes is one JSON object (time, level, logger, message) and the audit and
state-change lines carry their facts as fields."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx

from devtools.commands import read_log, run_command, start_logged
from devtools.processes import free_port, healthz_answers, service_environment, stop_process

TOKEN = "a-token-of-sixteen-characters"
SETTINGS = {
    "storage_check_interval": "PT0S",  # no cluster: the decision is the configured one
    "storage_per_volume_limit_min_available_ratio": "0.05",
    "admin_token": TOKEN,
}


@contextmanager
def running_service(tmp_path: Path, **settings: str) -> Iterator[tuple[httpx.Client, list[str]]]:
    port = free_port()
    environment = service_environment(port, tmp_path, {**SETTINGS, **settings})
    log = tmp_path / f"service-{port}.log"  # a file, not a pipe read only after the stop
    process = start_logged([sys.executable, "-m", "app.server.cli.main"], log, env=environment)
    lines: list[str] = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert healthz_answers(client, process, timeout=60), "the service did not start"
            yield client, lines
    finally:
        stop_process(process)
        lines.extend(read_log(log).splitlines())


def write_quota(client: httpx.Client) -> None:
    answer = client.put(
        "/quotas/overrides",
        params={"user": "alice", "client-id": "<default>"},
        json={"produce": 1048576},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert answer.status_code == 200, answer.text


def test_json_lines_are_one_object_each_with_the_fields_of_audit_and_state_changes(tmp_path):
    with running_service(tmp_path, log_format="json") as (client, lines):
        write_quota(client)
    records = [json.loads(line) for line in lines]  # every line, uvicorn's included, is JSON
    assert len(records) >= 5
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record), record
        assert datetime.fromisoformat(record["time"]).utcoffset().total_seconds() == 0
        assert "color_message" not in record
    assert any(record["logger"] == "uvicorn.error" for record in records)
    (audit,) = [record for record in records if record.get("event") == "audit"]
    assert audit["logger"] == "app.server.api.audit" and audit["level"] == "INFO"
    assert {key: audit[key] for key in ("method", "path", "entity", "outcome", "status", "client")} == {
        "method": "PUT",
        "path": "/quotas/overrides",
        "entity": {"user": "alice", "client-id": "<default>"},
        "outcome": "accepted",
        "status": 200,
        "client": "127.0.0.1",
    }
    assert audit["message"].startswith('PUT /quotas/overrides user="alice" client-id="<default>" outcome=accepted')
    (state,) = [record for record in records if record.get("event") == "state_change"]
    assert {key: state[key] for key in ("previous_state", "state", "factor", "volumes")} == {
        "previous_state": None,
        "state": "OPEN",
        "factor": 1.0,
        "volumes": [],
    }


def test_text_lines_stay_the_default(tmp_path):
    with running_service(tmp_path) as (client, lines):
        write_quota(client)
    audit = [line for line in lines if " app.server.api.audit: " in line]
    assert len(audit) == 1 and 'user="alice" client-id="<default>" outcome=accepted status=200' in audit[0]
    assert not any(line.startswith("{") for line in lines)


def test_an_unknown_log_format_stops_start_up_naming_the_key(tmp_path):
    environment = service_environment(free_port(), tmp_path, {**SETTINGS, "log_format": "xml"})
    result = run_command([sys.executable, "-m", "app.server.cli.main"], 60, env=environment)
    assert result.returncode == 2
    assert "throttle.service.log.format" in result.stderr and "text or json" in result.stderr


def test_a_text_line_escapes_the_control_characters_of_what_it_echoes_and_keeps_its_traceback():
    import logging

    from app.server.runtime.log_format import TEXT_FORMAT, TextFormatter

    formatter = TextFormatter(TEXT_FORMAT)
    record = logging.LogRecord("app.quotas", logging.WARNING, __file__, 1, "override of user %s set", ("eve\x1b[31mRED\x1e\nroot\u2028x",), None)
    line = formatter.format(record)
    assert line.endswith("override of user eve\\x1b[31mRED\\x1e\\nroot\\u2028x set") and line.isprintable()
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    first, *rest = formatter.format(record).splitlines()
    assert first.endswith("failed") and rest[0] == "Traceback (most recent call last):"


def test_a_configuration_problem_escapes_a_path_it_echoes_by_the_rule_of_its_quoted_value():
    from app.settings.loading import Problem

    path = "/etc/passwd/sub\x1b[31mRED\x1e"
    line = str(Problem("throttle.service.data.dir", path, f"a writable directory (/etc/passwd is not a directory, so {path} cannot be created)", "file x\x07"))
    assert line == (
        "throttle.service.data.dir='/etc/passwd/sub\\x1b[31mRED\\x1e' (from file x\\x07): allowed: a writable directory "
        "(/etc/passwd is not a directory, so /etc/passwd/sub\\x1b[31mRED\\x1e cannot be created)"
    )


def test_an_audit_name_is_quoted_with_its_control_characters_escaped_by_the_same_rule():
    from app.redaction import printable
    from app.server.api.audit import entity_text

    name = 'eve\x1b[31m\u2028é" outcome=accepted\\'
    text = entity_text({"user": name})
    assert text == 'user="eve\\x1b[31m\\u2028é\\" outcome=accepted\\\\"' and text.isprintable()
    assert printable("eve\x1b[31m\u2028é") in text  # the rule of problems and log lines
