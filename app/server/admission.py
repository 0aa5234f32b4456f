"""What a request passes before a route sees it.

A write (any method but GET and HEAD, except the POSTs that only judge their body) needs the admin token, checked from its headers before
anything reads its body: a client without the token learns nothing about bodies, and its
body costs no memory. Then its body must fit the limit: a declared Content-Length over it is
refused at once, a chunked body is counted as it arrives and refused at the limit. A HEAD is
answered as its GET, without the body.

These are plain ASGI middleware: FastAPI reads and parses a body before it runs a route's
dependencies, so neither check can live in a route."""

from __future__ import annotations

import hmac

from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.problems import problem_json
from app.settings.model import env_name, property_name

READ_METHODS = frozenset({"GET", "HEAD"})
# POSTs that change nothing: a body to judge, no effect (no token, no audit line).
READ_ONLY_POSTS = frozenset({"/what-if"})
TOKEN_SETTING = property_name("admin_token")
BODY_LIMIT_SETTING = property_name("http_max_body_bytes")


def has_body(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] not in READ_METHODS


def is_write(scope: Scope) -> bool:
    return has_body(scope) and not (scope["method"] == "POST" and scope["path"] in READ_ONLY_POSTS)


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


class AdminToken:
    """Writes need ``Authorization: Bearer <admin token>`` (compared in constant time)."""

    def __init__(self, app: ASGIApp, token: SecretStr | None) -> None:
        self.app = app
        self.token = token.get_secret_value().encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_write(scope):
            return await self.app(scope, receive, send)
        path = scope["path"]
        if self.token is None:
            refusal = problem_json(
                path, 403, "Changes disabled",
                f"quota changes are refused because no admin token is configured; set {TOKEN_SETTING} "
                f"({env_name(TOKEN_SETTING)}) to enable them",
            )
        else:
            scheme, _, credentials = (header(scope, b"authorization") or b"").partition(b" ")
            if scheme.lower() != b"bearer" or not credentials.strip():
                refusal = problem_json(path, 401, "Unauthorized", "send Authorization: Bearer <admin token>", headers={"WWW-Authenticate": "Bearer"})
            elif not hmac.compare_digest(credentials.strip(), self.token):
                refusal = problem_json(path, 403, "Forbidden", "the bearer token is not the admin token")
            else:
                return await self.app(scope, receive, send)
        await refusal(scope, receive, send)


class BodyLimit:
    """A request's body is read here, up to ``max_bytes``, and handed on whole: nothing past
    the limit is ever held (FastAPI would read the body whole anyway)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not has_body(scope):
            return await self.app(scope, receive, send)
        declared = header(scope, b"content-length")  # a malformed or repeated one never gets past the parser
        if declared is not None and int(declared) > self.max_bytes:
            return await self._too_large(scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # nobody left to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return await self._too_large(scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # a disconnect, for whoever waits for one
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request body is larger than {self.max_bytes} bytes ({BODY_LIMIT_SETTING})"
        await problem_json(scope["path"], 413, "Content too large", detail)(scope, receive, send)


class HeadAsGet:
    """HEAD on every GET endpoint (RFC 9110 9.3.2): the GET's status and headers, no body.
    FastAPI's routes answer GET only; this way every one of them, the conditional GETs
    included, answers HEAD the same way."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            return await self.app(scope, receive, send)

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, without_body)
