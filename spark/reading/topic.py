"""The history on a Kafka topic (``--input kafka://HOST:PORT[,HOST:PORT...]/TOPIC``), read with
Spark's own Kafka source.

Each record's value is one history line, as the files hold them. The records within the
range of the report (by their Kafka timestamp, with an hour's slack either side: a row is
published after its round) are copied as text into a scratch folder of the output, one file per
Spark task in each partition's order, and that folder is read as any history folder: the same
reader, checks, skip reasons and tables as files. The rows are then kept by their own ``time``
within ``--since``/``--until``, as for files.

The topic must keep what happened (``cleanup.policy=delete`` with a time retention): a compacted
topic keeps only the latest record per key, which is no history."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark.reading.cache import UnusablePath

SCHEME = "kafka://"
# A row is published after the round it belongs to; records this much either side of the
# range are read, and the rows then kept by their own time.
SLACK = timedelta(hours=1)
_SERVER = r"[A-Za-z0-9.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}"
_URL = re.compile(
    rf"kafka://(?P<servers>(?:{_SERVER})(?:,(?:{_SERVER}))*)/(?P<topic>[A-Za-z0-9._\-]{{1,249}})"
)


class BadTopic(ValueError):
    """A --input kafka://... or a --kafka-config that cannot be used; the message says why."""


class UnreadableTopic(UnusablePath):
    """The topic could not be read (no Kafka source in Spark, brokers that do not answer, access
    refused): said in one line."""


@dataclass(frozen=True)
class TopicInput:
    bootstrap_servers: str
    topic: str
    # Client properties (security.protocol, sasl.*, ssl.*), as a Kafka client's properties
    # file names them; given to Spark's source as kafka.<name>.
    client: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.bootstrap_servers}/{self.topic}"


def is_topic(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_topic(text: str, client: dict[str, str] | None = None) -> TopicInput:
    """``kafka://host:port[,host:port...]/topic``, or BadTopic saying what is expected."""
    match = _URL.fullmatch(text)
    if match is None:
        raise BadTopic(
            f"not a topic: {text!r} (kafka://HOST:PORT[,HOST:PORT...]/TOPIC; a topic name of letters, digits, '.', '_' and '-')"
        )
    return TopicInput(match["servers"], match["topic"], dict(client or {}))


# The source's own options, and those that would change what it reads: not a client property.
_PAIR = re.compile(r"([^=:\s]+)\s*[=:]\s*(.*)")
_NOT_CLIENT = (
    "bootstrap.servers",
    "group.id",
    "key.deserializer",
    "value.deserializer",
    "auto.offset.reset",
    "enable.auto.commit",
    "interceptor.classes",
)


def read_client_config(path: Path) -> dict[str, str]:
    """A Kafka client's properties file (``key=value`` lines, ``#`` or ``!`` comments), as the
    Kafka tools' ``--command-config`` takes it; BadTopic naming the line that is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadTopic(f"--kafka-config {path}: not a readable file ({exc})") from None
    config: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        pair = _PAIR.fullmatch(stripped)
        if pair is None:
            raise BadTopic(f"--kafka-config {path} line {number}: not a key=value line")
        key, value = pair.groups()
        if key in _NOT_CLIENT:
            raise BadTopic(
                f"--kafka-config {path} line {number}: {key} is set by the report (allowed: the client's security and connection properties)"
            )
        config[key] = value
    return config


def _millis(moment: datetime) -> str:
    return str(int(moment.timestamp() * 1000))


def source_options(
    source: TopicInput, since: datetime | None, until: datetime | None
) -> dict[str, str]:
    """The options of Spark's Kafka source for the records of [since - SLACK, until + SLACK)."""
    options = {f"kafka.{key}": value for key, value in source.client.items()}
    options.update({"kafka.bootstrap.servers": source.bootstrap_servers, "subscribe": source.topic})
    # Retention may delete the oldest records while they are read: the report covers what the
    # topic still holds, as it covers the files retention left.
    options["failOnDataLoss"] = "false"
    if since is not None:
        options["startingTimestamp"] = _millis(since - SLACK)
        # A partition with no record that late starts at its end (Spark's default stops the job).
        options["startingOffsetsByTimestampStrategy"] = "latest"
    if until is not None:
        options["endingTimestamp"] = _millis(
            until + SLACK
        )  # a partition with none that late: read to its end
    return options


def copy_topic(
    spark: SparkSession,
    source: TopicInput,
    folder: str,
    since: datetime | None,
    until: datetime | None,
) -> None:
    """Write the record values of ``source`` within the range into ``folder`` as history lines
    (text files, one per Spark task, each in its partition's order; records without a value are
    left out)."""
    spark.sparkContext.setJobDescription(f"copy the history of {source.url}")
    try:
        records = spark.read.format("kafka").options(**source_options(source, since, until)).load()
        lines = records.filter(F.col("value").isNotNull()).select(
            F.col("value").cast("string").alias("value")
        )
        lines.write.mode("overwrite").text(folder)
    except (PySparkException, Py4JJavaError) as exc:
        raise UnreadableTopic(
            f"the topic {source.url} cannot be read: {_first_line(exc)}"
        ) from None


def _first_line(exc: Exception) -> str:
    """What went wrong, in one line: a missing Kafka source (spark-submit without --packages) by
    name, else the deepest cause Spark gives."""
    text = str(exc)
    if "Failed to find data source: kafka" in text or "DATA_SOURCE_NOT_FOUND" in text:
        return "Spark has no Kafka source (under spark-submit, add --packages org.apache.spark:spark-sql-kafka-0-10_<scala>:<spark version>)"
    causes = [
        line.strip()
        for line in text.splitlines()
        if "Exception:" in line and not line.strip().startswith("at ")
    ]
    return (
        causes[-1]
        if causes
        else text.strip().splitlines()[0]
        if text.strip()
        else type(exc).__name__
    )[:500]
