"""The rules between settings: each a small function named for what it asks, taking the
settings as judged (``Judged``) and returning its problems. ``RULES`` only compare values;
``RULES_WITH_IO`` look at the machine too (files, directories, TLS stores, librdkafka), and
their names start with ``io_``. ``load_settings`` runs ``RULES`` then ``RULES_WITH_IO``, in
the order listed, which is the order their problems are reported in. The rules between the
limits are in app/settings/limits.py, beside the limits.

A value that was given but is invalid still counts as given (two hard limits conflict even
when one is out of range), and a rule that would compare an invalid value is left out rather
than judged against the default in its place.

To add a rule: a function next to the rules of the setting it checks, appended to the list of
its kind (``RULES`` or, when it touches anything outside the settings, ``RULES_WITH_IO``)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from app.decision.horizon import HORIZON_CHECK_INTERVALS
from app.kafka.admin_config import to_kafka_python
from app.redaction import HIDDEN, bounded, is_secret_key
from app.settings.durations import format_duration
from app.settings.limits import DATA_LIMITS, METADATA_LIMITS, LimitFields, limit_rules
from app.settings.model import (
    ADMIN_PREFIX,
    HISTORY_PRODUCER_PREFIX,
    Settings,
    allowed_values,
    property_name,
)
from app.settings.problems import Problem

_QUOTED = re.compile(r'"([^"]*)"')
_HOST_PORT = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[^\s:,\[\]]+):(\d{1,5})$")
_BOOTSTRAP = "kafka_admin_bootstrap_servers"
_BOOTSTRAP_FORM = "a comma-separated list of host:port, e.g. kafka-0:9092,kafka-1:9092"


@dataclass(frozen=True)
class Judged:
    """The settings as the rules judge them. ``settings`` holds the valid values (an invalid
    one is left at its default); ``invalid`` names the fields given a value already reported
    as invalid; ``given_raw`` what each field was given, as written, for the messages."""

    settings: Settings
    origin_of: Mapping[str, str]
    given_raw: Mapping[str, Any]
    invalid: AbstractSet[str]

    def given(self, field: str) -> bool:
        """The field was set (an invalid value counts)."""
        return field in self.invalid or getattr(self.settings, field) is not None

    def valid(self, *fields: str) -> bool:
        """None of ``fields`` holds an invalid value: how they compare is known."""
        return self.invalid.isdisjoint(fields)

    def problem(self, field: str, allowed: str) -> Problem:
        """A problem with ``field``, showing the value it was given (or its default)."""
        value = self.given_raw.get(field, getattr(self.settings, field))
        shown = (
            None
            if value is None
            else format_duration(value)
            if isinstance(value, timedelta)
            else str(value)
        )
        return Problem(property_name(field), shown, allowed, self.origin_of.get(field, ""))

    @property
    def interval_known(self) -> bool:
        return self.valid("storage_check_interval")

    @property
    def observing(self) -> bool:
        # Only PT0S turns observation off, so an invalid interval leaves it on.
        return self.settings.observation_enabled or not self.interval_known

    @property
    def observing_every_interval(self) -> bool:
        """Observation is on at a known interval (the rules against the interval apply)."""
        return self.interval_known and self.settings.observation_enabled


Rule = Callable[[Judged], list[Problem]]


# The check interval and what is measured against it


def validity_positive_and_longer_than_interval(j: Judged) -> list[Problem]:
    """throttle.factor.validity.duration: positive, and longer than the check interval."""
    s, field = j.settings, "throttle_factor_validity_duration"
    if not j.valid(field):
        return []
    if s.throttle_factor_validity_duration.total_seconds() <= 0:
        return [j.problem(field, allowed_values(field))]
    if (
        j.observing_every_interval
        and s.throttle_factor_validity_duration <= s.storage_check_interval
    ):
        return [
            j.problem(
                field,
                f"a duration longer than the check interval ({format_duration(s.storage_check_interval)}), "
                "or every factor expires before the next round",
            )
        ]
    return []


def horizon_holds_three_observations(j: Judged) -> list[Problem]:
    """ramp.horizon: at least HORIZON_CHECK_INTERVALS check intervals. The fill rate is fitted
    on the observations of the last quarter of the horizon: 3 at least."""
    s = j.settings
    horizon = s.ramp_horizon
    if (
        horizon is None
        or not j.observing_every_interval
        or horizon >= s.storage_check_interval * HORIZON_CHECK_INTERVALS
    ):
        return []
    least = format_duration(s.storage_check_interval * HORIZON_CHECK_INTERVALS)
    allowed = f"a duration of at least {HORIZON_CHECK_INTERVALS} check intervals ({least}), so that a quarter of it holds 3 observations"
    return [j.problem("ramp_horizon", allowed)]


def _bootstrap_well_formed(servers: str) -> bool:
    matches = [_HOST_PORT.match(entry.strip()) for entry in servers.split(",")]
    return all(match is not None and 0 < int(match.group(2)) < 65536 for match in matches)


def bootstrap_servers_when_observing(j: Judged) -> list[Problem]:
    """kafka.admin.bootstrap.servers: set and well formed while observation is on."""
    if not j.observing or not j.valid(_BOOTSTRAP):
        return []
    servers = j.settings.kafka_admin_bootstrap_servers
    if not servers:
        return [j.problem(_BOOTSTRAP, allowed_values(_BOOTSTRAP))]
    return [] if _bootstrap_well_formed(servers) else [j.problem(_BOOTSTRAP, _BOOTSTRAP_FORM)]


def request_timeout_within_interval(j: Judged) -> list[Problem]:
    """kafka.request.timeout: above zero and shorter than the check interval, while observing."""
    s = j.settings
    if not (j.observing and j.valid("kafka_request_timeout") and j.interval_known):
        return []
    timeout = s.effective_kafka_request_timeout
    if timeout.total_seconds() > 0 and timeout < s.storage_check_interval:
        return []
    return [
        j.problem(
            "kafka_request_timeout",
            f"a duration greater than zero and shorter than the check interval ({format_duration(s.storage_check_interval)})",
        )
    ]


# The limits (the rules of each set are in app/settings/limits.py)


def _limit_problems(j: Judged, limits: LimitFields) -> list[Problem]:
    return [
        j.problem(field, allowed)
        for field, allowed in limit_rules(j.settings, j.given, j.valid, limits)
    ]


def data_limit_rules(j: Judged) -> list[Problem]:
    """storage.per.volume.*: the rules of a set of limits (limits.LIMIT_RULES)."""
    return _limit_problems(j, DATA_LIMITS)


def metadata_limit_rules(j: Judged) -> list[Problem]:
    """throttle.service.metadata.*: the same rules, for an optional set."""
    return _limit_problems(j, METADATA_LIMITS)


def metadata_limits_need_node_reports(j: Judged) -> list[Problem]:
    """throttle.service.metadata.*: only with the node token set; without node reports the
    limits could never see a metadata volume."""
    metadata_limits = [field for field in METADATA_LIMITS.fields if j.given(field)]
    if not metadata_limits or j.given("node_token"):
        return []
    node_token = property_name("node_token")
    return [
        j.problem(
            metadata_limits[0],
            f"metadata limits only with {node_token} set (the nodes' shims report the metadata volumes)",
        )
    ]


def report_tolerance_needs_node_reports(j: Judged) -> list[Problem]:
    """throttle.service.storage.node.report.tolerance.ratio: only with the node token set;
    without node reports nothing is compared with DescribeLogDirs."""
    field = "storage_node_report_tolerance_ratio"
    if not (field in j.invalid or field in j.given_raw) or j.given("node_token"):
        return []
    node_token = property_name("node_token")
    return [
        j.problem(
            field,
            f"a tolerance only with {node_token} set (the nodes' reports are what DescribeLogDirs is compared with)",
        )
    ]


# The tokens


def node_token_not_admin_token(j: Judged) -> list[Problem]:
    """node.token: not the admin token (a node must not be able to change quotas)."""
    tokens = (j.settings.node_token, j.settings.admin_token)
    if (
        not j.valid("node_token", "admin_token")
        or None in tokens
        or len({t.get_secret_value() for t in tokens if t is not None}) != 1
    ):
        return []
    return [
        j.problem(
            "node_token",
            f"a token other than {property_name('admin_token')} (a node must not be able to change quotas)",
        )
    ]


# The quota store


def kafka_quota_store_needs_bootstrap(j: Judged) -> list[Problem]:
    """quota.store=kafka: with the admin bootstrap servers set (the store's cluster), and well
    formed (when observing, bootstrap_servers_when_observing says so already)."""
    s = j.settings
    if not j.valid("quota_store", _BOOTSTRAP) or s.quota_store != "kafka":
        return []
    if not s.kafka_admin_bootstrap_servers:
        return [
            j.problem(
                "quota_store",
                "sqlite, or kafka with client.quota.callback.static.kafka.admin.bootstrap.servers set (the store's cluster)",
            )
        ]
    if not j.observing and not _bootstrap_well_formed(s.kafka_admin_bootstrap_servers):
        return [j.problem(_BOOTSTRAP, _BOOTSTRAP_FORM)]
    return []


# HTTPS


def https_certificate_with_key(j: Judged) -> list[Problem]:
    """http.ssl.certfile and http.ssl.keyfile: both or neither."""
    if j.given("http_ssl_certfile") == j.given("http_ssl_keyfile"):
        return []
    missing = "http_ssl_certfile" if j.given("http_ssl_keyfile") else "http_ssl_keyfile"
    return [j.problem(missing, "set both the certificate and the key file for HTTPS, or neither")]


def _is_file(path: str) -> bool:
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def io_https_files_readable(j: Judged) -> list[Problem]:
    """http.ssl.certfile, http.ssl.keyfile: readable files (looked at on the file system)."""
    fields = ("http_ssl_certfile", "http_ssl_keyfile")
    unreadable = [
        f
        for f in fields
        if j.valid(f)
        and getattr(j.settings, f) is not None
        and not _is_file(getattr(j.settings, f))
    ]
    return [j.problem(field, "a readable file") for field in unreadable]


# The data and history directories


def directory_problem(directory: Path) -> str | None:
    """Why ``directory`` could not be used (created if missing, then written), or None.
    Checks without creating anything, so --check-config leaves no trace."""
    try:
        return _directory_problem(directory)
    except (OSError, RuntimeError) as exc:  # a name too long, no home directory for "~"
        return f"unusable ({getattr(exc, 'strerror', None) or exc})"


def _directory_problem(directory: Path) -> str | None:
    path = directory.expanduser()
    if "\x00" in str(path) or not str(path).strip():
        return "a path name (it is empty or has a NUL character)"
    if path.exists():
        if not path.is_dir():
            return f"{path} is not a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else f"{path} is not writable"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a directory, so {path} cannot be created"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{parent} is not writable, so {path} cannot be created"
    return None


def io_directories_usable(j: Judged) -> list[Problem]:
    """data.dir, and history.dir when the history is on: directories the service can create
    and write (looked at on the file system, nothing created)."""
    s = j.settings
    directories = [("data_dir", s.data_dir)] if j.valid("data_dir") else []
    if (
        j.valid("history_enabled", "history_dir") and s.history_enabled and s.history_dir
    ):  # unset: under the data dir
        directories.append(("history_dir", s.history_dir))
    problems = []
    for field, directory in directories:
        reason = directory_problem(Path(directory))
        if reason:
            problems.append(j.problem(field, f"{allowed_values(field)}; {reason}"))
    return problems


# The history topic's producer


def librdkafka_refusal(config: Mapping[str, str]) -> str | None:
    """What librdkafka says of a producer ``config``, or None when it takes it. The one place
    the settings are checked by building a real client: a confluent-kafka Producer is made
    (librdkafka starts its threads and may begin connecting) and dropped at once."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer(dict(config)).flush(0)
    except KafkaException as exc:
        return str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
    return None


def io_history_producer_accepted(j: Judged) -> list[Problem]:
    """history.kafka.producer.*: properties librdkafka accepts. librdkafka judges its own
    properties: a real producer is built once (``librdkafka_refusal``) and what it refuses
    is reported."""
    s = j.settings
    if not (
        j.valid("history_kafka_enabled", "history_kafka_producer", _BOOTSTRAP)
        and s.history_kafka_enabled
    ):
        return []
    config = s.history_producer_config
    if "bootstrap.servers" not in config:
        return [
            Problem(
                HISTORY_PRODUCER_PREFIX + "bootstrap.servers",
                None,
                "the history topic's bootstrap servers (or set the admin bootstrap servers)",
            )
        ]
    reason = librdkafka_refusal(config)
    if reason is None:
        return []
    named = next((k for k in config if f'"{k}"' in reason or k in reason), None)
    key = HISTORY_PRODUCER_PREFIX + (named or "*")
    if is_secret_key(
        key
    ):  # librdkafka quotes values ('Invalid value "..." for ...'): keep only names
        reason = _QUOTED.sub(
            lambda m: m.group(0) if m.group(1) in config else f'"{HIDDEN}"', reason
        )
    reason = _QUOTED.sub(
        lambda m: f'"{bounded(m.group(1))}"', reason
    )  # librdkafka quotes the value whole
    value = config.get(named) if named else None
    return [
        Problem(key, value, f"a property librdkafka accepts ({reason})", j.origin_of.get(key, ""))
    ]


# The admin client


def io_admin_client_properties(j: Judged) -> list[Problem]:
    """kafka.admin.*: properties the admin client supports; while observing, its TLS stores
    are read and decrypted once, so a wrong path or password is reported now."""
    if not j.valid("kafka_admin"):
        return []
    _, admin_problems = to_kafka_python(j.settings.kafka_admin, load_tls=j.observing)
    keys = [ADMIN_PREFIX + p.key for p in admin_problems]
    return [
        Problem(key, p.value, p.allowed, j.origin_of.get(key, ""))
        for key, p in zip(keys, admin_problems)
    ]


# The rules that only compare settings, in the order their problems are reported.
RULES: tuple[Rule, ...] = (
    data_limit_rules,
    metadata_limit_rules,
    metadata_limits_need_node_reports,
    report_tolerance_needs_node_reports,
    node_token_not_admin_token,
    validity_positive_and_longer_than_interval,
    horizon_holds_three_observations,
    bootstrap_servers_when_observing,
    request_timeout_within_interval,
    kafka_quota_store_needs_bootstrap,
    https_certificate_with_key,
)
# The rules that look outside the settings, reported after those of RULES.
RULES_WITH_IO: tuple[Rule, ...] = (
    io_https_files_readable,
    io_directories_usable,
    io_history_producer_accepted,
    io_admin_client_properties,
)


def cross_field_problems(
    s: Settings,
    origin_of: Mapping[str, str],
    given_raw: Mapping[str, Any],
    invalid: AbstractSet[str],
) -> list[Problem]:
    """The problems of every rule between settings, those of ``RULES`` first."""
    judged = Judged(s, origin_of, given_raw, invalid)
    return [problem for rule in (*RULES, *RULES_WITH_IO) for problem in rule(judged)]
