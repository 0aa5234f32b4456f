"""The history of the real service on the real cluster, the report on it, and the history topic."""

from __future__ import annotations

import csv
import json
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, ConfigResource

from app.history.compact import expand
from app.history.files import file_bytes
from devtools.commands import run_command

from .conftest import ROOT, MiB, create_topic_on, delete_topic, fill
from .test_service_on_kafka import FAST


def history_lines(directory: Path) -> list[dict]:
    """The history's rows as format 1 has them (format 2 expanded; closed hours compressed)."""
    paths = sorted(directory.glob("date=*/history-*.jsonl*"))
    texts = [file_bytes(path).decode() for path in paths]
    return list(expand(json.loads(line) for text in texts for line in text.splitlines()))


def test_a_violation_on_the_real_cluster_is_an_episode_of_that_broker_and_log_dir_in_the_report(kafka_cluster, start_service, tmp_path):
    history = tmp_path / "history"
    service = start_service(**FAST, history_dir=str(history), storage_per_volume_limit_min_available_bytes=str(40 * MiB))
    service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 10, "observed OPEN")
    create_topic_on(kafka_cluster, "history-2", 2)
    try:
        fill(kafka_cluster, "history-2", 28)
        service.wait_for(lambda d: d["state"] == "PAUSE", 10, "PAUSE")
        time.sleep(2)  # a few rounds in breach
    finally:
        delete_topic(kafka_cluster, "history-2")
    service.wait_for(lambda d: d["state"] == "OPEN", 30, "OPEN again after deleting the topic")
    time.sleep(1.5)
    assert 'kafka_throttle_history_rows_written_total' in service.client.get("/metrics").text
    service.stop()  # the writer finishes its queue on shutdown

    rows = history_lines(history)
    log_dir_2 = str(kafka_cluster.log_dir(2))
    assert {(r["broker_id"], r["log_dir"]) for r in rows} == {(b, str(kafka_cluster.log_dir(b))) for b in (1, 2, 3)}
    assert any(r["broker_id"] == 2 and r["volume_status"] == "breaching" and r["state"] == "PAUSE" for r in rows)

    output = tmp_path / "report"
    # The installed console script, as an operator runs it; rounds of a loaded machine may be
    # late, so gaps count from 30 s here.
    command = [str(Path(sys.executable).parent / "throttle-report"), "--input", str(history), "--output", str(output), "--master", "local[2]", "--max-gap", "30"]
    finished = run_command(command, 300, cwd=ROOT)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "read " in finished.stdout and "hard episodes" in finished.stdout and "report.html" in finished.stdout

    with (output / "episodes.csv").open() as handle:
        episodes = list(csv.DictReader(handle))
    hard = [e for e in episodes if e["limit"] == "hard"]
    assert [(e["broker_id"], e["log_dir"], e["end_reason"], e["ongoing"]) for e in hard] == [("2", log_dir_2, "recovered", "false")]
    assert float(hard[0]["duration_seconds"]) >= 2 and int(hard[0]["worst_usable_bytes"]) <= 40 * MiB
    assert (output / "report.html").read_text().count('data-chart="volume"') == 3


def test_history_rows_also_go_to_a_kafka_topic_keyed_by_broker_and_log_dir(kafka_cluster, start_service):
    topic = f"throttle-history-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    service = start_service(
        **FAST,
        history_kafka_enabled="true",
        history_kafka_topic=topic,
        storage_per_volume_limit_min_available_bytes=str(8 * MiB),
    )
    service.wait_for(lambda d: d["source"] == "observed", 10, "observed")
    time.sleep(2)
    service.stop()

    consumer = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": topic, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    records = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and len({r.key() for r in records if r.key() is not None}) < 3:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    # the service created the topic time-retained: a compacted one would keep no history
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(30)
    assert (config["cleanup.policy"].value, config["retention.ms"].value) == ("delete", str(30 * 86_400_000))
    # the same lines as the files: round rows (no key) and volume rows, one JSON object a record
    rounds = [json.loads(r.value()) for r in records if r.key() is None]
    assert rounds and all(row["row"] == "round" and row["state"] for row in rounds)
    records = [record for record in records if record.key() is not None]
    keys = {record.key().decode() for record in records}
    assert keys == {f"{b}:{kafka_cluster.log_dir(b)}" for b in (1, 2, 3)}
    value = json.loads(records[0].value())
    broker_id, log_dir = records[0].key().decode().split(":", 1)
    assert (value["broker_id"], value["log_dir"], value["brokerId"]) == (int(broker_id), log_dir, broker_id)
    assert value["hardLimit"] == {"type": "MinFreeBytes", "level": 8 * MiB}
    assert value["volumes"][0]["volumeName"] == log_dir and value["volumes"][0]["capacity"] == 64 * MiB
    assert value["row"] == "volume" and value["snapshotAt"] == value["observed_at"]
