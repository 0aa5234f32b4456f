"""Conditional and long-poll GETs over a published representation (ETag / 304 / ?wait=)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Coroutine
from typing import Any

from fastapi import Request, Response

from app.clock import Clock
from app.server.edge.problems import ProblemError
from app.server.edge.query import query_values
from app.server.runtime.publishing import GZIP_MIN_BYTES, Publication, Published
from app.timefmt import iso_instant

MAX_WAIT_SECONDS = 300.0
VALID_UNTIL_HEADER = b"throttle-valid-until"
# Seconds from 0 to 300, ASCII digits only (float() takes any script's), with a fraction and
# an "s" if wished: the one grammar of ?wait=, which the document states as its pattern (the
# service matches the same).
WAIT_PATTERN = r"^(300(\.0+)?|([0-9]|[1-9][0-9]|[12][0-9][0-9])(\.[0-9]+)?)s?$"
_WAIT = re.compile(WAIT_PATTERN)

# Declared for the OpenAPI document; handlers read it from the query string themselves so
# the hot endpoints skip FastAPI's parameter machinery.
WAIT_PARAMETER: dict[str, Any] = {  # an OpenAPI parameter object
    "name": "wait",
    "in": "query",
    "required": False,
    "description": (
        "Long-poll: with If-None-Match, hold the request until the representation changes or "
        f"this many seconds pass: from 0 up to a maximum of {MAX_WAIT_SECONDS:g}, ASCII digits without leading zeros, "
        "'30' or '30s'."
    ),
    "schema": {"type": "string", "pattern": WAIT_PATTERN, "maxLength": 32},
    "example": "30s",
}


def parse_wait(text: str | None) -> float:
    if text is None:
        return 0.0
    if len(text) > WAIT_PARAMETER["schema"]["maxLength"] or not _WAIT.match(text):
        raise ProblemError(
            422,
            "Invalid request",
            f"wait: expected seconds between 0 and {MAX_WAIT_SECONDS:g}, got {text[:32]!r}",
        )
    return float(text.removesuffix("s"))


def matching_etag(if_none_match: str | None, etag: str) -> bool:
    """If-None-Match uses the weak comparison (RFC 9110 13.1.2)."""
    if not if_none_match:
        return False
    if if_none_match.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(
        candidate.strip().removeprefix("W/") == opaque for candidate in if_none_match.split(",")
    )


class _RawResponse(Response):
    """A response whose headers are given ready-made: the hot path skips header assembly."""

    def __init__(
        self, status_code: int, body: bytes, raw_headers: list[tuple[bytes, bytes]]
    ) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        self.raw_headers = raw_headers


_JSON = (b"content-type", b"application/json")
_NO_CACHE = (b"cache-control", b"no-cache")
_GZIP = (b"content-encoding", b"gzip")
_VARY = (b"vary", b"accept-encoding")  # the body may come gzipped or not


def conditional_responses(what: str, client: str, etag_covers: str) -> dict[int | str, dict]:
    """The OpenAPI description of a conditional GET's 200 and 304."""
    return {
        200: {
            "description": f"{what}, with its ETag and validity",
            "headers": response_headers(etag_covers),
        },
        304: {
            "description": f"Nothing {client} acts on changed since the ETag given in If-None-Match",
            "headers": response_headers(etag_covers),
        },
    }


def response_headers(etag_covers: str) -> dict[str, dict]:
    """The OpenAPI description of the headers of a conditional GET's 200 and 304."""
    return {
        "ETag": {
            "description": f"A weak ETag; it changes when one of these changes: {etag_covers}",
            "schema": {"type": "string"},
        },
        "Throttle-Valid-Until": {
            "description": "When this representation's valid_until falls (ISO-8601, UTC); a 304 renews a client's copy "
            "to it. Absent when nothing expires (fallback, observation off).",
            "schema": {"type": "string", "format": "date-time"},
        },
        "Cache-Control": {
            "description": "no-cache, with max-age: the seconds left until Throttle-Valid-Until",
            "schema": {"type": "string"},
        },
        "Content-Encoding": {
            "description": f"gzip on a 200 whose body is {GZIP_MIN_BYTES} bytes or more, when the request's Accept-Encoding takes gzip",
            "schema": {"type": "string", "enum": ["gzip"]},
        },
        "Vary": {"description": "Accept-Encoding", "schema": {"type": "string"}},
    }


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an Accept-Encoding header (RFC 9110 12.5.3) takes gzip: named (or ``*``, with
    gzip not refused) with a weight above 0."""
    if not accept_encoding:
        return False
    weights: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, parameters = item.partition(";")
        weight = 1.0
        name, _, value = parameters.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                weight = float(value)
            except ValueError:
                weight = 0.0
        weights[coding.strip().lower()] = weight
    for coding in ("gzip", "x-gzip"):
        if coding in weights:
            return weights[coding] > 0
    return weights.get("*", 0.0) > 0


def validity_headers(published: Published, now: float) -> list[tuple[bytes, bytes]]:
    """How long the client's copy stays valid: ``Throttle-Valid-Until`` (the representation's
    ``valid_until``) and the seconds left as ``max-age``; ``no-cache`` either way, since a
    shared cache must ask again (a long-poll is a question about the future)."""
    if published.valid_until is None:
        return [_NO_CACHE]
    seconds = max(0, int(published.valid_until - now))
    return [
        (b"cache-control", b"no-cache, max-age=" + str(seconds).encode()),
        (VALID_UNTIL_HEADER, (iso_instant(published.valid_until) or "").encode()),
    ]


async def _until_disconnected(
    request: Request, wait: Coroutine[Any, Any, Published], unchanged: Published
) -> Published:
    """``wait``'s result, or ``unchanged`` as soon as the client goes: a closed connection (a
    client gone, or closed by the edge at its cap) must not leave its wait behind for minutes.

    The wait runs in the request's own task and the watcher of the connection cancels it when
    the client goes (as asyncio.timeout cancels on its deadline): a publication wakes each of
    a thousand long-polls in one loop pass, not three, and the watcher is cancelled without
    being waited for."""
    task = asyncio.current_task()
    assert task is not None
    waiting, gone = True, False

    def client_gone(watcher: asyncio.Task[None]) -> None:
        nonlocal gone
        if watcher.cancelled():
            return
        watcher.exception()  # retrieved: a receive that failed also ends the wait
        if waiting:  # not once the answer is on its way (a callback runs a pass later)
            gone = True
            task.cancel()

    watcher = asyncio.ensure_future(_disconnect(request))
    watcher.add_done_callback(client_gone)
    try:
        return await wait
    except asyncio.CancelledError:
        if gone and task.uncancel() == 0:
            return unchanged
        raise
    finally:
        waiting = False
        watcher.cancel()


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass  # a GET's (empty) body


async def conditional_get(request: Request, publication: Publication, clock: Clock) -> Response:
    seconds = (
        parse_wait(query_values(request.scope).get("wait"))
        if request.scope["query_string"]
        else 0.0
    )
    if_none_match = request.headers.get("if-none-match")
    if seconds > 0 and if_none_match:
        published = publication.current()
        if matching_etag(if_none_match, published.etag):
            published = await _until_disconnected(
                request, publication.wait_for_change(published.etag, seconds), published
            )
    else:
        published = publication.current()
    validity = validity_headers(published, clock())
    if matching_etag(if_none_match, published.etag):
        return _RawResponse(304, b"", [published.etag_header, _VARY, *validity])
    if published.gzipped is not None and accepts_gzip(request.headers.get("accept-encoding")):
        length = (b"content-length", str(len(published.gzipped)).encode())
        return _RawResponse(
            200, published.gzipped, [published.etag_header, length, _JSON, _GZIP, _VARY, *validity]
        )
    length = (b"content-length", str(len(published.body)).encode())
    return _RawResponse(
        200, published.body, [published.etag_header, length, _JSON, _VARY, *validity]
    )
