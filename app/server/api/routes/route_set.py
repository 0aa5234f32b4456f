"""The routes of one area of the API, registered once: FastAPI documents them all, and the hot
GET endpoints are also served by Starlette directly.

Every broker's shim polls the hot endpoints, so their cost per request matters. FastAPI's route
machinery (dependency solving, parameter models) costs about three times what the whole
handler does; a plain Starlette route placed ahead of it serves the request, and the FastAPI
route with the same endpoint function keeps the OpenAPI document true."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from starlette.routing import Route

from app.server.edge.json_bodies import StrictJsonRoute
from app.server.edge.problems import problem_responses

Endpoint = Callable[[Request], Awaitable[Response]]


class RouteSet:
    """Collects an area's routes; ``install`` adds each to the app's own router (no included
    router in between: FastAPI resolves an included router's routes on every request, and so
    does the HTTP metrics' handler lookup, at about a tenth of a hot request's cost)."""

    def __init__(self, tags: list[str]) -> None:
        self._tags = tags
        # Every JSON body of the API is refused with a key given twice (json_bodies.py), and any
        # request may be answered 503 by a stop that cuts it off (problems.UnexpectedErrors).
        self._responses = problem_responses(503)
        self._routes: list[tuple[str, Callable[..., Any], dict[str, Any]]] = []
        self._hot: list[Route] = []

    def _route(
        self, path: str, methods: list[str], options: dict[str, Any]
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(endpoint: Callable[..., Any]) -> Callable[..., Any]:
            self._routes.append((path, endpoint, {**options, "methods": methods}))
            return endpoint

        return register

    def hot_get(self, path: str, **openapi: Any) -> Callable[[Endpoint], Endpoint]:
        """A GET whose endpoint reads the request itself (no parameters resolved by FastAPI)."""

        def register(endpoint: Endpoint) -> Endpoint:
            self._routes.append((path, endpoint, {**openapi, "methods": ["GET"]}))
            self._hot.append(Route(path, endpoint, methods=["GET"]))
            return endpoint

        return register

    def get(self, path: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._route(path, ["GET"], options)

    def post(self, path: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._route(path, ["POST"], options)

    def put(self, path: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._route(path, ["PUT"], options)

    def delete(
        self, path: str, **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._route(path, ["DELETE"], options)

    def install(self, app: FastAPI) -> None:
        for path, endpoint, options in self._routes:
            given = dict(options)  # the set is installed in every app made from it
            responses = {**self._responses, **given.pop("responses", {})}
            app.router.add_api_route(
                path,
                endpoint,
                tags=list(self._tags),
                responses=responses,
                route_class_override=StrictJsonRoute,
                **given,
            )
        # Starlette matches routes in order: the plain routes answer before the documented ones.
        app.router.routes[0:0] = self._hot
