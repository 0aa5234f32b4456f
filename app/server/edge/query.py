"""The query string, read strictly: each parameter once, and valid UTF-8 once percent-decoded.

Starlette's reading keeps the last of repeated parameters (``?user=a&user=b`` is user b) and
turns undecodable bytes into U+FFFD (``%ED%A0%80``, a UTF-16 surrogate, becomes three), so a
name would be stored other than sent; the API answers both with 422 instead."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

from fastapi import Request

from app.server.edge.problems import InvalidRequest, field_error

SHOWN_NAME_CHARACTERS = 64  # of a parameter's name in an error


def query_values(scope: Mapping[str, Any]) -> dict[str, str]:
    """The query's parameters by name; InvalidRequest naming each one given twice or not UTF-8."""
    raw: bytes = scope["query_string"]
    values: dict[str, str] = {}
    if not raw:
        return values
    errors = []
    for part in raw.split(b"&"):
        if not part:
            continue
        raw_name, _, raw_value = part.decode("latin-1").partition("=")
        try:
            name = unquote_plus(raw_name, errors="strict")
            value = unquote_plus(raw_value, errors="strict")
        except UnicodeDecodeError:
            shown = unquote_plus(raw_name, errors="backslashreplace")[:SHOWN_NAME_CHARACTERS]
            errors.append(field_error(shown, "query", "is not valid UTF-8 once percent-decoded"))
            continue
        if name in values:
            errors.append(
                field_error(
                    name[:SHOWN_NAME_CHARACTERS], "query", "is given more than once; give it once"
                )
            )
        values[name] = value
    if errors:
        raise InvalidRequest(errors)
    return values


async def strict_query(request: Request) -> None:
    """A dependency that refuses what query_values refuses, before FastAPI reads the parameters."""
    query_values(request.scope)
