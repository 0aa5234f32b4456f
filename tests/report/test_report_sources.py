"""The report says which source observed what: the episodes and the broker summary count the
observations that came from the nodes' own reports (``observed_by: node-report``), the rest
from DescribeLogDirs (``admin-api``, and rows written before the field, read as such).

Rounds every 60 s from 2026-07-01 10:00 UTC (i = 0..19), volumes of 100 MiB:
- A (1, /data/a) is at 5 MiB (past the hard limit) at rounds 5-14, else 60 MiB; its rows at
  rounds 8-11 were observed by its node's report;
- B (2, /data/b) idles at 60 MiB; its rows at rounds 0-2 were observed by its node's report.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from app.history.files import file_bytes
from spark.job import run_report

from .synthetic import MiB, at, instant, write_rounds

START = at(2026, 7, 1, 10, 0, 0)
ROUNDS = 20
BY_REPORT = {(1, "/data/a"): range(8, 12), (2, "/data/b"): range(0, 3)}


def volumes() -> dict:
    return {
        (1, "/data/a"): lambda i: 5 * MiB if 5 <= i <= 14 else 60 * MiB,
        (2, "/data/b"): lambda i: 60 * MiB,
    }


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    write_rounds(history, START, ROUNDS, volumes(), outage=set())
    by_report_at = {
        (key, instant(START.replace(minute=i))) for key, rounds in BY_REPORT.items() for i in rounds
    }
    [path] = [p for p in history.rglob("history-*")]
    lines = []
    for line in file_bytes(path).decode().splitlines():
        row = json.loads(line)
        if ((row.get("broker_id"), row.get("log_dir")), row["time"]) in by_report_at:
            row["observed_by"] = "node-report"
        lines.append(json.dumps(row))
    path.with_name(path.name.split(".")[0] + ".jsonl").write_text("".join(line + "\n" for line in lines))
    if not path.name.endswith(".jsonl"):
        path.unlink()
    output = tmp_path_factory.mktemp("report")
    return run_report(spark, str(history), str(output)), output


def test_an_episode_counts_the_observations_its_nodes_report_made(report):
    result, output = report
    assert result.skipped_lines == 0
    [episode] = [e for e in read_csv(output, "episodes") if e["limit"] == "hard"]
    assert (episode["broker_id"], episode["log_dir"]) == ("1", "/data/a")
    assert (int(episode["observations"]), int(episode["node_report_observations"])) == (10, 4)


def test_the_broker_summary_counts_each_brokers_observations_by_node_report(report):
    _, output = report
    counts = {b["broker_id"]: (int(b["observations"]), int(b["node_report_observations"])) for b in read_csv(output, "brokers")}
    assert counts == {"1": (ROUNDS, 4), "2": (ROUNDS, 3)}
