"""How a configuration value may be shown: which values are secret, how much of a long one a
message quotes, and keeping secrets out of every log line.

A message about a value is one line a person reads: it quotes at most the first
SHOWN_VALUE_CHARS characters of a value and says how long the value was (``quoted``), so a
value of a megabyte gives a line of a few hundred bytes.

A setting is secret when its key says so (password, secret, token, a JAAS line, credentials):
the admin token, the admin client's and the history producer's SASL and key store
passwords. The service hides a secret by its key wherever it names a setting (configuration
problems, the settings' representation) and never searches its own text for secret values:
a short secret such as ``short`` would turn ``(too short)`` into ``(too <hidden>)``, garbling
the message and revealing the secret at once.

Libraries are another matter: kafka-python logs its whole configuration at DEBUG. As a
safety net, the records of every logger outside the service's own (``app``), and the
exception text of every record, are scrubbed of the configured secret values before any
handler sees them. Values shorter than MIN_REDACTED_LENGTH are left alone: they match
ordinary words, and the gaps they would leave spell them out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

HIDDEN = "<hidden>"
SECRET_WORDS = ("password", "secret", "token", "jaas", "credential")
# Shorter values would turn ordinary words of log lines into <hidden>; the token needs 16.
MIN_REDACTED_LENGTH = 8
SERVICE_LOGGER = "app"  # the service's own loggers: app.decision, app.kafka.volume_source, ...
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"((?:[^"\\]|\\.)*)"')


def is_secret_key(key: str) -> bool:
    """Whether a setting's value must never be shown, judged by its key."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def shown_value(key: str, value: str | None) -> str | None:
    """A setting's value as it may be shown: HIDDEN for a secret key."""
    return HIDDEN if value is not None and is_secret_key(key) else value


# The most of a given value a message quotes (escapes included); a longer value is cut there.
SHOWN_VALUE_CHARS = 200


def printable(text: str) -> str:
    """``text`` with every character Python does not count printable written as the escape
    ``repr`` gives it (``\\x1b``, ``\\t``, ``\\u2028``): the one rule for whatever the service
    echoes into a line a person reads (configuration problems, log lines), so an ANSI escape
    cannot colour a terminal and a record separator or line break cannot split the line."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def quoted(value: str) -> str:
    """``value`` as a message quotes it (Python's quotes and escapes, so every character is
    visible; its control characters escaped as ``printable`` escapes them): whole when short;
    else the first characters, at most SHOWN_VALUE_CHARS of
    quoted text, then how many characters the value had."""
    if len(value) <= SHOWN_VALUE_CHARS:
        whole = repr(value)
        if len(whole) <= SHOWN_VALUE_CHARS + 2:
            return whole
    end = width = 0
    for char in value[:SHOWN_VALUE_CHARS]:
        width += (
            len(repr(char)) - 2 + (char == "'")
        )  # escaped when the value also holds a double quote
        if width > SHOWN_VALUE_CHARS:
            break
        end += 1
    return f"{value[:end]!r}... ({len(value):,} characters)"


def bounded(text: str) -> str:
    """``text`` (a key, a name) cut after SHOWN_VALUE_CHARS characters, with ``...``."""
    return text if len(text) <= SHOWN_VALUE_CHARS else text[:SHOWN_VALUE_CHARS] + "..."


def secret_values_of(key: str, value: str) -> set[str]:
    """The secret strings in one setting: the whole value, and a JAAS line's password."""
    if not is_secret_key(key) or not value:
        return set()
    found = {value}
    found.update(match.replace('\\"', '"') for match in _JAAS_PASSWORD.findall(value))
    return {v for v in found if v}


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(
        secrets, key=len, reverse=True
    ):  # longest first: a JAAS line before its password
        if len(secret) >= MIN_REDACTED_LENGTH and secret in text:
            text = text.replace(secret, HIDDEN)
    return text


_installed: set[str] = set()


def install_log_redaction(secrets: Iterable[str]) -> None:
    """Scrub ``secrets`` from every library's log records created from now on, whatever
    handler they go to (uvicorn configures its own handlers, kafka-python its own loggers),
    and from the exception text of every record."""
    new = {s for s in secrets if len(s) >= MIN_REDACTED_LENGTH}
    if not new:
        return
    first = not _installed
    _installed.update(new)
    if not first:
        return
    make_record = logging.getLogRecordFactory()
    exception_formatter = logging.Formatter()

    def scrubbed_record(*args, **kwargs) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if not _is_service_logger(record.name):
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a broken format string: logging reports it when the handler formats
                return record
            clean = redact(message, _installed)
            if clean != message:
                record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(
                exception_formatter.formatException(record.exc_info), _installed
            )
        return record

    logging.setLogRecordFactory(scrubbed_record)


def _is_service_logger(name: str) -> bool:
    return name == SERVICE_LOGGER or name.startswith(SERVICE_LOGGER + ".")
