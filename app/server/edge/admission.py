"""What a request passes before a route sees it.

A write (any method but GET and HEAD, except the POSTs that only judge their body) needs the admin token, checked from its headers before
anything reads its body; a node's report of its volumes (PUT /nodes/{node_id}/volumes) needs
the node token instead, and its body is held to NODE_REPORT_MAX_BYTES: a client without the token learns nothing about bodies, and its
body costs no memory. Then its body must fit the limit: a declared Content-Length over it is
refused at once, a chunked body is counted as it arrives and refused at the limit. A HEAD is
answered as its GET, without the body.

These are plain ASGI middleware: FastAPI reads and parses a body before it runs a route's
dependencies, so neither check can live in a route."""

from __future__ import annotations

import hmac

from pydantic import SecretStr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.edge.problems import problem_json
from app.settings.model import env_name, property_name

READ_METHODS = frozenset({"GET", "HEAD"})
# POSTs that change nothing: a body to judge, no effect (no token, no audit line).
READ_ONLY_POSTS = frozenset({"/what-if"})
TOKEN_SETTING = property_name("admin_token")
NODE_TOKEN_SETTING = property_name("node_token")
BODY_LIMIT_SETTING = property_name("http_max_body_bytes")
NODE_PATH_PREFIX = "/nodes/"
# A report of 64 directories with long paths is about 10 KiB; nothing larger is read.
NODE_REPORT_MAX_BYTES = 16 * 1024


def has_body(scope: Scope) -> bool:
    return scope["type"] == "http" and scope["method"] not in READ_METHODS


def is_write(scope: Scope) -> bool:
    return has_body(scope) and not (scope["method"] == "POST" and scope["path"] in READ_ONLY_POSTS)


def is_node_report(scope: Scope) -> bool:
    """A request under /nodes/: the nodes' own path, with its own token and body limit."""
    return scope["type"] == "http" and scope["path"].startswith(NODE_PATH_PREFIX)


def _bearer(scope: Scope) -> bytes | None:
    return bearer_credentials(scope["headers"])


def bearer_credentials(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The credentials of ``Authorization: Bearer <credentials>`` in a request's headers (names
    in lower case, as the server gives them), or None."""
    return bearer_of(next((value for name, value in headers if name == b"authorization"), b""))


def bearer_of(value: bytes) -> bytes | None:
    """The credentials of an ``Authorization`` header's value ``Bearer <credentials>``, or None."""
    scheme, _, credentials = value.partition(b" ")
    if scheme.lower() != b"bearer" or not credentials.strip():
        return None
    return credentials.strip()


def header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


class AdminToken:
    """Writes need ``Authorization: Bearer <admin token>``, node reports ``Bearer <node
    token>`` (each compared in constant time; the two are never interchangeable)."""

    def __init__(
        self, app: ASGIApp, token: SecretStr | None, node_token: SecretStr | None = None
    ) -> None:
        self.app = app
        self.token = token.get_secret_value().encode() if token is not None else None
        self.node_token = node_token.get_secret_value().encode() if node_token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_write(scope):
            return await self.app(scope, receive, send)
        if is_node_report(scope):
            return await self._node_report(scope, receive, send)
        path = scope["path"]
        if self.token is None:
            refusal = problem_json(
                path,
                403,
                "Changes disabled",
                f"quota changes are refused because no admin token is configured; set {TOKEN_SETTING} "
                f"({env_name(TOKEN_SETTING)}) to enable them",
            )
        else:
            credentials = _bearer(scope)
            if credentials is None:
                refusal = problem_json(
                    path,
                    401,
                    "Unauthorized",
                    "send Authorization: Bearer <admin token>",
                    headers={"WWW-Authenticate": "Bearer"},
                )
            elif not hmac.compare_digest(credentials, self.token):
                refusal = problem_json(
                    path, 403, "Forbidden", "the bearer token is not the admin token"
                )
            else:
                return await self.app(scope, receive, send)
        await refusal(scope, receive, send)

    async def _node_report(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if self.node_token is None:
            # As if the path did not exist: a service without the node token takes no reports.
            refusal = problem_json(
                path,
                404,
                "Not found",
                f"this service takes no node reports; set {NODE_TOKEN_SETTING} ({env_name(NODE_TOKEN_SETTING)}) to take them",
            )
        else:
            credentials = _bearer(scope)
            if credentials is not None and hmac.compare_digest(credentials, self.node_token):
                return await self.app(scope, receive, send)
            detail = (
                "send Authorization: Bearer <node token>"
                if credentials is None
                else "the bearer token is not the node token"
            )
            refusal = problem_json(
                path, 401, "Unauthorized", detail, headers={"WWW-Authenticate": "Bearer"}
            )
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
        max_bytes = (
            min(self.max_bytes, NODE_REPORT_MAX_BYTES) if is_node_report(scope) else self.max_bytes
        )
        declared = header(
            scope, b"content-length"
        )  # a malformed or repeated one never gets past the parser
        if declared is not None and int(declared) > max_bytes:
            return await self._too_large(scope, receive, send, max_bytes)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # nobody left to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_bytes:
                return await self._too_large(scope, receive, send, max_bytes)
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

    async def _too_large(self, scope: Scope, receive: Receive, send: Send, max_bytes: int) -> None:
        limit = BODY_LIMIT_SETTING if max_bytes == self.max_bytes else "a node report's limit"
        detail = f"the request body is larger than {max_bytes} bytes ({limit})"
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
