"""Access to the service state from route handlers."""

from __future__ import annotations

from fastapi import Request

from app.observer import Observer


def get_observer(request: Request) -> Observer:
    return request.app.state.observer
