"""Run a test scenario against an app in-process: lifespan, then an httpx client over ASGI."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from fastapi import FastAPI

from app.clock import ManualClock


def run_scenario(app: FastAPI, clock: ManualClock, scenario: Callable[..., Awaitable[Any]]) -> Any:
    """Call ``scenario(client, observer, clock)`` while the app is up; return its result."""

    async def main() -> Any:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                return await scenario(client, app.state.service.loop, clock)

    return asyncio.run(main())
