"""The routes of one area of the API, registered once: FastAPI documents them all, and the hot
GET endpoints are also served by Starlette directly.

Every broker's shim polls the hot endpoints, so their cost per request matters. FastAPI's route
machinery (dependency solving, parameter models) costs about three times what the whole
handler does; a plain Starlette route placed ahead of it serves the request, and the FastAPI
route with the same endpoint function keeps the OpenAPI document true."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from starlette.routing import Route

from app.server.edge.json_bodies import StrictJsonRoute
from app.server.edge.problems import problem_responses

Endpoint = Callable[[Request], Awaitable[Response]]


class RouteSet:
    def __init__(self, **router_kwargs: Any) -> None:
        # Every JSON body of the API is refused with a key given twice (json_bodies.py), and any
        # request may be answered 503 by a stop that cuts it off (problems.UnexpectedErrors).
        responses = {**problem_responses(503), **router_kwargs.pop("responses", {})}
        self.router = APIRouter(route_class=StrictJsonRoute, responses=responses, **router_kwargs)
        self._hot: list[Route] = []

    def hot_get(self, path: str, **openapi: Any) -> Callable[[Endpoint], Endpoint]:
        """A GET whose endpoint reads the request itself (no parameters resolved by FastAPI)."""

        def register(endpoint: Endpoint) -> Endpoint:
            self.router.add_api_route(path, endpoint, methods=["GET"], **openapi)
            self._hot.append(Route(path, endpoint, methods=["GET"]))
            return endpoint

        return register

    def get(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self.router.get(path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self.router.post(path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self.router.put(path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self.router.delete(path, **kwargs)

    def install(self, app: FastAPI) -> None:
        app.include_router(self.router)
        # Starlette matches routes in order: the plain routes answer before the documented ones.
        app.router.routes[0:0] = self._hot
