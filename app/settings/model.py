"""The configuration model: the one place that defines every setting.

Each field carries the Kafka-style property name it is read under (the names of Strimzi
proposal 047 where the proposal has one), what values are allowed, and a description. The
environment variable for a property is its name upper-cased with dots turned into
underscores, as the Apache Kafka container image does (``client.quota.callback.static.
throttle.factor.fallback`` -> ``CLIENT_QUOTA_CALLBACK_STATIC_THROTTLE_FACTOR_FALLBACK``).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic.json_schema import JsonDict
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from app.decision.enforcement import Enforcement, parse_broker_ids
from app.decision.horizon import HORIZON_CHECK_INTERVALS, MIN_HORIZON_SECONDS
from app.redaction import HIDDEN, is_secret_key, quoted, secret_values_of
from app.settings.durations import DURATION_HINT, format_duration, parse_duration

STATIC_PREFIX = "client.quota.callback.static."
# $XDG_STATE_HOME/kafka-throttle-service, as a user service would; containers set /var/lib/...
DEFAULT_DATA_DIR = str(
    Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    / "kafka-throttle-service"
)
SERVICE_PREFIX = "throttle.service."
ADMIN_PREFIX = STATIC_PREFIX + "kafka.admin."
HISTORY_PRODUCER_PREFIX = SERVICE_PREFIX + "history.kafka.producer."
HISTORY_DIR_NAME = "history"


def setting(
    default: Any, prop: str, allowed: str, description: str, shown_default: str | None = None
) -> Any:
    """A settings field that knows its property name and what values it allows."""
    extra: JsonDict = {"property": prop, "allowed": allowed}
    if shown_default is not None:
        extra["shown_default"] = shown_default  # for defaults that depend on the machine
    return Field(default, description=description, json_schema_extra=extra)


QUOTA_TYPE_NAMES = ("produce", "fetch", "request", "controller_mutation")


def _split_principals(value: str) -> list[str]:
    # ';' separates entries because principal names (certificate DNs) contain commas.
    return [entry.strip() for entry in value.split(";") if entry.strip()]


def _split_types(value: str) -> list[str]:
    return [t.strip().lower() for t in value.split(",") if t.strip()]


# The largest quota of any type: Kafka's quota values are doubles, and every integer up to 2^53 - 1
# (JavaScript's Number.MAX_SAFE_INTEGER) is one exactly, so a client in any language reads it
# back unchanged; as bytes/s it is 8 PiB/s, far beyond any broker.
QUOTA_MAX = 2**53 - 1
_QUOTA_NUMBER = f"a number > 0 and at most {QUOTA_MAX}"

MAX_BODY_BYTES_DEFAULT = 1024 * 1024
# A quota change is a few hundred bytes; a group of many thousand members fits in 1 MiB. The
# limit is also what a write may hold in memory, so it stays far below a process's size.
MAX_BODY_BYTES_RANGE = (1024, 100 * 1024 * 1024)
# What one quota group and the whole table of overrides and groups may hold: the table goes to
# every broker's shim on each change, 10,000 entries in about 1.6 MB (BENCHMARKS.md).
GROUP_MAX_MEMBERS_DEFAULT = 10_000
GROUP_MAX_MEMBERS_RANGE = (1, 1_000_000)
TABLE_MAX_ENTRIES_DEFAULT = 100_000
TABLE_MAX_ENTRIES_RANGE = (1, 10_000_000)
# The integer settings checked against a range ("out of range" outside it).
# Connections served at once: a shim's long-poll holds one, so a thousand brokers hold a
# thousand; the descriptor limit may lower it further (it is logged at start-up).
MAX_CONNECTIONS_DEFAULT = 4096
MAX_CONNECTIONS_RANGE = (16, 1_000_000)
_INT_RANGES = {
    "http_port": (1, 65535),
    "http_max_body_bytes": MAX_BODY_BYTES_RANGE,
    "http_max_connections": MAX_CONNECTIONS_RANGE,
    "quota_group_max_members": GROUP_MAX_MEMBERS_RANGE,
    "quota_table_max_entries": TABLE_MAX_ENTRIES_RANGE,
}
# The edge's deadlines: long enough for a client on a slow link, short enough that idle
# connections cannot hold the descriptors of the clients that come next.
HTTP_TIMEOUT_RANGE = (timedelta(milliseconds=100), timedelta(minutes=5))

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def env_name(prop: str) -> str:
    return prop.upper().replace(".", "_").replace("-", "_")


class Settings(BaseSettings):
    """Every setting of the service. Values come from (highest first): keyword arguments,
    environment variables, the properties file, the defaults below."""

    model_config = SettingsConfigDict(extra="forbid", validate_default=True, frozen=True)

    storage_check_interval: timedelta = setting(
        timedelta(minutes=1),
        STATIC_PREFIX + "storage.check.interval",
        DURATION_HINT + "; PT0S disables observation",
        "Interval between observation rounds (DescribeCluster + DescribeLogDirs).",
    )
    kafka_admin_bootstrap_servers: str | None = setting(
        None,
        ADMIN_PREFIX + "bootstrap.servers",
        "a comma-separated list of host:port (required unless the check interval is PT0S)",
        "Bootstrap servers of the Kafka cluster to observe.",
    )
    kafka_admin: dict[str, str] = setting(
        {},
        ADMIN_PREFIX + "*",
        "Kafka admin client properties: security.protocol, ssl.* (PEM or PKCS12 stores), sasl.*, client.id (see 'Security')",
        "Further admin client properties (TLS, SASL) for the admin client; TLS files are re-read when they change.",
    )
    kafka_request_timeout: timedelta | None = setting(
        None,
        SERVICE_PREFIX + "kafka.request.timeout",
        DURATION_HINT + ", shorter than the check interval",
        "Timeout of each admin request; default: 80% of the check interval, at most PT30S.",
    )
    throttle_factor_fallback: float = setting(
        1.0,
        STATIC_PREFIX + "throttle.factor.fallback",
        "a number in [0.0, 1.0]",
        "Factor applied once the last valid factor has expired (0.0 is the fail-safe choice).",
    )
    throttle_factor_validity_duration: timedelta = setting(
        timedelta(minutes=5),
        STATIC_PREFIX + "throttle.factor.validity.duration",
        DURATION_HINT + ", greater than zero",
        "How long a computed factor, and each volume observation, stays valid.",
    )
    fenced_broker_observations: Literal["keep", "expire"] = setting(
        "keep",
        SERVICE_PREFIX + "fenced.broker.observations",
        "keep or expire",
        "A broker that DescribeCluster lists as fenced (stopped, or halted by a failed disk): keep its last "
        "observation for as long as it stays registered, or let it expire after the validity duration like "
        "an unregistered broker's.",
    )
    storage_per_volume_limit_min_available_bytes: int | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.limit.min.available.bytes",
        "an integer >= 0",
        "Hard limit: pause producers when any volume has this many usable bytes or fewer.",
    )
    storage_per_volume_limit_min_available_ratio: float | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.limit.min.available.ratio",
        "a number in [0.0, 1.0]",
        "Hard limit: pause producers when any volume's usable/total ratio is at or below this.",
    )
    storage_per_volume_soft_limit_min_available_bytes: int | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.soft.limit.min.available.bytes",
        "an integer >= 0, greater than the hard bytes limit",
        "Soft limit: below this many usable bytes the factor ramps linearly from 1 to 0 at the hard limit.",
    )
    storage_per_volume_soft_limit_min_available_ratio: float | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.soft.limit.min.available.ratio",
        "a number in [0.0, 1.0], greater than the hard ratio limit",
        "Soft limit: below this usable ratio the factor ramps linearly from 1 to 0 at the hard limit.",
    )
    storage_per_volume_limit_hysteresis_bytes: int | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.limit.hysteresis.bytes",
        "an integer >= 0, only with a bytes hard limit",
        "A volume that breached the hard limit stays breaching until usable bytes exceed limit + this.",
    )
    storage_per_volume_limit_hysteresis_ratio: float | None = setting(
        None,
        STATIC_PREFIX + "storage.per.volume.limit.hysteresis.ratio",
        "a number in [0.0, 1.0], only with a ratio hard limit",
        "A volume that breached the hard limit stays breaching until its ratio exceeds limit + this.",
    )
    ramp_horizon: timedelta | None = setting(
        None,
        SERVICE_PREFIX + "ramp.horizon",
        DURATION_HINT
        + ", at least "
        + format_duration(timedelta(seconds=MIN_HORIZON_SECONDS))
        + " (Kafka enforces a factor over an 11 s quota window) "
        f"and {HORIZON_CHECK_INTERVALS} check intervals",
        "Time to full: keep every volume at least this long from its hard limit at its current fill rate "
        "(see docs/architecture.md); unset: only the limit levels throttle.",
    )
    metadata_limit_min_available_bytes: int | None = setting(
        None,
        SERVICE_PREFIX + "metadata.limit.min.available.bytes",
        "an integer >= 0; needs throttle.service.node.token",
        "Hard limit on metadata log volumes (as the nodes' shims report them): refuse partition mutations "
        "(mutation_factor 0) when any has this many usable bytes or fewer. Unset, with its ratio twin: "
        "metadata volumes are listed but change no factor.",
    )
    metadata_limit_min_available_ratio: float | None = setting(
        None,
        SERVICE_PREFIX + "metadata.limit.min.available.ratio",
        "a number in [0.0, 1.0]; needs throttle.service.node.token",
        "Hard limit on metadata log volumes: refuse partition mutations when any volume's usable/total ratio is at "
        "or below this.",
    )
    metadata_soft_limit_min_available_bytes: int | None = setting(
        None,
        SERVICE_PREFIX + "metadata.soft.limit.min.available.bytes",
        "an integer >= 0, greater than the metadata hard bytes limit",
        "Soft limit on metadata log volumes: below this many usable bytes the mutation factor ramps linearly from "
        "1 to 0 at the hard limit.",
    )
    metadata_soft_limit_min_available_ratio: float | None = setting(
        None,
        SERVICE_PREFIX + "metadata.soft.limit.min.available.ratio",
        "a number in [0.0, 1.0], greater than the metadata hard ratio limit",
        "Soft limit on metadata log volumes: below this usable ratio the mutation factor ramps linearly from 1 to 0 "
        "at the hard limit.",
    )
    metadata_limit_hysteresis_bytes: int | None = setting(
        None,
        SERVICE_PREFIX + "metadata.limit.hysteresis.bytes",
        "an integer >= 0, only with a metadata bytes hard limit",
        "A metadata volume that breached its hard limit stays breaching until usable bytes exceed limit + this.",
    )
    metadata_limit_hysteresis_ratio: float | None = setting(
        None,
        SERVICE_PREFIX + "metadata.limit.hysteresis.ratio",
        "a number in [0.0, 1.0], only with a metadata ratio hard limit",
        "A metadata volume that breached its hard limit stays breaching until its ratio exceeds limit + this.",
    )
    storage_node_report_tolerance_ratio: float = setting(
        0.01,
        SERVICE_PREFIX + "storage.node.report.tolerance.ratio",
        "a number in [0.0, 1.0]; needs throttle.service.node.token",
        "How far a node's own report of a data volume and DescribeLogDirs may differ, as a share of the volume's "
        "total bytes, before a round counts them as disagreeing: the discrepancy is logged and counted "
        "(kafka_throttle_node_report_discrepancies_total) and the more conservative of the two is used until they "
        "agree (see docs/architecture.md, 'Two sources: admin rounds and node reports').",
    )
    produce: float | None = setting(
        None,
        STATIC_PREFIX + "produce",
        f"{_QUOTA_NUMBER} (bytes/s); unset: unlimited",
        "Default produce quota per broker in bytes/s, shared by clients without a more specific quota.",
    )
    fetch: float | None = setting(
        None,
        STATIC_PREFIX + "fetch",
        f"{_QUOTA_NUMBER} (bytes/s); unset: unlimited",
        "Default fetch quota per broker in bytes/s, shared by clients without a more specific quota.",
    )
    request: float | None = setting(
        None,
        STATIC_PREFIX + "request",
        f"{_QUOTA_NUMBER} (percent of one thread); unset: unlimited",
        "Default request quota per broker in percent of one request handler / network thread.",
    )
    controller_mutation: float | None = setting(
        None,
        STATIC_PREFIX + "controller.mutation",
        f"{_QUOTA_NUMBER} (partition mutations/s); unset: unlimited",
        "Default controller mutation quota (KIP-599) in partition mutations/s.",
    )
    excluded_principal_name_list: str = setting(
        "",
        STATIC_PREFIX + "excluded.principal.name.list",
        "entries User:<name> separated by ';' (names may contain commas)",
        "Principals never throttled, e.g. the operator's own users.",
    )
    quota_factor_types: str = setting(
        "produce",
        SERVICE_PREFIX + "quota.factor.types",
        "a comma-separated subset of produce, fetch, request, controller_mutation (may be empty)",
        "Quota types the throttle factor multiplies.",
    )
    quota_floor_bytes: float = setting(
        65536.0,
        SERVICE_PREFIX + "quota.floor.bytes",
        f"{_QUOTA_NUMBER} (bytes/s)",
        "Lowest produce/fetch quota the factor can bring a client to (see 'The quota floor' in docs/quotas.md).",
    )
    quota_floor_request: float = setting(
        1.0,
        SERVICE_PREFIX + "quota.floor.request",
        f"{_QUOTA_NUMBER} (percent of one thread)",
        "Lowest request quota the factor can bring a client to.",
    )
    quota_floor_controller_mutation: float = setting(
        1.0,
        SERVICE_PREFIX + "quota.floor.controller.mutation",
        f"{_QUOTA_NUMBER} (partition mutations/s)",
        "Lowest controller mutation quota the factor can bring a client to.",
    )
    quota_group_max_members: int = setting(
        GROUP_MAX_MEMBERS_DEFAULT,
        SERVICE_PREFIX + "quota.group.max.members",
        f"an integer from {GROUP_MAX_MEMBERS_RANGE[0]} to {GROUP_MAX_MEMBERS_RANGE[1]}",
        "Most users, and most client ids, one quota group may list; a PUT of a larger group is answered 422.",
    )
    quota_table_max_entries: int = setting(
        TABLE_MAX_ENTRIES_DEFAULT,
        SERVICE_PREFIX + "quota.table.max.entries",
        f"an integer from {TABLE_MAX_ENTRIES_RANGE[0]} to {TABLE_MAX_ENTRIES_RANGE[1]}",
        "Most entries the quota table may hold (each override and each group member is one); a PUT that would "
        "make it larger is answered 413.",
    )
    admin_token: SecretStr | None = setting(
        None,
        SERVICE_PREFIX + "admin.token",
        "a secret of at least 16 characters; unset: changes to quotas are refused",
        "Bearer token required by PUT and DELETE of quota overrides and groups.",
    )
    node_token: SecretStr | None = setting(
        None,
        SERVICE_PREFIX + "node.token",
        "a secret of at least 16 characters, not the admin token; unset: node reports are refused (404)",
        "Bearer token the nodes' shims send with PUT /nodes/{node_id}/volumes and their polls (their "
        "client.quota.callback.service.token); separate from the admin token.",
    )
    enforcement: Literal["enforce", "shadow"] = setting(
        "enforce",
        SERVICE_PREFIX + "enforcement",
        "enforce or shadow",
        "Whether the brokers' shims apply the factor (enforce) or only report what they would apply (shadow: "
        "quotas unscaled). Changed at run time with PUT /enforcement, which the quota store keeps and which "
        "wins over this setting until DELETE /enforcement (see docs/quotas.md).",
    )
    enforcement_canary_brokers: str = setting(
        "",
        SERVICE_PREFIX + "enforcement.canary.brokers",
        "comma-separated broker ids (non-negative integers); empty: every broker",
        "With enforcement=enforce, only these brokers' shims apply the factor and the others stay in shadow; "
        "empty: every broker enforces.",
    )
    quota_store: Literal["sqlite", "kafka"] = setting(
        "sqlite",
        SERVICE_PREFIX + "quota.store",
        "sqlite or kafka",
        "Where quota overrides and groups set through the API live: sqlite (a file in the data dir, one "
        "replica's own) or kafka (a compacted topic every replica reads and follows; see docs/quotas.md).",
    )
    quota_store_topic: str = setting(
        "kafka-throttle-quotas",
        SERVICE_PREFIX + "quota.store.topic",
        "a Kafka topic name (letters, digits, '.', '_', '-'; at most 249 characters)",
        "Topic of the kafka quota store (created if missing: compacted, one partition, replication factor 3 "
        "where the cluster allows).",
    )
    data_dir: str = setting(
        DEFAULT_DATA_DIR,
        SERVICE_PREFIX + "data.dir",
        "a writable directory (created if missing)",
        "Where the service keeps its state (the quota store quotas.sqlite3).",
        shown_default="$XDG_STATE_HOME/kafka-throttle-service, else ~/.local/state/kafka-throttle-service",
    )
    history_enabled: bool = setting(
        True,
        SERVICE_PREFIX + "history.enabled",
        "true or false",
        "Append one row per volume per round to the history files (JSON lines by date).",
    )
    history_dir: str | None = setting(
        None,
        SERVICE_PREFIX + "history.dir",
        "a writable directory (created if missing)",
        "Where the history files go.",
        shown_default="<data dir>/history",
    )
    history_retention_days: int = setting(
        30,
        SERVICE_PREFIX + "history.retention.days",
        "an integer >= 1",
        "History files older than this many days are deleted.",
    )
    history_retention_bytes: int = setting(
        1024**3,
        SERVICE_PREFIX + "history.retention.bytes",
        "an integer >= 1048576",
        "The oldest history files are deleted while all of them together are larger than this.",
    )
    history_keyframe_interval: timedelta = setting(
        timedelta(minutes=5),
        SERVICE_PREFIX + "history.keyframe.interval",
        DURATION_HINT + "; PT0S writes every volume every round",
        "A volume whose decision did not change gets a history row once its last row is this old (a row is also "
        "written whenever its status, factor, limits, kept reason, log dir error or rule change, every round while "
        "it is not ok, and when its usable bytes moved by more than history.keyframe.usable.share of its total).",
    )
    history_keyframe_usable_share: float = setting(
        0.01,
        SERVICE_PREFIX + "history.keyframe.usable.share",
        "a number in [0.0, 1.0]",
        "A volume gets a history row when its usable bytes moved by more than this share of its total since its "
        "last row (0: whenever they moved); between its rows the report reads the last row's bytes.",
    )
    history_compression: Literal["bzip2", "gzip"] = setting(
        "bzip2",
        SERVICE_PREFIX + "history.compression",
        "bzip2 or gzip",
        "How each closed hour's history file is compressed (the hour being written stays plain). bzip2 keeps about "
        "a third less than gzip (30 days of 1,000 brokers x 12 log dirs in 0.8 GiB, not 1.1); Spark decompresses gzip "
        "about three times faster (a cold report's first read). Spark reads both as they are; a history may hold both.",
    )
    history_kafka_enabled: bool = setting(
        False,
        SERVICE_PREFIX + "history.kafka.enabled",
        "true or false",
        "Also publish every volume's history row to a Kafka topic, keyed <broker id>:<log dir>.",
    )
    history_kafka_topic: str = setting(
        "kafka-throttle-history",
        SERVICE_PREFIX + "history.kafka.topic",
        "a Kafka topic name (letters, digits, '.', '_', '-'; at most 249 characters)",
        "Topic of the history rows, the same JSON lines as the files (created time-retained: cleanup.policy=delete, "
        "retention.ms from history.retention.days).",
    )
    history_kafka_producer: dict[str, str] = setting(
        {},
        HISTORY_PRODUCER_PREFIX + "*",
        "confluent-kafka (librdkafka) producer properties: bootstrap.servers, security.protocol, sasl.*, ssl.*, ...",
        "Producer properties of the history topic; bootstrap.servers defaults to the admin bootstrap servers.",
    )
    http_host: str = setting(
        "0.0.0.0",
        SERVICE_PREFIX + "http.host",
        "an interface address or host name",
        "Address the HTTP server listens on.",
    )
    http_port: int = setting(
        8080,
        SERVICE_PREFIX + "http.port",
        "an integer in [1, 65535]",
        "Port the HTTP server listens on.",
    )
    http_ssl_certfile: str | None = setting(
        None,
        SERVICE_PREFIX + "http.ssl.certfile",
        "a path to a PEM certificate chain",
        "Serve HTTPS with this certificate (needs the key file too).",
    )
    http_ssl_keyfile: str | None = setting(
        None,
        SERVICE_PREFIX + "http.ssl.keyfile",
        "a path to a PEM private key",
        "Private key for HTTPS.",
    )
    http_max_body_bytes: int = setting(
        MAX_BODY_BYTES_DEFAULT,
        SERVICE_PREFIX + "http.max.body.bytes",
        f"an integer from {MAX_BODY_BYTES_RANGE[0]} to {MAX_BODY_BYTES_RANGE[1]}",
        "Largest request body accepted; a larger one is answered 413 as soon as its size is known, before it is read.",
    )
    http_head_timeout: timedelta = setting(
        timedelta(seconds=5),
        SERVICE_PREFIX + "http.head.timeout",
        DURATION_HINT + ", from PT0.1S to PT5M",
        "Time a client has to send a whole request head, from its connection (or the first byte of its next request); "
        "past it the connection is closed (408 if part of a head arrived).",
    )
    http_idle_timeout: timedelta = setting(
        timedelta(seconds=5),
        SERVICE_PREFIX + "http.idle.timeout",
        DURATION_HINT + ", from PT0.1S to PT5M",
        "An idle kept-alive connection is closed after this long (a long-poll in progress is not idle).",
    )
    http_body_timeout: timedelta = setting(
        timedelta(seconds=10),
        SERVICE_PREFIX + "http.body.timeout",
        DURATION_HINT + ", from PT0.1S to PT5M",
        "Time a client has to send a whole request body, from the end of its head; past it the connection is closed "
        "(408 if nothing was answered yet). A request without a body (a long-poll) has none to send.",
    )
    http_max_connections: int = setting(
        MAX_CONNECTIONS_DEFAULT,
        SERVICE_PREFIX + "http.max.connections",
        f"an integer from {MAX_CONNECTIONS_RANGE[0]} to {MAX_CONNECTIONS_RANGE[1]}",
        "Connections served at once (kept 256 below the process's file limit); a connection past it closes the oldest "
        "one not serving a node or admin token holder or a probe, or is answered 503 and closed at once when there is none.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = setting(
        "INFO",
        SERVICE_PREFIX + "log.level",
        "one of DEBUG, INFO, WARNING, ERROR",
        "Log level of the service.",
    )
    log_format: Literal["text", "json"] = setting(
        "text",
        SERVICE_PREFIX + "log.format",
        "text or json",
        "Log lines as text, or as one JSON object per line (time, level, logger, message, and the fields of "
        "audit and state-change lines) for a log aggregator.",
    )

    @field_validator(
        "storage_check_interval",
        "throttle_factor_validity_duration",
        "kafka_request_timeout",
        "ramp_horizon",
        "http_head_timeout",
        "http_idle_timeout",
        "http_body_timeout",
        mode="before",
    )
    @classmethod
    def _iso_duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            return parse_duration(value)
        return value

    @field_validator("ramp_horizon")
    @classmethod
    def _horizon_long_enough(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value.total_seconds() < MIN_HORIZON_SECONDS:
            raise ValueError("shorter than the minimum")
        return value

    @field_validator(
        "throttle_factor_fallback",
        "storage_per_volume_limit_min_available_ratio",
        "storage_per_volume_soft_limit_min_available_ratio",
        "storage_per_volume_limit_hysteresis_ratio",
        "metadata_limit_min_available_ratio",
        "metadata_soft_limit_min_available_ratio",
        "metadata_limit_hysteresis_ratio",
        "storage_node_report_tolerance_ratio",
    )
    @classmethod
    def _unit_interval(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:  # also rejects NaN
            raise ValueError("out of range")
        return value

    @field_validator("http_head_timeout", "http_idle_timeout", "http_body_timeout")
    @classmethod
    def _http_timeout(cls, value: timedelta) -> timedelta:
        if not HTTP_TIMEOUT_RANGE[0] <= value <= HTTP_TIMEOUT_RANGE[1]:
            raise ValueError("out of range")
        return value

    @field_validator(
        "storage_per_volume_limit_min_available_bytes",
        "storage_per_volume_soft_limit_min_available_bytes",
        "storage_per_volume_limit_hysteresis_bytes",
        "metadata_limit_min_available_bytes",
        "metadata_soft_limit_min_available_bytes",
        "metadata_limit_hysteresis_bytes",
    )
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError("negative")
        return value

    @field_validator(
        "produce",
        "fetch",
        "request",
        "controller_mutation",
        "quota_floor_bytes",
        "quota_floor_request",
        "quota_floor_controller_mutation",
    )
    @classmethod
    def _positive_finite(cls, value: float | None) -> float | None:
        if value is not None and not (0.0 < value < math.inf):  # also rejects NaN
            raise ValueError("not a positive finite number")
        if value is not None and value > QUOTA_MAX:
            raise ValueError(f"above {QUOTA_MAX}")
        return value

    @field_validator("excluded_principal_name_list")
    @classmethod
    def _principals(cls, value: str) -> str:
        for entry in _split_principals(value):
            if not entry.startswith("User:") or entry == "User:":
                raise ValueError(f"entry {quoted(entry)} is not User:<name>")
        return value

    @field_validator("enforcement_canary_brokers")
    @classmethod
    def _broker_ids(cls, value: str) -> str:
        parse_broker_ids(value)  # raises ValueError naming the bad entry
        return value

    @property
    def initial_enforcement(self) -> Enforcement:
        """The enforcement these settings give (the quota store's, once set, wins over it)."""
        return Enforcement.of(self.enforcement, parse_broker_ids(self.enforcement_canary_brokers))

    @field_validator("quota_factor_types")
    @classmethod
    def _factor_types(cls, value: str) -> str:
        unknown = [t for t in _split_types(value) if t not in QUOTA_TYPE_NAMES]
        if unknown:
            raise ValueError(f"unknown quota type {quoted(unknown[0])}")
        return value

    @property
    def excluded_principals(self) -> frozenset[str]:
        """User names (without "User:") never throttled."""
        return frozenset(
            entry[len("User:") :] for entry in _split_principals(self.excluded_principal_name_list)
        )

    @property
    def factor_types(self) -> frozenset[str]:
        return frozenset(_split_types(self.quota_factor_types))

    @field_validator("admin_token", "node_token")
    @classmethod
    def _token_length(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("too short")
        return value

    @field_validator("history_retention_days")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError("less than 1")
        return value

    @field_validator("history_retention_bytes")
    @classmethod
    def _at_least_one_mib(cls, value: int) -> int:
        if value < 1024 * 1024:
            raise ValueError("less than 1048576")
        return value

    @field_validator("history_keyframe_interval", mode="before")
    @classmethod
    def _history_duration(cls, value: Any) -> Any:
        return parse_duration(value) if isinstance(value, str) else value

    @field_validator("history_keyframe_usable_share")
    @classmethod
    def _history_share(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:  # also rejects NaN
            raise ValueError("out of range")
        return value

    @field_validator("history_kafka_topic", "quota_store_topic")
    @classmethod
    def _topic_name(cls, value: str) -> str:
        if not _TOPIC_NAME.match(value) or value in (".", ".."):
            raise ValueError("not a valid topic name")
        return value

    @property
    def effective_history_dir(self) -> Path:
        return (
            Path(self.history_dir) if self.history_dir else Path(self.data_dir) / HISTORY_DIR_NAME
        )

    @property
    def history_producer_config(self) -> dict[str, str]:
        config = dict(self.history_kafka_producer)
        if "bootstrap.servers" not in config and self.kafka_admin_bootstrap_servers:
            config["bootstrap.servers"] = self.kafka_admin_bootstrap_servers
        return config

    @field_validator(*_INT_RANGES)
    @classmethod
    def _in_range(cls, value: int, info: ValidationInfo) -> int:
        assert info.field_name is not None  # a field validator is always given its field's name
        low, high = _INT_RANGES[info.field_name]
        if not low <= value <= high:
            raise ValueError("out of range")
        return value

    @field_validator(
        "log_level", "fenced_broker_observations", "quota_store", "enforcement", mode="before"
    )
    @classmethod
    def _case(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()

    @property
    def secret_values(self) -> frozenset[str]:
        """Every configured secret: the admin and node tokens and the secret client properties (SASL
        and key store passwords, JAAS lines), so that they can be kept out of the logs."""
        found: set[str] = set()
        for token in (self.admin_token, self.node_token):
            if token is not None:
                found.add(token.get_secret_value())
        for properties in (self.kafka_admin, self.history_kafka_producer):
            for key, value in properties.items():
                found |= secret_values_of(key, value)
        return frozenset(found)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Client properties are plain strings: hide the secret ones as SecretStr hides the token.
        for name, value in super().__repr_args__():
            if isinstance(value, dict):
                yield name, {k: HIDDEN if is_secret_key(k) else v for k, v in value.items()}
            else:
                yield name, value

    @property
    def observation_enabled(self) -> bool:
        return self.storage_check_interval > timedelta(0)

    @property
    def effective_kafka_request_timeout(self) -> timedelta:
        if self.kafka_request_timeout is not None:
            return self.kafka_request_timeout
        return min(timedelta(seconds=30), self.storage_check_interval * 0.8)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Only keyword arguments here; app.settings.loading adds the environment and the
        # properties file under their Kafka-style names.
        return (init_settings,)


def property_name(field: str) -> str:
    extra = Settings.model_fields[field].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["property"])


def allowed_values(field: str) -> str:
    extra = Settings.model_fields[field].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["allowed"])


# property prefix -> field name, for the settings that pass whole families of client properties on
WILDCARD_FIELDS: dict[str, str] = {
    ADMIN_PREFIX: "kafka_admin",
    HISTORY_PRODUCER_PREFIX: "history_kafka_producer",
}

# property name -> field name, for every plain (non-wildcard) setting
PROPERTY_FIELDS: dict[str, str] = {
    property_name(name): name
    for name in Settings.model_fields
    if name not in WILDCARD_FIELDS.values()
}
