"""The service's log lines: text for a person (the default), or one JSON object per line for a
log aggregator (``throttle.service.log.format=json``).

A JSON line holds ``time`` (ISO-8601, UTC), ``level``, ``logger`` and ``message``, plus the
structured fields a line carries (``extra=``): the audit line's method, path, entity, outcome,
status and client, a state change's event, state, factor and source. uvicorn's own lines go
through the same handler."""

from __future__ import annotations

import logging
from typing import Literal

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from app.redaction import printable

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class TextFormatter(logging.Formatter):
    """The text line of a record with its control characters escaped (``printable``): a value a
    message echoes (a path, a name, a client's text) cannot colour the terminal or split the
    line. A traceback, added after the line, keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


def json_formatter() -> logging.Formatter:
    return JsonFormatter(
        "%(levelname)s %(name)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
        reserved_attrs=[
            *RESERVED_ATTRS,
            "color_message",
        ],  # uvicorn's copy of the message with terminal colours
    )


def configure_logging(level: str, log_format: Literal["text", "json"]) -> None:
    if log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(json_formatter())
        logging.basicConfig(level=level, handlers=[handler])
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(TextFormatter(TEXT_FORMAT))
        logging.basicConfig(level=level, handlers=[handler])
