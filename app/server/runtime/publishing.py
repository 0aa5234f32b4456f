"""Published representations: encoded once per round or change, served as bytes.

The ETag covers what a client acts on (the factor and state, the quota table), not what moves
every round (``computed_at``, ``valid_until``, the volumes' figures): it is a weak ETag (RFC
9110 8.8.1), equal for representations that are equivalent for a client. Long-poll waiters
wake only when it changes (or the client's copy is about to lapse), so an idle cluster costs a
polling client one 304 per wait, or per validity duration when that is shorter; the
validity travels on every answer in headers (``Throttle-Valid-Until`` and ``Cache-Control``
``max-age``), so a client renews its copy's validity on a 304.

The observation loop publishes after each round and at each instant the decision changes by
itself (an expiry). A read past that instant judges the expiry itself and serves the new
representation: expiry is judged when read, and a read has no other effect (no log line, no
metric). Everything runs on the event loop thread, so replacing the published value is atomic
for readers."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel

from app.clock import Clock

Model = TypeVar("Model", bound=BaseModel)

# How long before a long-polling client's copy lapses the service answers with a renewal.
RENEW_MARGIN = 1.0


@dataclass(frozen=True, slots=True)
class Rendering(Generic[Model]):
    """What a representation is at one moment, and what its ETag covers."""

    model: Model
    etag_basis: bytes  # the part a client acts on
    valid_until: float | None  # when the client's copy expires unless renewed; None: never
    changes_at: float | None  # when the representation changes by itself, if ever


# Bodies at least this large are also kept gzipped (level 1: a 1.6 MB quota table of 10,000
# overrides becomes 45 KB in 4 ms), for the clients that accept it: a change reaches a thousand
# polling shims as 45 MB instead of 1.6 GB.
GZIP_MIN_BYTES = 8192


@dataclass(frozen=True, slots=True)
class Published(Generic[Model]):
    model: Model
    body: bytes
    etag: str
    valid_until: float | None
    expires_at: float | None  # when the content changes by itself, if ever
    gzipped: bytes | None = None  # the body gzipped, when it is large enough to be worth it

    @property
    def etag_header(self) -> tuple[bytes, bytes]:
        return (b"etag", self.etag.encode())


def weak_etag(basis: bytes) -> str:
    # A hash of what the client acts on, not a counter: replicas and restarts agree.
    return 'W/"' + hashlib.blake2b(basis, digest_size=12).hexdigest() + '"'


class Publication(Generic[Model]):
    """The current representation of one resource, as ``render(now)`` gives it."""

    def __init__(self, render: Callable[[float], Rendering[Model]], clock: Clock) -> None:
        self._render = render
        self._clock = clock
        self._changed = asyncio.Event()  # set when what the ETag covers changes
        self._published = asyncio.Event()  # set on every publication (a renewal too)
        self._current: Published[Model] | None = None
        self._released = False  # the service is stopping: no wait holds a request any longer

    def publish(self) -> Published[Model]:
        """Render now; wake the long-poll waiters if what the ETag covers changed."""
        rendering = self._render(self._clock())
        previous = self._current
        etag = weak_etag(rendering.etag_basis)
        body = rendering.model.model_dump_json().encode()
        gzipped = (
            gzip.compress(body, compresslevel=1, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
        )
        self._current = Published(
            rendering.model, body, etag, rendering.valid_until, rendering.changes_at, gzipped
        )
        if previous is None or previous.etag != etag:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
        published, self._published = self._published, asyncio.Event()
        published.set()
        return self._current

    def release(self) -> None:
        """Answer every wait now, and every later one at once (the service is stopping)."""
        self._released = True
        self._changed.set()
        self._published.set()

    def current(self) -> Published[Model]:
        published = self._current
        if published is None or (
            published.expires_at is not None and self._clock() > published.expires_at
        ):
            return self.publish()
        return published

    # The timeout is the long-poll's wait, after which the current representation is the answer
    # (not an error), and the renewal deadlines below are computed from it.
    async def wait_for_change(self, etag: str | None, timeout: float) -> Published[Model]:  # noqa: ASYNC109
        """Return as soon as the representation differs from ``etag``, or after ``timeout``,
        or, when the client's copy is about to lapse, as soon as a later validity is published.

        The client holds the ``valid_until`` of the representation it matched; a wait longer
        than what is left of it would let its copy expire while the service renews it every
        round (and a shim would apply its fallback). So from ``RENEW_MARGIN`` before that
        instant the waiter answers with the first renewal, a 304 whose headers carry it. Without
        a renewal the copy lapses with the representation itself, which changes the ETag."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        held_until = self.current().valid_until
        renew_at = (
            None
            if held_until is None
            else held_until - min(RENEW_MARGIN, max(0.0, held_until - self._clock()) / 2)
        )
        while True:
            published = self.current()
            remaining = deadline - loop.time()
            if published.etag != etag or remaining <= 0 or self._released:
                return published
            now = self._clock()
            renewing = renew_at is not None and now >= renew_at
            if renewing and published.valid_until != held_until:
                return published
            if published.expires_at is not None:
                remaining = min(remaining, max(0.0, published.expires_at - now) + 0.001)
            if renew_at is not None and not renewing:
                remaining = min(remaining, renew_at - now)
            event = self._published if renewing else self._changed
            # In this task, not a task of its own as asyncio.wait_for makes: a publication
            # wakes a thousand long-polls, each one loop pass sooner and one task cheaper.
            try:
                async with asyncio.timeout(remaining):
                    await event.wait()
            except TimeoutError:
                pass
