"""``throttle-report --input kafka://...``: the topic's address, the client's properties file,
the range of records read, and which release of Spark's Kafka source a PySpark gets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spark.reading.topic import BadTopic, parse_topic, read_client_config, source_options
from spark.session import newest_release


def test_a_topic_is_bootstrap_servers_and_a_topic_name():
    one = parse_topic("kafka://kafka-0.kafka:9092/kafka-throttle-history")
    assert (one.bootstrap_servers, one.topic, one.url) == ("kafka-0.kafka:9092", "kafka-throttle-history", "kafka://kafka-0.kafka:9092/kafka-throttle-history")
    several = parse_topic("kafka://a:9092,b:9093,[::1]:9094/history.v2")
    assert (several.bootstrap_servers, several.topic) == ("a:9092,b:9093,[::1]:9094", "history.v2")
    for wrong in ("kafka://a:9092", "kafka://a/history", "kafka://a:9092/", "kafka://a:9092/x/y", "kafka://a:9092/has space", "kafka:/a:9092/t"):
        with pytest.raises(BadTopic, match="kafka://HOST:PORT"):
            parse_topic(wrong)


def test_the_client_properties_pass_to_sparks_source_and_the_reports_own_are_refused(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("# TLS and SCRAM\nsecurity.protocol=SASL_SSL\nsasl.mechanism = SCRAM-SHA-512\n\nssl.truststore.location: /etc/ca.p12\n")
    client = read_client_config(config)
    assert client == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "ssl.truststore.location": "/etc/ca.p12"}
    options = source_options(parse_topic("kafka://k:9092/h", client), None, None)
    assert options["kafka.security.protocol"] == "SASL_SSL" and options["kafka.bootstrap.servers"] == "k:9092" and options["subscribe"] == "h"
    assert "startingTimestamp" not in options and "endingTimestamp" not in options  # the whole topic
    config.write_text("bootstrap.servers=elsewhere:9092\n")
    with pytest.raises(BadTopic, match="line 1: bootstrap.servers is set by the report"):
        read_client_config(config)
    config.write_text("security.protocol=SSL\njust text\n")
    with pytest.raises(BadTopic, match="line 2: not a key=value line"):
        read_client_config(config)
    with pytest.raises(BadTopic, match="not a readable file"):
        read_client_config(tmp_path / "missing.properties")


def test_the_records_read_are_those_of_the_range_with_an_hours_slack_either_side():
    since, until = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 11, 8, tzinfo=UTC)
    options = source_options(parse_topic("kafka://k:9092/h"), since, until)
    assert options["startingTimestamp"] == str(int(since.timestamp() * 1000) - 3_600_000)
    assert options["endingTimestamp"] == str(int(until.timestamp() * 1000) + 3_600_000)
    assert options["startingOffsetsByTimestampStrategy"] == "latest"  # a partition with nothing that late is read from its end
    assert options["failOnDataLoss"] == "false"  # retention deleting the oldest records meanwhile is not an error


def test_a_pyspark_without_its_kafka_source_on_maven_central_gets_the_newest_release_of_its_major_before_it():
    published = ["3.5.7", "4.0.0", "4.1.0-preview3", "4.1.1", "4.2.0-preview5", "4.2.0", "5.0.0"]
    assert newest_release(published, "4.3.0") == "4.2.0"
    assert newest_release(published, "4.1.1") == "4.1.1"
    assert newest_release(published, "4.1.0") == "4.0.0"
    assert newest_release(published, "6.0.0") is None
    assert newest_release(["4.10.0", "4.9.0"], "4.10.1") == "4.10.0"  # by number, not text
