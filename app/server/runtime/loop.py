"""The observation loop: every check interval a round, then its effects, in one direction.

A round runs on a worker thread (the Kafka client blocks); its result is applied on the event
loop: the decider judges it, the metrics and the history record it, the changes are logged
once, and the publications are refreshed. Between rounds the loop wakes at each instant the
decision changes by itself (an observation or the factor expiring), so such a change is logged
and published when it happens. The loop is built with its enforcement source and its publisher
(app/server/runtime/publisher.py), which the node-report path (app/server/runtime/node_intake.py)
notifies too; nothing published calls back into the loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

from app.clock import Clock
from app.decision.decider import ThrottleDecider
from app.decision.decision import Decision
from app.decision.horizon import AppliedFactor
from app.history.writer import HistoryWriter
from app.observation.changes import ClusterChanges
from app.observation.model import ObservationRound
from app.observation.source import VolumeSource
from app.server.runtime.enforcement import EnforcementInForce
from app.server.runtime.metrics import ServiceMetrics
from app.server.runtime.publisher import Publisher
from app.server.runtime.saved_state import REPORT_SAVE_DELAY_SECONDS, SavedState

log = logging.getLogger("app.decision")

T = TypeVar("T")

# How long a stop waits for the source to close when no round is in progress.
CLOSE_WAIT_SECONDS = 0.5


class _SourceThread:
    """One daemon thread that runs the source's calls, one after the other. A daemon, and not
    an executor's worker (which the interpreter joins at exit): a stop abandons a round in
    progress instead of waiting for it, which against an unreachable cluster would take the
    admin request's whole timeout (up to 30 s, a supervisor's whole grace period)."""

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], object], Future] | None] = (
            queue.SimpleQueue()
        )
        self.busy = False  # a call is running
        self._thread = threading.Thread(target=self._run, name="volume-source", daemon=True)
        self._thread.start()

    def submit(self, call: Callable[[], T]) -> asyncio.Future[T]:
        future: Future = Future()
        self._calls.put((call, future))
        return asyncio.wrap_future(future)

    def stop(self) -> None:
        """Run the calls submitted so far, then end."""
        self._calls.put(None)

    def _run(self) -> None:
        while (item := self._calls.get()) is not None:
            call, future = item
            if not future.set_running_or_notify_cancel():
                continue
            self.busy = True
            try:
                future.set_result(call())
            except BaseException as exc:  # noqa: BLE001 - every outcome is handed to the awaiting side, which raises it
                future.set_exception(exc)
            finally:
                self.busy = False


class ObservationLoop:
    def __init__(
        self,
        decider: ThrottleDecider,
        metrics: ServiceMetrics,
        clock: Clock,
        publisher: Publisher,
        enforcement: EnforcementInForce,
        source: VolumeSource | None = None,
        interval_seconds: float = 60.0,
    ) -> None:
        self.decider = decider
        self.publisher = publisher
        self.enforcement = enforcement
        self.metrics = metrics
        self.clock = clock
        self.source = source
        self.interval_seconds = interval_seconds
        self.rounds = 0
        self.history: HistoryWriter | None = None  # set while the app runs with history on
        # Where the decider's state outlives this process (app/server/runtime/saved_state.py); None: nowhere.
        self.saved_state: SavedState | None = None
        self._save_pending: asyncio.TimerHandle | None = None
        # With several replicas (app/server/runtime/shared_state.py): whether this one observes (it
        # is the elected decider).
        self.may_observe: Callable[[], bool] = lambda: True
        self._wake = asyncio.Event()
        self._cluster_changes = ClusterChanges(decider.validity_seconds, decider.cache.keeps_fenced)

    def apply_round(self, round_: ObservationRound) -> Decision:
        self.rounds += 1
        evaluation = self.decider.apply_round(round_, self.applied_factor(round_))
        self.metrics.record_round(
            round_, evaluation, len(self.decider.active_brokers), len(self.decider.fenced_brokers)
        )
        for change in self._cluster_changes.after_round(
            round_, self.decider.evicted, self.decider.cache.brokers()
        ):
            log.log(change.level, change.message, extra=dict(change.fields))
        decision = self.publisher.publish()
        if self.history is not None:
            self.history.submit(round_, decision)
        self.save_state()
        return decision

    def save_state(self) -> None:
        """Hand the saved state a snapshot of the decider as it is now."""
        if self._save_pending is not None:
            self._save_pending.cancel()
            self._save_pending = None
        if self.saved_state is not None:
            self.saved_state.save(self.decider.snapshot(self.clock()))

    def save_state_soon(self) -> None:
        """Save within REPORT_SAVE_DELAY_SECONDS: many reports a second make one snapshot."""
        if self.saved_state is None or self._save_pending is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # applied outside the event loop (tests): at once
            self.save_state()
            return
        self._save_pending = loop.call_later(REPORT_SAVE_DELAY_SECONDS, self.save_state)

    def applied_factor(self, round_: ObservationRound) -> AppliedFactor:
        """What the shims applied while ``round_`` was observed: the factor in force as it began
        where they enforce it, 1 where they do not (shadow mode, brokers outside the canary list)."""
        return self.enforcement.applied_factor(self.decider.reading(round_.started_at).factor)

    async def run(self) -> None:
        """Observe every interval until cancelled. Only runs with a source configured."""
        assert self.source is not None
        loop = asyncio.get_running_loop()
        worker = _SourceThread()
        try:
            while True:
                started = loop.time()
                if self.may_observe():
                    try:
                        round_ = await self._publishing_changes_until(
                            worker.submit(self.source.observe)
                        )
                    except (
                        Exception
                    ) as exc:  # a source must not raise; if one does, the round failed
                        log.exception("volume source raised")
                        now = self.clock()
                        round_ = ObservationRound(
                            now, now, error=f"volume source raised {type(exc).__name__}: {exc}"
                        )
                    if (
                        self.may_observe()
                    ):  # a replica that stopped being the decider meanwhile drops it
                        self.apply_round(round_)
                self._wake = asyncio.Event()
                await self._publishing_changes_until(
                    self._pause(self._wake, started + self.interval_seconds - loop.time())
                )
        finally:
            # After the round in progress, if any: that one is abandoned, not awaited.
            abandoning = worker.busy
            closed = worker.submit(self.source.close)
            worker.stop()
            if not abandoning:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(closed), CLOSE_WAIT_SECONDS)

    @staticmethod
    async def _pause(wake: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), max(0.0, seconds))

    def observe_soon(self) -> None:
        """Start the next round now (this replica was just elected the decider)."""
        self._wake.set()

    async def _publishing_changes_until(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` (a round, or the pause before the next one), waking at each
        instant the decision changes by itself (an expiry) to log and publish it then."""
        task = asyncio.ensure_future(awaitable)
        try:
            while True:
                timeout = None
                next_change = self.publisher.next_change
                if next_change is not None:
                    timeout = max(0.0, next_change - self.clock()) + 0.001
                done, _ = await asyncio.wait({task}, timeout=timeout)
                if done:
                    return task.result()
                self.publisher.publish()
        finally:
            task.cancel()
