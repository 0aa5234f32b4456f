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
CPU. Served from the bytes, an answer still costs a millisecond or so of the event loop, which
every shim's poll shares: each client address gets them at a pace (``ReadPace``), a client
asking faster waits for its turn, and one whose turn is further off than MAX_PACE_DELAY_SECONDS
gets 429. Requests with the node or admin token are not paced."""

from __future__ import annotations

import gzip
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel

from app.server.publishing import GZIP_MIN_BYTES, weak_etag

if TYPE_CHECKING:
    from app.decision.decider import ThrottleDecider
    from app.server.state import ServiceState

# Candidates kept per view version: an operator tries a few; a flood of others is budgeted.
MAX_WHAT_IF_ANSWERS = 16
# New what-if candidates may take this share of the event loop's time, in bursts of at most
# WHAT_IF_BURST_SECONDS (about four answers at 1,000 brokers x 12 log dirs).
WHAT_IF_SHARE = 0.1
WHAT_IF_BURST_SECONDS = 1.0
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


def rendered(model: BaseModel, changes_at: float | None) -> Rendered:
    body = model.model_dump_json().encode()
    gzipped = gzip.compress(body, compresslevel=1, mtime=0) if len(body) >= GZIP_MIN_BYTES else None
    return Rendered(body, gzipped, weak_etag(body), changes_at)


class WhatIfBudget:
    """A bucket of event loop seconds: filled at ``share`` of a second per second up to
    ``burst`` seconds; each new candidate's computation takes what it cost."""

    def __init__(self, share: float = WHAT_IF_SHARE, burst: float = WHAT_IF_BURST_SECONDS, clock: Callable[[], float] = time.perf_counter) -> None:
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
        self, rate: float = READS_PER_SECOND, burst: int = READ_BURST, max_delay: float = MAX_PACE_DELAY_SECONDS, clock: Callable[[], float] = time.monotonic
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
    def __init__(self, budget: WhatIfBudget | None = None, pace: ReadPace | None = None) -> None:
        self.budget = budget or WhatIfBudget()
        self.pace = pace or ReadPace()
        self._version: tuple[object, ...] = ()
        self._held: tuple[object, ...] = ()  # keeps the objects whose ids make the version alive
        self._volumes: Rendered | None = None
        self._what_if: OrderedDict[str, Rendered] = OrderedDict()

    def _current_version(self, state: ServiceState, now: float) -> None:
        """Forget every answer when what they show has changed since they were rendered."""
        latest_round, step = state.decider.latest_round, state.decider.view_at(now)
        version = (id(latest_round), id(step), state.node_report_rate.taken, state.decisions.current().etag)
        if version != self._version:
            self._version, self._held = version, (latest_round, step)
            self._volumes = None
            self._what_if.clear()

    def volumes(self, state: ServiceState, render: Callable[[float], tuple[BaseModel, float | None]]) -> Rendered:
        """The /volumes answer; ``render(now)`` gives the view and when it changes by itself."""
        now = state.clock()
        self._current_version(state, now)
        if self._volumes is None or _passed(self._volumes.changes_at, now):
            self._volumes = rendered(*render(now))
        return self._volumes

    def what_if(self, state: ServiceState, candidate: str, render: Callable[[float], tuple[BaseModel, float | None]]) -> Rendered | int:
        """The what-if answer for ``candidate`` (its validated body, as JSON), or the seconds to
        wait when it is new and the budget is spent."""
        now = state.clock()
        self._current_version(state, now)
        answer = self._what_if.get(candidate)
        if answer is not None and not _passed(answer.changes_at, now):
            self._what_if.move_to_end(candidate)
            return answer
        wait = self.budget.retry_after()
        if wait is not None:
            return wait
        started = time.perf_counter()
        answer = rendered(*render(now))
        self.budget.spend(time.perf_counter() - started)
        self._what_if[candidate] = answer
        if len(self._what_if) > MAX_WHAT_IF_ANSWERS:
            self._what_if.popitem(last=False)
        return answer


def _passed(instant: float | None, now: float) -> bool:
    return instant is not None and now > instant


def node_reports_change_at(decider: ThrottleDecider, now: float) -> float | None:
    """When the node view changes by itself: the first of its reports to expire."""
    return min((v.expires_at for v in decider.metadata.at(now).volumes), default=None)


def earliest(*instants: float | None) -> float | None:
    known = [t for t in instants if t is not None]
    return min(known) if known else None
