"""Access to the service state from route handlers."""

from __future__ import annotations

from fastapi import Request

from app.observer import Observer


async def get_observer(request: Request) -> Observer:
    # async: a plain function dependency would be run on the thread pool for every request
    return request.app.state.observer
