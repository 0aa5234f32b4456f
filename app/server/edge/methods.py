"""Which methods each path serves, answered before the token is asked for.

A method a path does not serve is answered 405 with every method it does serve in ``Allow``
(RFC 9110 15.5.6), a method the API serves nowhere on a path it does not know 501; OPTIONS
is answered 204 with ``Allow``. None of them needs the token or leaves an audit line: they
change nothing. The HTTP metrics label such requests' method ``other``, so a client cannot
add series by inventing methods."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.edge.problems import problem_json

# The methods the API serves anywhere, in the order Allow lists them.
SERVED_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS")
OTHER_METHOD = "other"  # the metrics' method label for anything else


def metric_method(method: str) -> str:
    return method if method in SERVED_METHODS else OTHER_METHOD


class AllowedMethods:
    """The methods served on a path, as the app's router would route them, remembered for the
    paths asked most recently (a name in a path makes them unbounded)."""

    def __init__(self, routes: Sequence[BaseRoute], remembered: int = 1024) -> None:
        self.routes = [
            route for route in routes if not isinstance(route, Mount)
        ]  # a mount takes any method
        self.of = functools.lru_cache(maxsize=remembered)(self._of)

    def _of(self, path: str) -> tuple[str, ...] | None:
        """The methods served on ``path`` in Allow's order, or None for a path no route serves."""
        served = {method for method in PROBED_METHODS if self._routed(path, method)}
        return _allow_list(served) if served else None

    def _routed(self, path: str, method: str) -> bool:
        scope = {
            "type": "http",
            "path": path,
            "method": method,
            "root_path": "",
            "headers": [],
            "query_string": b"",
        }
        return any(route.matches(scope)[0] is Match.FULL for route in self.routes)


PROBED_METHODS = (
    "GET",
    "POST",
    "PUT",
    "DELETE",
)  # what the API serves anywhere (HEAD and OPTIONS follow)


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
            self.allowed = AllowedMethods(scope["app"].routes)
        method, path = scope["method"], scope["path"]
        allowed = self.allowed.of(path)
        answer: Response
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
            answer = problem_json(
                path, 405, "Method not allowed", detail, headers={"Allow": ", ".join(allowed)}
            )
        await answer(scope, receive, send)


def _unknown(method: str) -> tuple[str, str]:
    if method == "OPTIONS":
        return "Not found", "no such resource"
    return "Not implemented", f"the API serves the methods {', '.join(SERVED_METHODS)}"
