"""Load settings from a properties file and the environment, and report every problem.

A bad configuration must stop start-up with one line per problem naming the key, the value
and what is allowed; this module turns the file's syntax errors, pydantic's errors and the
rules between settings (exactly one hard limit, a soft limit looser than the hard one, ...)
into such lines, all of them at once. A value that was given but is invalid still counts as
given for the rules between settings (two hard limits conflict even when one is out of
range), and a rule that would compare an invalid value is left out rather than judged
against the default in its place. The rules themselves are in app/settings/rules.py (and
those between the limits in app/settings/limits.py); the problem lines in
app/settings/problems.py.

A problem about a secret key shows ``<hidden>`` for its value, whatever the value is: the key
decides, and no other text of a message is searched for secret values and rewritten.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.redaction import HIDDEN, is_secret_key
from app.settings.limits import LIMIT_FIELDS, limit_rules
from app.settings.model import (
    PROPERTY_FIELDS,
    SERVICE_PREFIX,
    STATIC_PREFIX,
    WILDCARD_FIELDS,
    Settings,
    allowed_values,
    env_name,
    property_name,
)
from app.settings.problems import ConfigurationError, Problem
from app.settings.properties import MalformedEntry, PropertiesSyntaxError, read_properties
from app.settings.rules import cross_field_problems, directory_problem

__all__ = [
    "ConfigurationError",
    "Problem",
    "check_limits",
    "configured_value",
    "directory_problem",
    "environ_without_settings",
    "load_limits",
    "load_settings",
    "prepare_directory",
]

# Properties under our prefixes that belong to later features or to the broker-side plugin.
_OWN_PREFIXES = (STATIC_PREFIX, SERVICE_PREFIX)


@dataclass(frozen=True)
class _Value:
    raw: str
    origin: str


# Kubernetes gives every pod variables for every Service of its namespace (enableServiceLinks): a
# Service named throttle-service, as docs/deploying.md names it, yields THROTTLE_SERVICE_SERVICE_HOST,
# THROTTLE_SERVICE_PORT=tcp://10.0.0.11:8080, THROTTLE_SERVICE_PORT_8080_TCP_ADDR, ... None is a setting.
_SERVICE_LINK = re.compile(
    r"_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$"
)
_SERVICE_LINK_URL = re.compile(r"^(tcp|udp|sctp)://")  # the value of the bare <SERVICE>_PORT


def _is_service_link(name: str, value: str) -> bool:
    return bool(_SERVICE_LINK.search(name)) or (
        name.endswith("_PORT") and bool(_SERVICE_LINK_URL.match(value))
    )


def _unknown_variables(environ: Mapping[str, str]) -> list[Problem]:
    """Variables under the service's prefixes that name no setting: refused like a misspelt
    key, since a typo would otherwise leave the setting silently unset. Variables of other
    programs (KAFKA_HEAP_OPTS) and Kubernetes' service links are not the service's."""
    known = {env_name(prop): prop for prop in PROPERTY_FIELDS}
    prefixes = tuple(env_name(prefix) for prefix in _OWN_PREFIXES)
    families = tuple(env_name(prefix) for prefix in WILDCARD_FIELDS)
    problems = []
    for name, raw in sorted(environ.items()):
        if (
            name.startswith(prefixes)
            and name not in known
            and not name.startswith(families)
            and not _is_service_link(name, raw)
        ):
            problems.append(
                _unknown_key_problem(name, _Value(raw, f"environment variable {name}"), known)
            )
    return problems


def _collect(
    properties: Mapping[str, str], source: str, environ: Mapping[str, str]
) -> dict[str, _Value]:
    """Property name -> raw value and origin; the environment overrides the file."""
    values = {
        key: _Value(value, source)
        for key, value in properties.items()
        if key.startswith(_OWN_PREFIXES)
    }
    env_to_property = {env_name(prop): prop for prop in PROPERTY_FIELDS}
    for name, raw in environ.items():
        if name in env_to_property:
            values[env_to_property[name]] = _Value(raw, f"environment variable {name}")
            continue
        for prefix in WILDCARD_FIELDS:
            env_prefix = env_name(prefix)
            if name.startswith(env_prefix) and len(name) > len(env_prefix):
                # Kafka property names use dots only, so underscores map back unambiguously.
                prop = prefix + name[len(env_prefix) :].lower().replace("_", ".")
                values[prop] = _Value(raw, f"environment variable {name}")
    return values


def _wildcard_prefix(key: str) -> str | None:
    return next((prefix for prefix in WILDCARD_FIELDS if key.startswith(prefix)), None)


def _unknown_key_problem(
    key: str, value: _Value, spellings: Mapping[str, str] | None = None
) -> Problem:
    """A key (or, with ``spellings`` of the environment variables, a variable) that names no
    setting, with the closest known spelling."""
    spellings = spellings if spellings is not None else {prop: prop for prop in PROPERTY_FIELDS}
    close = difflib.get_close_matches(key, list(spellings), n=1, cutoff=0.8)
    allowed = (
        f"did you mean {close[0]}?" if close else "a known setting (see docs/configuration.md)"
    )
    # A misspelt secret key (admin.tokn) still holds the secret.
    secret = bool(close) and is_secret_key(spellings[close[0]])
    return Problem(key, HIDDEN if secret else value.raw, allowed, value.origin)


def prepare_directory(field: str, directory: Path) -> None:
    """Create ``directory`` and write a probe file in it at start-up, or raise
    ConfigurationError naming the setting (root passes permission checks, read-only and
    special file systems do not)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigurationError(
            [Problem(property_name(field), str(directory), f"{allowed_values(field)} ({reason})")]
        ) from None


_UNREADABLE = "java.util.Properties refuses this file too"


def _malformed_problem(entry: MalformedEntry, source: str) -> Problem:
    origin = f"{source}, line {entry.line}"
    if entry.key is None:
        return Problem(
            "--config",
            source,
            f"a key with \\uXXXX escapes of four hexadecimal digits ({_UNREADABLE})",
            origin,
        )
    return Problem(
        entry.key,
        entry.raw,
        f"\\uXXXX escapes with four hexadecimal digits ({_UNREADABLE})",
        origin,
    )


def load_settings(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Settings:
    """Build the settings, or raise ConfigurationError listing every problem."""
    environ = os.environ if environ is None else environ
    problems: list[Problem] = []
    properties: dict[str, str] = {}
    unreadable: list[MalformedEntry] = []
    source = ""
    if config_file is not None:
        source = str(config_file)
        try:
            properties = read_properties(config_file)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(
                [Problem("--config", source, f"a readable properties file ({exc})")]
            ) from exc
        except PropertiesSyntaxError as exc:  # reported, and the rest of the file judged too
            properties, unreadable = exc.entries, exc.malformed
            problems.extend(_malformed_problem(entry, source) for entry in unreadable)
    values = _collect(properties, source, environ)
    problems.extend(_unknown_variables(environ))

    kwargs: dict[str, Any] = {}
    given_raw: dict[str, Any] = {}  # what each field was given, as written, for the messages
    origin_of: dict[str, str] = {}
    invalid: set[str] = set()  # fields given a value that is reported as invalid
    wildcards: dict[str, dict[str, str]] = {prefix: {} for prefix in WILDCARD_FIELDS}
    for key, value in values.items():
        if key in PROPERTY_FIELDS:
            field = PROPERTY_FIELDS[key]
            kwargs[field] = given_raw[field] = value.raw
            origin_of[field] = value.origin
        elif (prefix := _wildcard_prefix(key)) is not None:
            wildcards[prefix][key[len(prefix) :]] = value.raw
            origin_of[key] = value.origin
        else:
            problems.append(_unknown_key_problem(key, value))
    for entry in unreadable:
        if entry.key is None or entry.key in values:  # not ours, or the environment sets it
            continue
        if entry.key in PROPERTY_FIELDS:
            field = PROPERTY_FIELDS[entry.key]
            invalid.add(field)
            given_raw[field], origin_of[field] = entry.raw, f"{source}, line {entry.line}"
        elif (prefix := _wildcard_prefix(entry.key)) is not None:
            invalid.add(WILDCARD_FIELDS[prefix])  # a family of client properties with one unknown
    for prefix, field in WILDCARD_FIELDS.items():
        kwargs[field] = wildcards[prefix]
    kwargs.update(overrides)
    given_raw.update(overrides)

    settings = _validated(kwargs, origin_of, invalid, problems)
    problems.extend(cross_field_problems(settings, origin_of, given_raw, invalid))
    if problems:
        raise ConfigurationError(problems)
    return settings


def _validated(
    kwargs: dict[str, Any], origin_of: dict[str, str], invalid: set[str], problems: list[Problem]
) -> Settings:
    """The settings of ``kwargs``, each field checked on its own; a field whose value is
    invalid is reported in ``problems``, named in ``invalid`` and left at its default, so
    that the rules between settings can still judge the others."""
    try:
        return Settings(**kwargs)
    except ValidationError as exc:
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else ""
            if field not in Settings.model_fields:
                continue
            invalid.add(field)
            raw = kwargs.get(field)
            reason = str(error["msg"]).removeprefix("Value error, ")
            allowed = allowed_values(field)
            if reason.removeprefix("expected ") not in allowed:
                allowed = f"{allowed} ({reason})"
            problems.append(
                Problem(
                    property_name(field),
                    None if raw is None else str(raw),
                    allowed,
                    origin_of.get(field, ""),
                )
            )
        try:  # the valid values, for the rules between settings
            return Settings(**{k: v for k, v in kwargs.items() if k not in invalid})
        except ValidationError:
            raise ConfigurationError(problems) from exc


def check_limits(values: Mapping[str, Any], origin: str = "") -> Settings:
    """A set of limits on its own (settings field name -> value, as written or typed; only the
    fields of ``LIMIT_FIELDS``), checked with the service's rules: each value as the settings
    check it, then the rules between them. Returns settings holding those limits (the rest at
    their defaults), or raises ConfigurationError naming each problem by its property."""
    unknown = set(values) - set(LIMIT_FIELDS)
    if unknown:
        raise ValueError(f"not limit settings: {sorted(unknown)}")
    problems: list[Problem] = []
    invalid: set[str] = set()
    kwargs = dict(values)
    settings = _validated(kwargs, dict.fromkeys(kwargs, origin), invalid, problems)

    def given(field: str) -> bool:
        return field in invalid or getattr(settings, field) is not None

    for field, allowed in limit_rules(settings, given, lambda *fields: invalid.isdisjoint(fields)):
        raw = values.get(field, getattr(settings, field))
        problems.append(
            Problem(property_name(field), None if raw is None else str(raw), allowed, origin)
        )
    if problems:
        raise ConfigurationError(problems)
    return settings


def load_limits(path: Path) -> Settings:
    """The limit settings of a properties file, read as the service reads its configuration
    (the same reader, keys and checks; no environment). A whole service configuration may be
    given: its other settings are left out, a key under the service's prefixes that names no
    setting is refused as at start-up, and keys that are not the service's are passed over."""
    source = str(path)
    try:
        properties = read_properties(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(
            [Problem("--limits", source, f"a readable properties file ({exc})")]
        ) from exc
    except PropertiesSyntaxError as exc:
        raise ConfigurationError(
            [_malformed_problem(entry, source) for entry in exc.malformed]
        ) from exc
    values = _collect(properties, source, {})
    unknown = [
        _unknown_key_problem(key, value)
        for key, value in values.items()
        if key not in PROPERTY_FIELDS and _wildcard_prefix(key) is None
    ]
    limits = {
        PROPERTY_FIELDS[key]: value.raw
        for key, value in values.items()
        if PROPERTY_FIELDS.get(key) in LIMIT_FIELDS
    }
    try:  # the limits are checked too when a key is unknown: every problem is named at once
        settings = check_limits(limits, source)
    except ConfigurationError as exc:
        raise ConfigurationError(unknown + exc.problems) from None
    if unknown:
        raise ConfigurationError(unknown)
    return settings


def configured_value(
    config_file: Path | None, field: str, environ: Mapping[str, str] | None = None
) -> str | None:
    """The raw value one setting is given by the file or the environment, before any
    validation (None when unset or the file is unreadable): for deciding what to run."""
    properties: dict[str, str] = {}
    if config_file is not None:
        try:
            properties = read_properties(config_file)
        except (OSError, UnicodeDecodeError):
            pass
        except PropertiesSyntaxError as exc:
            properties = exc.entries
    value = _collect(properties, "", os.environ if environ is None else environ).get(
        property_name(field)
    )
    return value.raw if value is not None else None


def environ_without_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment minus every variable the service would read as a setting: for starting
    a service (or a check of one) that sees only the settings it is given."""
    prefixes = tuple(env_name(prefix) for prefix in _OWN_PREFIXES)
    return {
        k: v
        for k, v in (os.environ if environ is None else environ).items()
        if not k.startswith(prefixes)
    }
