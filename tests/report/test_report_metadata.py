"""The report on a history with metadata log volumes (a service with metadata limits): the
rows the service's decider and writer make are read without a skipped line, the metadata
volumes get episodes of their own named by ``holds``, a combined node's shared volume has a
data episode and a metadata episode, and the data tables stay the data volumes'.

Rounds every 60 s (i = 0..14), validity 300 s, data limits hard 10 MiB / soft 20 MiB on
volumes of 100 MiB; metadata limit hard 4 MiB:
- broker 1 (/data/a), 50 MiB throughout;
- broker 2 (/data/b) is a combined node whose metadata log shares /data/b: 50 MiB, 3 MiB at
  rounds 10-11 (a data breach and a metadata breach);
- controller 1000 (/meta, 16 MiB) has 8 MiB, 2 MiB at rounds 3-6.
"""

from __future__ import annotations

import csv
from datetime import timedelta
from pathlib import Path

import pytest

from app.decision.decider import ThrottleDecider
from app.decision.policy import LimitKind, StoragePolicy
from app.history.files import HistoryFiles, Retention
from app.history.rows import round_lines
from app.observation.model import ObservationRound, VolumeObservation
from app.observation.node_reports import NodeReport, NodeVolume
from spark.job import run_report

from .synthetic import HARD, SOFT, TOTAL, MiB, at

START = at(2026, 6, 3, 10, 0, 0)
INTERVAL = 60.0
ROUNDS = 15


def t(i: int) -> str:
    return (START + timedelta(seconds=INTERVAL * i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def record(directory: Path) -> None:
    decider = ThrottleDecider(
        StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(HARD), float(SOFT)),
        300.0,
        1.0,
        started_at=START.timestamp() - 1,
        metadata_policy=StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, float(4 * MiB)),
    )
    files = HistoryFiles(directory, Retention(max_age_days=100000, max_total_bytes=1 << 50))
    for i in range(ROUNDS):
        moment = (START + timedelta(seconds=INTERVAL * i)).timestamp()
        shared = 3 * MiB if i in (10, 11) else 50 * MiB
        controller = 2 * MiB if 3 <= i <= 6 else 8 * MiB
        decider.record_node_report(NodeReport(1000, frozenset({"controller"}), (NodeVolume("/meta", 16 * MiB, controller, frozenset({"metadata"})),), moment - 0.3))
        decider.record_node_report(
            NodeReport(2, frozenset({"broker", "controller"}), (NodeVolume("/data/b", TOTAL, shared, frozenset({"data", "metadata"})),), moment - 0.2)
        )
        observations = (VolumeObservation(1, "/data/a", TOTAL, 50 * MiB, moment), VolumeObservation(2, "/data/b", TOTAL, shared, moment))
        round_ = ObservationRound(moment - 0.5, moment, (1, 2), observations)
        decider.apply_round(round_)
        files.append(round_lines(round_, decider.decision(moment), INTERVAL).encode(), moment)
    files.close()


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history-metadata")
    record(history)
    output = tmp_path_factory.mktemp("report-metadata")
    return run_report(spark, str(history), str(output)), output


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_the_metadata_rows_are_read_without_a_skipped_line(report):
    result, _ = report
    assert result.skipped_lines == 0
    assert result.rows == ROUNDS * 4  # two data volumes and two metadata volumes a round


def test_metadata_volumes_have_episodes_of_their_own_named_by_holds(report):
    _, output = report
    found = {(e["broker_id"], e["log_dir"], e["holds"], e["limit"], e["start"], e["end"], e["end_reason"]) for e in read_csv(output, "episodes")}
    assert found == {
        ("2", "/data/b", "data", "hard", t(10), t(12), "recovered"),
        ("2", "/data/b", "data", "soft", t(10), t(12), "recovered"),
        ("2", "/data/b", "data,metadata", "hard", t(10), t(12), "recovered"),
        ("1000", "/meta", "metadata", "hard", t(3), t(7), "recovered"),
    }
    metadata = next(e for e in read_csv(output, "episodes") if e["broker_id"] == "1000")
    assert (metadata["limit_kind"], float(metadata["level"]), metadata["worst_usable_bytes"]) == ("min-available-bytes", 4 * MiB, str(2 * MiB))


def test_the_other_tables_are_the_data_volumes_and_the_page_names_metadata_episodes(report):
    _, output = report
    assert sorted(b["broker_id"] for b in read_csv(output, "brokers")) == ["1", "2"]
    assert [b["hard_episodes"] for b in sorted(read_csv(output, "brokers"), key=lambda b: b["broker_id"])] == ["0", "1"]
    assert sorted((f["broker_id"], f["log_dir"]) for f in read_csv(output, "forecast")) == [("1", "/data/a"), ("2", "/data/b")]
    page = (output / "report.html").read_text()
    assert "hard metadata 4" in page
