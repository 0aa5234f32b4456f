"""Which configuration values are secret, and keeping them out of every log line.

A setting is secret when its key says so (password, secret, token, a JAAS line, credentials):
the admin token, the admin client's and the history producer's SASL and key store
passwords. Secrets are never written on purpose; as a safety net for libraries that log
their own configuration (kafka-python does at DEBUG), every log record is scrubbed of the
configured secret values before any handler sees it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable

HIDDEN = "<hidden>"
SECRET_WORDS = ("password", "secret", "token", "jaas", "credential")
# Shorter values would turn ordinary words of log lines into <hidden>; the token needs 16.
MIN_REDACTED_LENGTH = 4
_JAAS_PASSWORD = re.compile(r'password\s*=\s*"((?:[^"\\]|\\.)*)"')


def is_secret_key(key: str) -> bool:
    """Whether a setting's value must never be shown, judged by its key."""
    lowered = key.lower()
    return any(word in lowered for word in SECRET_WORDS)


def secret_values_of(key: str, value: str) -> set[str]:
    """The secret strings in one setting: the whole value, and a JAAS line's password."""
    if not is_secret_key(key) or not value:
        return set()
    found = {value}
    found.update(match.replace('\\"', '"') for match in _JAAS_PASSWORD.findall(value))
    return {v for v in found if v}


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):  # longest first: a JAAS line before its password
        if len(secret) >= MIN_REDACTED_LENGTH and secret in text:
            text = text.replace(secret, HIDDEN)
    return text


_installed: set[str] = set()


def install_log_redaction(secrets: Iterable[str]) -> None:
    """Scrub ``secrets`` from every log record created from now on, whatever logger or
    handler it goes to (uvicorn configures its own handlers, kafka-python its own loggers)."""
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
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: logging reports it when the handler formats
            return record
        clean = redact(message, _installed)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(exception_formatter.formatException(record.exc_info), _installed)
        return record

    logging.setLogRecordFactory(scrubbed_record)
