"""Conditional and long-poll GETs over a published representation (ETag / 304 / ?wait=)."""

from __future__ import annotations

import re

from fastapi import Request, Response

from app.server.problems import ProblemError
from app.server.publishing import Publication

MAX_WAIT_SECONDS = 300.0
_WAIT = re.compile(r"^(\d+(?:\.\d+)?)s?$")

# Declared for the OpenAPI document; handlers read it from the query string themselves so
# the hot endpoints skip FastAPI's parameter machinery.
WAIT_PARAMETER = {
    "name": "wait",
    "in": "query",
    "required": False,
    "description": (
        "Long-poll: with If-None-Match, hold the request until the representation changes or "
        f"this many seconds pass (0 to {MAX_WAIT_SECONDS:g}; '30' or '30s')."
    ),
    "schema": {"type": "string", "pattern": r"^\d+(\.\d+)?s?$"},
    "example": "30s",
}


def parse_wait(text: str | None) -> float:
    if text is None:
        return 0.0
    match = _WAIT.match(text)
    seconds = float(match.group(1)) if match else -1.0
    if not 0.0 <= seconds <= MAX_WAIT_SECONDS:
        raise ProblemError(422, "Invalid request", f"wait: expected seconds between 0 and {MAX_WAIT_SECONDS:g}, got {text!r}")
    return seconds


def matching_etag(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match uses the weak comparison (RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(candidate.strip().removeprefix("W/") == opaque for candidate in if_none_match.split(","))


class _RawResponse(Response):
    """A response whose headers are given ready-made: the hot path skips header assembly."""

    def __init__(self, status_code: int, body: bytes, raw_headers: list[tuple[bytes, bytes]]) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        self.raw_headers = raw_headers


_JSON_HEADERS = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache")]
_NOT_MODIFIED_HEADERS = [(b"cache-control", b"no-cache")]


async def conditional_get(request: Request, publication: Publication) -> Response:
    seconds = parse_wait(request.query_params.get("wait")) if request.scope["query_string"] else 0.0
    if_none_match = request.headers.get("if-none-match")
    if seconds > 0 and if_none_match:
        published = publication.current()
        if matching_etag(if_none_match, published.etag):
            published = await publication.wait_for_change(published.etag, seconds)
    else:
        published = publication.current()
    if matching_etag(if_none_match, published.etag):
        return _RawResponse(304, b"", [published.etag_header, *_NOT_MODIFIED_HEADERS])
    length = (b"content-length", str(len(published.body)).encode())
    return _RawResponse(200, published.body, [published.etag_header, length, *_JSON_HEADERS])
