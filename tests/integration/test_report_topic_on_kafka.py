"""The report read from a history topic on a real Kafka cluster (``--input kafka://...``, Spark's
own Kafka source fetched from Maven Central as the session starts) equals the report of the same
rows read from the files, for the whole topic and for a --since/--until range."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.commands import run_command
from spark.job import TOPIC_COPY, run_report
from spark.reading.topic import parse_topic
from spark.session import kafka_package, report_session
from tests.report.synthetic import HARD, SOFT, at, write_rounds
from tests.small_spark import SMALL_HISTORY_CONF

from .conftest import ROOT

START = at(2026, 3, 2, 8, 0)
ROUNDS = 60
OUTAGE = set(range(40, 43))


def usable(broker: int, log_dir: int):
    """Bytes available per round: volume (2, 1) falls through both limits and recovers, (3, 0)
    ramps into the soft band and stays there; the rest stay clear."""

    def at_round(i: int) -> int | None:
        if (broker, log_dir) == (2, 1):
            return 30 * 2**20 - (i * 2**20 if i < 30 else (60 - i) * 2**20)
        if (broker, log_dir) == (3, 0):
            return max(SOFT - 2**20, 40 * 2**20 - i * 2**20)
        return 80 * 2**20 + broker * 2**20 + log_dir

    return at_round


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """Six volumes over 60 one-minute rounds with a breach, a ramp and a fallback outage: 345 rows."""
    folder = tmp_path_factory.mktemp("history")
    volumes = {(broker, f"/data/{log_dir}"): usable(broker, log_dir) for broker in (1, 2, 3) for log_dir in (0, 1)}
    write_rounds(folder, START, ROUNDS, volumes, outage=OUTAGE, outage_state="THROTTLE")
    return folder


def lines_of(folder: Path) -> list[str]:
    return [line for path in sorted(folder.glob("date=*/history-*.jsonl")) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def topic(kafka_cluster, history) -> Iterator[str]:
    """The history's lines as records of a time-retained topic of three partitions, keyed by
    volume as the service keys them, each stamped with its row's time."""
    name = f"throttle-history-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers})
    # retention.ms -1: the rows are dated in the past, and time retention would delete them at once
    config = {"cleanup.policy": "delete", "retention.ms": "-1"}
    admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=1, config=config)])[name].result(30)
    producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "linger.ms": 20})
    lines = lines_of(history)
    for line in lines:
        row = json.loads(line)
        key = f"{row['broker_id']}:{row['log_dir']}" if row["broker_id"] is not None else None
        moment = round(datetime.fromisoformat(row["time"].replace("Z", "+00:00")).timestamp() * 1000)
        producer.produce(name, key=key, value=line, timestamp=moment)
    assert producer.flush(30) == 0
    assert len(lines) > 300
    yield name
    admin.delete_topics([name])[name].result(30)


@pytest.fixture(scope="module")
def spark():
    session = report_session("local[2]", SMALL_HISTORY_CONF, kafka_source=kafka_package())
    yield session
    session.stop()


def tables(folder: Path) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted(folder.glob("*.csv"))}


@pytest.mark.kafka
@pytest.mark.parametrize("window", [None, (timedelta(minutes=20), timedelta(minutes=50))], ids=["whole", "since-until"])
def test_the_topics_report_equals_the_files_report(kafka_cluster, spark, history, topic, tmp_path, window):
    since, until = (START + window[0], START + window[1]) if window else (None, None)
    source = parse_topic(f"kafka://{kafka_cluster.bootstrap_servers}/{topic}")
    from_files = run_report(spark, str(history), str(tmp_path / "files"), since, until)
    from_topic = run_report(spark, source, str(tmp_path / "topic"), since, until)

    assert from_topic.input == source.url
    assert (from_topic.rows, from_topic.skipped_lines, from_topic.first, from_topic.last) == (from_files.rows, from_files.skipped_lines, from_files.first, from_files.last)
    if window is None:
        assert from_files.rows == len(lines_of(history))
    assert from_files.rows > 0
    assert from_topic.episode_counts == from_files.episode_counts and from_files.episode_counts["hard"] >= (1 if window is None else 0)
    expected = tables(tmp_path / "files")
    assert set(expected) == {"episodes.csv", "time_in_states.csv", "brokers.csv", "forecast.csv"}
    assert tables(tmp_path / "topic") == expected
    assert from_topic.series == from_files.series and from_topic.timeline == from_files.timeline
    assert not (tmp_path / "topic" / TOPIC_COPY).exists()  # the copy of the records is scratch


@pytest.mark.kafka
def test_the_command_reads_a_topic_and_refuses_a_cache_with_it(kafka_cluster, topic, tmp_path):
    script = str(Path(sys.executable).parent / "throttle-report")
    url = f"kafka://{kafka_cluster.bootstrap_servers}/{topic}"
    refused = run_command([script, "--input", url, "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "cache")], 60, cwd=ROOT)
    assert refused.returncode == 2 and "leave --cache out" in refused.stderr
    finished = run_command([script, "--input", url, "--output", str(tmp_path / "out"), "--master", "local[2]"], 600, cwd=ROOT)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"reading {url}" in finished.stdout and "skipped 0 lines" in finished.stdout
    assert (tmp_path / "out" / "episodes.csv").exists()
