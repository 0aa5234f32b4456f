"""The published decision: encoded once per change, served as bytes with a strong ETag.

Route handlers only read from here; the observer publishes after each round. Expiry is
judged when read: a read past the decision's ``next_change_at`` re-judges and republishes.
Long-poll waiters wake on any change, including such an expiry. Everything runs on the
event loop thread, so replacing the published value is atomic for readers."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from app.clock import Clock

Model = TypeVar("Model", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Published(Generic[Model]):
    model: Model
    body: bytes
    etag: str
    expires_at: float | None  # when the content changes by itself, if ever

    @property
    def etag_header(self) -> tuple[bytes, bytes]:
        return (b"etag", self.etag.encode())


def strong_etag(body: bytes) -> str:
    # A hash of the bytes, not a counter: replicas and restarts agree on the same content.
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


class Board(Generic[Model]):
    """Holds the current representation of one resource and wakes long-poll waiters."""

    def __init__(self, render: Callable[[float], tuple[Model, float | None]], clock: Clock) -> None:
        self._render = render
        self._clock = clock
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[Published[Model], Published[Model] | None], None]] = []
        self._current: Published[Model] | None = None

    def on_change(self, listener: Callable[[Published[Model], Published[Model] | None], None]) -> None:
        self._listeners.append(listener)

    def refresh(self) -> Published[Model]:
        model, expires_at = self._render(self._clock())
        body = model.model_dump_json().encode()
        etag = strong_etag(body)
        previous = self._current
        if previous is not None and previous.etag == etag:
            if previous.expires_at != expires_at:
                self._current = Published(previous.model, previous.body, etag, expires_at)
            return self._current
        self._current = Published(model, body, etag, expires_at)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for listener in self._listeners:
            listener(self._current, previous)
        return self._current

    def current(self) -> Published[Model]:
        published = self._current
        if published is None or (published.expires_at is not None and self._clock() > published.expires_at):
            return self.refresh()
        return published

    async def wait_for_change(self, etag: str | None, timeout: float) -> Published[Model]:
        """Return as soon as the representation differs from ``etag``, or after ``timeout``."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            published = self.current()
            remaining = deadline - asyncio.get_running_loop().time()
            if published.etag != etag or remaining <= 0:
                return published
            if published.expires_at is not None:
                remaining = min(remaining, max(0.0, published.expires_at - self._clock()) + 0.001)
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                pass
