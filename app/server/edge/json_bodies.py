"""JSON request bodies without duplicate keys.

RFC 8259 leaves an object with a key given twice to the parser; Python's (and so FastAPI's)
keeps the last value, other parsers the first. A body that means different things to
different readers is refused (422, naming the key) before FastAPI reads it. Every route of
the API is a ``StrictJsonRoute`` (``RouteSet`` makes it so): a route added later cannot forget."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from app.server.edge.problems import InvalidRequest, field_error

SHOWN_KEY_CHARACTERS = 64  # of a duplicate key in an error


class _DuplicateKey(Exception):  # not a ValueError: json.loads lets it through unchanged
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


def refuse_duplicate_keys(body: bytes) -> None:
    """InvalidRequest when an object of the JSON ``body`` gives a key twice. A body that is not
    JSON at all is left to FastAPI, which answers it 400 or 422 as the document says."""
    try:
        json.loads(body, object_pairs_hook=_object_without_duplicates)
    except _DuplicateKey as duplicate:
        message = "is given more than once in one object; give each key once"
        raise InvalidRequest(
            [field_error(duplicate.key[:SHOWN_KEY_CHARACTERS], "body", message)]
        ) from None
    except (ValueError, RecursionError):
        return


def keys_counted_once(body: bytes, keys_read: int) -> bool:
    """Whether the JSON ``body``, read by a parser into objects holding ``keys_read`` keys in all,
    surely gives no key twice, without parsing it again: every key written is followed by one
    colon outside any string, so the body holds at least as many colons as keys written (more
    if a string holds one). Holding exactly ``keys_read``, the keys written are no more than the
    keys read, so none was given twice. False means only: not shown here (refuse_duplicate_keys
    decides; a log dir with a colon in its name, say)."""
    return body.count(b":") == keys_read


class StrictJsonRoute(APIRoute):
    """An API route whose JSON body is checked by refuse_duplicate_keys first (a route that
    reads no body is left as it is)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler

        async def strict_handler(request: Request) -> Response:
            body = await request.body()  # kept by the request: FastAPI reads the same bytes
            if body:
                refuse_duplicate_keys(body)
            return await handler(request)

        return strict_handler
