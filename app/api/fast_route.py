"""Routes for the hot endpoints: served by Starlette directly, documented by FastAPI.

Every broker's shim polls these, so their cost per request matters. FastAPI's route
machinery (dependency solving, parameter models) costs about three times what the whole
handler does; a plain Starlette route placed ahead of it serves the request, and an
equivalent FastAPI route with the same endpoint function keeps the OpenAPI document true."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from starlette.routing import Route

Endpoint = Callable[[Request], Awaitable[Response]]


class FastRoutes:
    def __init__(self, **router_kwargs: Any) -> None:
        self.router = APIRouter(**router_kwargs)
        self.routes: list[Route] = []

    def get(self, path: str, **openapi: Any) -> Callable[[Endpoint], Endpoint]:
        def register(endpoint: Endpoint) -> Endpoint:
            self.router.add_api_route(path, endpoint, methods=["GET"], **openapi)
            self.routes.append(Route(path, endpoint, methods=["GET"]))
            return endpoint

        return register

    def install(self, app: FastAPI) -> None:
        app.include_router(self.router)
        # Starlette matches routes in order: the plain routes answer before the documented ones.
        app.router.routes[0:0] = self.routes
