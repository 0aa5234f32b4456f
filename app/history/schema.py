"""The history row: one place that names every field, for the writer and the Spark reader.

One JSON object per line. A round writes one row per volume its decision rested on: every
observation in the view after the round, the round's own and those kept from earlier rounds
(a fenced broker's, a broker's that did not answer); ``kept`` says which and why, and
``observed_at`` when a kept one was made. A round with nothing in the view (cluster
unreachable and everything expired) writes one row without a volume (``broker_id`` and
``log_dir`` null), so time on the last-valid factor or the fallback is still on record. Every
row of a round carries the same ``time``.

A service with metadata limits also writes one row per metadata log volume the nodes report
(``holds`` says which rows those are; their limit fields are the metadata limits').

A data volume's observation is the newer of its DescribeLogDirs answer and its node's own report
(``observed_by`` says which; docs/architecture.md, "Two sources").

Fields are only ever added, nullable: a reader gets null for a field an older file lacks
(rows written before ``observed_at`` and ``kept`` existed read as fresh observations of their
round).

**Format 2 (compact).** The service now writes a round's lines as a *round row* first (the
round's own fields, ``row`` "round", ``volumes`` the number of data volumes in its view), then
a *volume row* (``row`` "volume": the volume's own fields only, absent meaning null) for each
volume whose row is due, and a *gone row* (``row`` "gone") for each volume that left the view.
A volume row stands for every following round of the same hour until that volume's next row,
its gone row, or the next round row marked ``keyframe`` (a round that writes every volume in
its view: the first of each hour and of each run of the writer). The values every volume row
of a round would repeat (the limits, enforcement and canary brokers) are on the round row,
marked ``shared``, when they change and on every keyframe; a round without them keeps the
last given in its hour. ``app.history.compact.expand`` is the reference reader of the format;
rows without ``row`` are format 1 (one full row per volume per round) and read as before.

Deliberately free of imports from the rest of the service: the report job (``spark/``)
imports this module on the Spark driver, where the service's dependencies need not be.
"""

from __future__ import annotations

import enum
from typing import NamedTuple


class HistoryField(NamedTuple):
    name: str
    kind: str  # "timestamp", "int", "long", "double", "string", "boolean"
    description: str


HISTORY_FIELDS: tuple[HistoryField, ...] = (
    HistoryField(
        "time",
        "timestamp",
        "When the round finished (ISO-8601 UTC, milliseconds); the same for every row of a round",
    ),
    HistoryField(
        "broker_id", "int", "Broker of the volume; null on a row of a round that observed no volume"
    ),
    HistoryField("log_dir", "string", "Log dir of the volume; null like broker_id"),
    HistoryField(
        "total_bytes", "long", "Volume capacity (KIP-827 TotalBytes); -1 when not reported"
    ),
    HistoryField(
        "usable_bytes", "long", "Usable bytes (KIP-827 UsableBytes); -1 when not reported"
    ),
    HistoryField(
        "available_ratio",
        "double",
        "usable / total (0 for a volume of capacity 0); null when not reported",
    ),
    HistoryField(
        "log_dir_error",
        "string",
        "Kafka error of an offline log dir (counts as a hard breach), else null",
    ),
    HistoryField(
        "observed_at",
        "timestamp",
        "When the volume was observed (ISO-8601 UTC, milliseconds); before time on a kept observation",
    ),
    HistoryField(
        "observation_age_seconds",
        "double",
        "time - observed_at: how old the observation was when the round decided on it",
    ),
    HistoryField(
        "kept",
        "string",
        "Null on the round's own observation; on one kept from an earlier round, why: fenced (the broker is registered but "
        "fenced), missing (active but did not answer), unregistered (no longer listed), last-valid (the round reached no one)",
    ),
    HistoryField("limit_kind", "string", "min-available-bytes or min-available-ratio"),
    HistoryField("hard_limit", "double", "Hard limit level, in the unit of limit_kind"),
    HistoryField("soft_limit", "double", "Soft limit level; null when none is configured"),
    HistoryField(
        "volume_status",
        "string",
        "The policy's verdict: ok, ramping (soft limit), breaching (hard limit), unjudged",
    ),
    HistoryField("volume_factor", "double", "The factor this volume asks for"),
    HistoryField(
        "cluster_factor",
        "double",
        "The factor in force after the round (minimum over volumes, or last-valid / fallback)",
    ),
    HistoryField("state", "string", "OPEN, THROTTLE or PAUSE: the state of cluster_factor"),
    HistoryField(
        "source",
        "string",
        "Where cluster_factor comes from: observed, last-valid, fallback, initial",
    ),
    HistoryField("round_complete", "boolean", "Every active broker answered the round"),
    HistoryField(
        "check_interval_seconds",
        "double",
        "The configured check interval; the report's gap rule is a multiple of it",
    ),
    HistoryField(
        "enforced",
        "boolean",
        "Whether enforcement was on (false: shadow mode, the shims applied quotas unscaled); null before it was recorded",
    ),
    HistoryField(
        "canary_brokers",
        "string",
        "With enforced, the only brokers that enforced (comma-separated ids); null: every broker",
    ),
    HistoryField(
        "fill_rate_bytes_per_second",
        "double",
        "With a horizon (throttle.service.ramp.horizon): the volume's net fill rate as the service estimated it (positive while "
        "filling); null without a horizon, while the trend is too short, or on a row without a volume",
    ),
    HistoryField(
        "seconds_to_hard_limit",
        "double",
        "With a horizon: seconds until the volume reaches its hard limit at that rate, 0 at or below it; null while not filling",
    ),
    HistoryField(
        "volume_rule",
        "string",
        "The rule that set this volume's factor: hard limit, soft limit, time to full, log dir error; null when none slows it",
    ),
    HistoryField(
        "rule",
        "string",
        "The rule that set cluster_factor (that of the volume asking for the least); null when none did (OPEN)",
    ),
    HistoryField(
        "holds",
        "string",
        "What the volume holds: data (a log dir DescribeLogDirs reports, judged by the storage limits), metadata (a node's "
        "KRaft metadata log volume as its shim reports it, judged by the metadata limits, broker_id being the node.id), or "
        "data,metadata (a metadata log dir on a data dir's volume); null on a row without a volume, and on rows written "
        "before it existed (data)",
    ),
    HistoryField(
        "mutation_factor",
        "double",
        "The factor of CONTROLLER_MUTATION quotas in force after the round (1 without metadata limits); null before it was recorded",
    ),
    HistoryField(
        "observed_by",
        "string",
        "Where the volume's observation came from: admin-api (DescribeLogDirs in a round) or node-report (the node's own "
        "shim, PUT /nodes/{node_id}/volumes: a metadata volume, or a data volume whose report was newer than its "
        "DescribeLogDirs answer, or the more conservative while they disagreed); null on a row without a volume; absent "
        "before it existed (read as admin-api, node-report on a metadata row)",
    ),
)

FIELD_NAMES: tuple[str, ...] = tuple(field.name for field in HISTORY_FIELDS)

# Format 2: the fields only its lines have (``COMPACT_FIELDS``) and what ``row`` holds.
ROW_KIND = "row"
ROUND, VOLUME, GONE = "round", "volume", "gone"
COMPACT_FIELDS: tuple[HistoryField, ...] = (
    HistoryField(
        ROW_KIND, "string", "Format 2 only: round, volume or gone (absent: a format 1 row)"
    ),
    HistoryField(
        "volumes",
        "int",
        "On a round row: how many data volumes were in the round's view (0: a round that observed none)",
    ),
    HistoryField(
        "shared",
        "boolean",
        "On a round row: true when it gives the shared values (limits, enforced, canary_brokers)",
    ),
    HistoryField(
        "keyframe", "boolean", "On a round row: true when the round writes every volume in its view"
    ),
)
# The fields a round row gives for every volume row of the round (with ``time``).
ROUND_FIELDS = (
    "cluster_factor",
    "state",
    "source",
    "round_complete",
    "check_interval_seconds",
    "rule",
    "mutation_factor",
)
# ... and those it gives when ``shared`` is true, kept until given again.
SHARED_FIELDS = ("limit_kind", "hard_limit", "soft_limit", "enforced", "canary_brokers")
# The fields of a volume row (a metadata volume's also carries its own limit fields).
VOLUME_ROW_FIELDS = tuple(name for name in FIELD_NAMES if name not in ROUND_FIELDS + SHARED_FIELDS)

# Partition folders and file names: <dir>/date=YYYY-MM-DD/history-HH.jsonl (UTC hour of the rows).
PARTITION_PREFIX = "date="
FILE_PREFIX = "history-"
FILE_SUFFIX = ".jsonl"


class Codec(str, enum.Enum):
    """How a closed hour's file is compressed whole: codecs Spark reads as they are (Hadoop's
    own, no native library) and Python's standard library writes. bzip2 keeps about a third
    less than gzip; gzip reads about ten times faster (BENCHMARKS.md, history)."""

    BZIP2 = "bzip2"
    GZIP = "gzip"

    @property
    def suffix(self) -> str:
        """The compressed file's name: the plain name and this."""
        return FILE_SUFFIX + (".bz2" if self is Codec.BZIP2 else ".gz")


GZIP_SUFFIX = Codec.GZIP.suffix
# Every closed hour's name, whichever codec wrote it (a history may hold both, after the
# setting changed).
COMPRESSED_SUFFIXES = tuple(codec.suffix for codec in Codec)
