"""Conditional and long-poll GETs over a published representation (ETag / 304 / ?wait=)."""

from __future__ import annotations

import re

from fastapi import Request, Response

from app.api.problems import ProblemError
from app.throttle.board import Board

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

CACHE_HEADERS = {"Cache-Control": "no-cache"}


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


async def conditional_get(request: Request, board: Board) -> Response:
    seconds = parse_wait(request.query_params.get("wait"))
    if_none_match = request.headers.get("if-none-match")
    if seconds > 0 and if_none_match:
        published = board.current()
        if matching_etag(if_none_match, published.etag):
            published = await board.wait_for_change(published.etag, seconds)
    else:
        published = board.current()
    headers = {"ETag": published.etag, **CACHE_HEADERS}
    if matching_etag(if_none_match, published.etag):
        return Response(status_code=304, headers=headers)
    return Response(published.body, media_type="application/json", headers=headers)
