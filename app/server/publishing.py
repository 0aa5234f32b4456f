"""Published representations: encoded once per change, served as bytes with a strong ETag.

The observation loop publishes after each round and at each instant the decision changes by
itself (an expiry). A read past that instant judges the expiry itself and serves the new
representation: expiry is judged when read, and a read has no other effect (no log line, no
metric). Long-poll waiters wake on any change. Everything runs on the event loop thread, so
replacing the published value is atomic for readers."""

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


class Publication(Generic[Model]):
    """The current representation of one resource; ``render(now)`` gives the model and the
    instant it changes by itself."""

    def __init__(self, render: Callable[[float], tuple[Model, float | None]], clock: Clock) -> None:
        self._render = render
        self._clock = clock
        self._changed = asyncio.Event()
        self._current: Published[Model] | None = None

    def publish(self) -> Published[Model]:
        """Render now; wake the long-poll waiters if the representation changed."""
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
        return self._current

    def current(self) -> Published[Model]:
        published = self._current
        if published is None or (published.expires_at is not None and self._clock() > published.expires_at):
            return self.publish()
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
