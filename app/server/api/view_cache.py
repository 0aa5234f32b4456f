"""The answers whose size grows with the cluster (GET /volumes, POST /what-if), rendered at most
once per change of what they show and served as bytes from then on.

At 1,000 brokers x 12 log dirs one such answer is about 5 MB and a third of a second of CPU to
build; anyone may ask for it, and asking again must not cost that again. What they show
changes with a round (a new view of the cluster), a node's report, the published decision
(its ETag: the factor, the state, the enforcement), and by itself when an observation or a
report expires or the factor's validity ends. Between those the rendered bytes are served, so
``age_seconds`` counts to ``rendered_at``, the instant the answer was rendered.

A what-if answer is kept per candidate (the whole validated body); a candidate not seen since
the last change is computed within a budget of the event loop's time (``WhatIfBudget``), so a
client sending a new candidate every time gets 429 with Retry-After rather than the service's
CPU. When the view changes faster than its answers can be afforded (1,000 nodes reporting every
few seconds change it hundreds of times a second), the answers kept are served until rendering
them again is: their ``rendered_at`` says which moment they show. Served from the bytes, an answer still costs a millisecond or so of the event loop, which
every shim's poll shares: each client address gets them at a pace (``ReadPace``), a client
asking faster waits for its turn, and one whose turn is further off than MAX_PACE_DELAY_SECONDS
gets 429. Requests with the node or admin token are not paced."""

from __future__ import annotations

import gzip
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pydantic import BaseModel

from app.server.runtime.publishing import GZIP_MIN_BYTES, weak_etag

if TYPE_CHECKING:
    from app.decision.view import DecisionView
    from app.server.runtime.service import Service

# Candidates kept per view version: an operator tries a few; a flood of others is budgeted.
MAX_WHAT_IF_ANSWERS = 16
# New what-if candidates may take this share of the event loop's time, in bursts of at most
# WHAT_IF_BURST_SECONDS (about four answers at 1,000 brokers x 12 log dirs).
WHAT_IF_SHARE = 0.1
WHAT_IF_BURST_SECONDS = 1.0
# An answer that no longer shows the view is rendered again only once the time since its
# rendering is this many times what the rendering cost: with 1,000 nodes reporting every few
# seconds the view changes hundreds of times a second, and a poller must not have it rebuilt
# each time (at 1,000 brokers x 12 log dirs: at most every 9 s, each rendering holding the event
# loop for 0.3 s).
RERENDER_AFTER_COST = 30.0
# Renderings cheaper than this are always done again at once (a small cluster's view is exact).
CHEAP_RENDER_SECONDS = 0.005
# Large answers per client address: READS_PER_SECOND, in bursts of READ_BURST.
READS_PER_SECOND = 20.0
READ_BURST = 40
MAX_PACE_DELAY_SECONDS = 5.0
# Client addresses remembered at once; past it, those with no turn pending are forgotten.
MAX_PACED_CLIENTS = 10_000


@dataclass(frozen=True, slots=True)
class Rendered:
    body: bytes
    gzipped: bytes | None
    etag: str
    changes_at: float | None  # when what it shows changes by itself, if ever
    version: tuple[object, ...] = ()  # of the view it was rendered from
    cost: float = 0.0  # seconds of the event loop its rendering took
    rendered: float = 0.0  # when (time.perf_counter)


def rendered(model: BaseModel, changes_at: float | None) -> Rendered:
    body = model.model_dump_json().encode()
    gzipped = gzip.compress(body, compresslevel=1, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
    return Rendered(body, gzipped, weak_etag(body), changes_at)


class WhatIfBudget:
    """A bucket of event loop seconds: filled at ``share`` of a second per second up to
    ``burst`` seconds; each new candidate's computation takes what it cost."""

    def __init__(
        self,
        share: float = WHAT_IF_SHARE,
        burst: float = WHAT_IF_BURST_SECONDS,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._share = share
        self._burst = burst
        self._clock = clock
        self._balance = burst
        self._at = clock()

    def retry_after(self) -> int | None:
        """Whole seconds until a computation may run, or None when one may run now."""
        self._refill()
        if self._balance > 0:
            return None
        return max(1, math.ceil(-self._balance / self._share))

    def spend(self, seconds: float) -> None:
        self._refill()
        self._balance -= seconds

    def _refill(self) -> None:
        now = self._clock()
        self._balance = min(self._burst, self._balance + (now - self._at) * self._share)
        self._at = now


class ReadPace:
    """The turn of each client address (a generic cell rate algorithm): a request is due
    1/``rate`` seconds after the previous one, with ``burst`` of them allowed at once."""

    def __init__(
        self,
        rate: float = READS_PER_SECOND,
        burst: int = READ_BURST,
        max_delay: float = MAX_PACE_DELAY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._interval = 1.0 / rate
        self._tolerance = (burst - 1) * self._interval
        self._max_delay = max_delay
        self._clock = clock
        self._due: dict[str, float] = {}  # client -> when its next request would be on time

    def delay(self, client: str) -> float | None:
        """Seconds ``client`` waits for its turn (0: now), or None when it is further off than
        the longest wait (the request is not counted)."""
        now = self._clock()
        due = max(self._due.get(client, now), now)
        wait = max(0.0, due - self._tolerance - now)
        if wait > self._max_delay:
            return None
        if len(self._due) >= MAX_PACED_CLIENTS and client not in self._due:
            self._due = {c: t for c, t in self._due.items() if t > now}
        self._due[client] = due + self._interval
        return wait


class ViewCache:
    def __init__(
        self,
        budget: WhatIfBudget | None = None,
        pace: ReadPace | None = None,
        rerender_after_cost: float = RERENDER_AFTER_COST,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.budget = budget or WhatIfBudget()
        self.pace = pace or ReadPace()
        self._rerender_after_cost = rerender_after_cost
        self._timer = timer
        self._version: tuple[object, ...] = ()
        self._held: tuple[object, ...] = ()  # keeps the objects whose ids make the version alive
        self._volumes: Rendered | None = None
        self._what_if: OrderedDict[str, Rendered] = OrderedDict()

    def _current_version(self, service: Service, now: float) -> tuple[object, ...]:
        """What the answers show now, as identities: the latest round, the decider's view step
        (it ends at each expiry), the reports taken, the published decision's ETag."""
        latest_round, step, reports_taken, etag = service.view_version(now)
        version = (id(latest_round), id(step), reports_taken, etag)
        if version != self._version:
            self._version, self._held = version, (latest_round, step)  # held: their ids stay theirs
        return version

    @staticmethod
    def _shows(answer: Rendered, version: tuple[object, ...], now: float) -> bool:
        return answer.version == version and not _passed(answer.changes_at, now)

    def volumes(
        self, service: Service, render: Callable[[float], tuple[BaseModel, float | None]]
    ) -> Rendered:
        """The /volumes answer; ``render(now)`` gives the view and when it changes by itself.
        One that no longer shows the view is kept until rendering it again is affordable."""
        now = service.clock()
        version = self._current_version(service, now)
        kept = self._volumes
        if kept is None or (not self._shows(kept, version, now) and self._affordable(kept)):
            self._volumes = self._timed(render, now, version)
        assert self._volumes is not None
        return self._volumes

    def what_if(
        self,
        service: Service,
        candidate: str,
        render: Callable[[float], tuple[BaseModel, float | None]],
    ) -> Rendered | int:
        """The what-if answer for ``candidate`` (its validated body, as JSON). Computed when it
        is new or no longer shows the view and the budget allows; else the answer kept, or for a
        new candidate the seconds to wait."""
        now = service.clock()
        version = self._current_version(service, now)
        kept = self._what_if.get(candidate)
        if kept is not None:
            self._what_if.move_to_end(candidate)
            if self._shows(kept, version, now) or not self._affordable(kept):
                return kept
        wait = self.budget.retry_after()
        if wait is not None:
            return kept if kept is not None else wait
        answer = self._timed(render, now, version)
        self.budget.spend(answer.cost)
        self._what_if[candidate] = answer
        if len(self._what_if) > MAX_WHAT_IF_ANSWERS:
            self._what_if.popitem(last=False)
        return answer

    def _affordable(self, kept: Rendered) -> bool:
        return (
            kept.cost < CHEAP_RENDER_SECONDS
            or self._timer() - kept.rendered >= kept.cost * self._rerender_after_cost
        )

    def _timed(
        self,
        render: Callable[[float], tuple[BaseModel, float | None]],
        now: float,
        version: tuple[object, ...],
    ) -> Rendered:
        started = self._timer()
        answer = rendered(*render(now))
        finished = self._timer()
        return replace(answer, version=version, cost=finished - started, rendered=finished)


def _passed(instant: float | None, now: float) -> bool:
    return instant is not None and now > instant


def node_reports_change_at(view: DecisionView, now: float) -> float | None:
    """When the node view changes by itself: the first of its reports to expire."""
    return min((v.expires_at for v in view.metadata_at(now).volumes), default=None)


def earliest(*instants: float | None) -> float | None:
    known = [t for t in instants if t is not None]
    return min(known) if known else None
