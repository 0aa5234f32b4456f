"""What a route reaches, in one place: the running service's facade
(app/server/runtime/service.py) and the API's own cache of the large answers."""

from __future__ import annotations

from fastapi import Request

from app.server.api.view_cache import ViewCache
from app.server.runtime.service import Service


def service_state(request: Request) -> Service:
    return request.app.state.service


def view_cache(request: Request) -> ViewCache:
    return request.app.state.views
