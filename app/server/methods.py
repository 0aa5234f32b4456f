"""Which methods each path serves, answered before the token is asked for.

A method a path does not serve is answered 405 with every method it does serve in ``Allow``
(RFC 9110 15.5.6), a method the API serves nowhere on a path it does not know 501; OPTIONS
is answered 204 with ``Allow``. None of them needs the token or leaves an audit line: they
change nothing. The HTTP metrics label such requests' method ``other``, so a client cannot
add series by inventing methods."""

from __future__ import annotations

import re

from starlette.responses import Response
from fastapi import FastAPI
from starlette.routing import Match, Route, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.problems import problem_json

# The methods the API serves anywhere, in the order Allow lists them.
SERVED_METHODS = ("GET", "HEAD", "PUT", "DELETE", "OPTIONS")
OTHER_METHOD = "other"  # the metrics' method label for anything else


def metric_method(method: str) -> str:
    return method if method in SERVED_METHODS else OTHER_METHOD


class AllowedMethods:
    """The methods served on each path of an app: exact paths in a dict, the few with
    parameters by their pattern. The paths are the OpenAPI document's and the app's own
    routes'; what each serves is asked of the app's router, once."""

    def __init__(self, app: FastAPI) -> None:
        templates = set(app.openapi()["paths"]) | {route.path for route in app.routes if isinstance(route, Route)}
        self.exact: dict[str, tuple[str, ...]] = {}
        self.patterns: list[tuple[re.Pattern[str], tuple[str, ...]]] = []
        for template in templates:
            regex, _, convertors = compile_path(template)
            sample = _PARAMETER.sub("x", template)
            allowed = _allow_list({method for method in PROBED_METHODS if _routed(app, sample, method)})
            if convertors:
                self.patterns.append((regex, allowed))
            else:
                self.exact[template] = allowed

    def of(self, path: str) -> tuple[str, ...] | None:
        """The methods served on ``path`` in Allow's order, or None for a path no route serves."""
        allowed = self.exact.get(path)
        if allowed is not None:
            return allowed
        for pattern, methods in self.patterns:
            if pattern.match(path):
                return methods
        return None


_PARAMETER = re.compile(r"\{[^}]*\}")
PROBED_METHODS = ("GET", "PUT", "DELETE", "POST", "PATCH")


def _routed(app: FastAPI, path: str, method: str) -> bool:
    scope = {"type": "http", "path": path, "method": method, "root_path": "", "headers": [], "query_string": b""}
    return any(route.matches(scope)[0] is Match.FULL for route in app.router.routes)


def _allow_list(methods: set[str]) -> tuple[str, ...]:
    served = set(methods) | {"OPTIONS"}
    if "GET" in served:
        served.add("HEAD")  # every GET answers HEAD (admission.HeadAsGet)
    return tuple(method for method in SERVED_METHODS if method in served)


class MethodGate:
    """ASGI middleware: answers OPTIONS and the methods a path does not serve; the routes are
    read from the app on the first request, once every route is installed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.allowed: AllowedMethods | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.allowed is None:
            self.allowed = AllowedMethods(scope["app"])
        method, path = scope["method"], scope["path"]
        allowed = self.allowed.of(path)
        if allowed is None:
            if method in SERVED_METHODS and method != "OPTIONS":
                return await self.app(scope, receive, send)  # answered 404 (or 401 for a write)
            answer = problem_json(path, 404 if method == "OPTIONS" else 501, *_unknown(method))
        elif method == "OPTIONS":
            answer = Response(status_code=204, headers={"Allow": ", ".join(allowed)})
        elif method in allowed:
            return await self.app(scope, receive, send)
        else:
            detail = f"{path} serves {', '.join(allowed)}"
            answer = problem_json(path, 405, "Method not allowed", detail, headers={"Allow": ", ".join(allowed)})
        await answer(scope, receive, send)


def _unknown(method: str) -> tuple[str, str]:
    if method == "OPTIONS":
        return "Not found", "no such resource"
    return "Not implemented", f"the API serves the methods {', '.join(SERVED_METHODS)}"
