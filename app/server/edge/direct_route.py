"""A hot write route served without FastAPI's request machinery: the nodes' volume reports.

Every node reports its volumes once per poll interval and on change (PUT
/nodes/{node_id}/volumes): at 1,000 nodes that is the service's most frequent request. FastAPI
spends most of a report's CPU on what it does for any route (routing over every route, the
exit stack, solving the dependencies, parsing the JSON into Python objects and validating
those), more than the report's own work. ``DirectRoute`` serves a request of one route
directly: the path parameter, the JSON body checked for duplicate keys and validated from its
bytes by the route's own body model (pydantic-core's JSON parser), the route's own endpoint
called with them, and its answer or its ``ProblemError`` answered as the app answers them.

Only a request that takes the plain way is served here: the route's method, its path with a
canonical decimal parameter in range, no query string, a JSON content type, a body that the
model takes. Anything else (and so every error the API answers 400, 404, 422) goes on to the
app as it came, body and all, and is answered there exactly as before; what gets past here
has passed the same middleware (token, body limit, audit, methods, HTTP metrics), which sit
outside. The route's dependencies must be ones that need nothing of such a request (declared
with ``passive_dependencies``); a route with any other is refused at start-up."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from annotated_types import Ge, Le
from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.edge.json_bodies import keys_counted_once, refuse_duplicate_keys
from app.server.edge.problems import ProblemError

JSON_TYPE = b"application/json"


class DirectRoute:
    """ASGI middleware, innermost: serves ``method path`` straight from its endpoint.

    ``path`` has one integer parameter (``{name}``), its bounds (``ge``, ``le``) read from the
    route; ``passive_dependencies`` are the route's dependencies (their callables) that need
    nothing of a plain request and are skipped."""

    def __init__(
        self,
        app: ASGIApp,
        method: str,
        path: str,
        passive_dependencies: Iterable[Callable[..., Any]] = (),
    ) -> None:
        self.app = app
        self.method = method
        self.template = path
        self.prefix, _, self.suffix = path_template(path)
        self.served = 0  # requests served here, not by the app (for tests and diagnostics)
        self.passive = frozenset(passive_dependencies)
        self._served: DirectlyServed | None = None

    def _route(self, app: FastAPI) -> DirectlyServed:
        return served_route(app, self.method, self.template, self.passive)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != self.method
            or scope["query_string"]
            or not scope["path"].startswith(self.prefix)
            or not scope["path"].endswith(self.suffix)
        ):
            return await self.app(scope, receive, send)
        served = self._served
        if served is None:
            served = self._served = self._route(scope["app"])
        value = served.path_value(
            scope["path"][len(self.prefix) : len(scope["path"]) - len(self.suffix)]
        )
        if value is None or _content_type(scope) != JSON_TYPE:
            return await self.app(scope, receive, send)
        message = await receive()
        body = message.get("body", b"")
        if message["type"] != "http.request" or message.get("more_body", False):
            return await self.app(scope, _replaying(message, receive), send)
        parsed = served.parse(body)
        if parsed is None:
            return await self.app(scope, _replaying(message, receive), send)
        self.served += 1
        await served.answer(scope, receive, send, value, parsed)


def served_route(
    app: FastAPI, method: str, path: str, passive_dependencies: Iterable[Callable[..., Any]] = ()
) -> DirectlyServed:
    """The app's one route of ``method path`` (``path`` with one integer parameter), to be
    served directly; refused (RuntimeError) when it needs more than a direct route gives."""
    routes = [
        route
        for route in app.routes
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ())
    ]
    if len(routes) != 1:
        raise RuntimeError(f"{method} {path}: {len(routes)} routes, not one")
    return DirectlyServed(routes[0], frozenset(passive_dependencies))


def path_template(path: str) -> tuple[str, str, str]:
    """A path of one parameter as (what comes before it, its name, what comes after it)."""
    prefix, _, rest = path.partition("{")
    name, _, suffix = rest.partition("}")
    return prefix, name, suffix


class DirectlyServed:
    """The route served directly: its body model, endpoint and parameter names."""

    def __init__(self, route: APIRoute, passive: frozenset[Callable[..., Any]]) -> None:
        self.prefix, parameter, self.suffix = path_template(route.path)
        dependant = route.dependant
        others = [d.call for d in dependant.dependencies if d.call not in passive]
        bodies = dependant.body_params
        paths = [p.name for p in dependant.path_params]
        if (
            others
            or len(bodies) != 1
            or paths != [parameter]
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.request_param_name is None
        ):
            raise RuntimeError(
                f"{route.path} cannot be served directly: it needs more than its path parameter, "
                f"one JSON body and the request ({others}, {dependant.query_params})"
            )
        field = dependant.path_params[0].field_info
        if field.annotation is not int:
            raise TypeError(f"{route.path}: its path parameter is not an int")
        self.low = max(
            [_bound(m.ge) for m in field.metadata if isinstance(m, Ge)], default=-(2**63)
        )
        self.high = min(
            [_bound(m.le) for m in field.metadata if isinstance(m, Le)], default=2**63 - 1
        )
        model = bodies[0].field_info.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{route.path}: its body is not a model")
        self.route = route
        self.model: type[BaseModel] = model
        self.body_name = bodies[0].name
        self.parameter = parameter
        self.request_name = dependant.request_param_name
        self.endpoint = route.endpoint
        if not inspect.iscoroutinefunction(self.endpoint):
            raise RuntimeError(f"{route.path}: its endpoint is not a coroutine function")

    def path_value(self, text: str) -> int | None:
        """The path parameter's value written as ``text`` when it is a canonical decimal (ASCII
        digits, no sign, no leading zero) within the route's bounds; otherwise None (the app
        judges the request)."""
        if not (text.isdigit() and text.isascii() and (text == "0" or text[0] != "0")):
            return None
        value = int(text)
        return value if self.low <= value <= self.high else None

    def parse(self, body: bytes) -> BaseModel | None:
        """The body as the route's model, or None when the app must judge it (a duplicate key,
        not JSON, not the model)."""
        try:
            parsed = self.model.model_validate_json(body)
            counted = getattr(parsed, "json_keys", None)
            if counted is None or not keys_counted_once(body, counted()):
                refuse_duplicate_keys(body)
            return parsed
        except (ProblemError, ValidationError, ValueError):
            return None

    async def answer(
        self, scope: Scope, receive: Receive, send: Send, value: int, parsed: BaseModel
    ) -> None:
        scope["route"] = self.route  # as the router records it (the HTTP metrics read it)
        scope["path_params"] = {self.parameter: str(value)}
        request = Request(scope, receive)
        try:
            response = await self.endpoint(
                **{self.request_name: request, self.body_name: parsed, self.parameter: value}
            )
        except Exception as exc:
            handler = _handler(scope["app"], exc)
            if handler is None:
                raise  # answered further out, as an error the app has no handler for
            response = await handler(request, exc)
        await response(scope, receive, send)


def _handler(app: FastAPI, exc: Exception) -> Callable[..., Any] | None:
    """The app's handler of ``exc``, as Starlette's exception middleware finds it (the catch-all
    of ``Exception`` excepted: the server error middleware further out runs that one)."""
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        if cls in app.exception_handlers:
            return app.exception_handlers[cls]
    return None


def _bound(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"a path parameter's bound that is not an int: {value!r}")
    return value


def _content_type(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"content-type":
            return bytes(value).lower()
    return None


def _replaying(first: Message, receive: Receive) -> Receive:
    """``receive`` with ``first`` handed out again first."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return first

    return replay
