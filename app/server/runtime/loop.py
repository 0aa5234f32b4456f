"""The observation loop: every check interval a round, then its effects, in one direction.

A round runs on a worker thread (the Kafka client blocks); its result is applied on the event
loop: the decider judges it, the metrics and the history record it, the changes are logged
once, and the publications are refreshed. Between rounds the loop wakes at each instant the
decision changes by itself (an observation or the factor expiring), so such a change is logged
and published when it happens. Nothing published calls back into the loop."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import queue
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

from app.clock import Clock
from app.decision.changes import DecisionChanges
from app.decision.decider import ThrottleDecider
from app.decision.decision import Decision
from app.decision.enforcement import ENFORCE_EVERYWHERE, Enforcement
from app.decision.metadata import MetadataStep
from app.decision.horizon import AppliedFactor
from app.history.writer import HistoryWriter
from app.observation.changes import ClusterChanges
from app.observation.model import ObservationRound
from app.observation.node_reports import NodeReport
from app.observation.source import VolumeSource
from app.server.runtime.metrics import ServiceMetrics
from app.server.runtime.publishing import Publication
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
        self._calls: queue.SimpleQueue[tuple[Callable[[], object], Future] | None] = queue.SimpleQueue()
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
            except BaseException as exc:  # handed to the awaiting side
                future.set_exception(exc)
            finally:
                self.busy = False


def _what_shims_act_on(step: MetadataStep) -> tuple[object, ...]:
    """What a node report can change that the published decision shows: only then is it published."""
    listed = tuple((m.verdict.volume.key, m.verdict.reason) for m in step.listed)
    return (step.mutation_factor, step.data_factor, step.source, listed)


class ObservationLoop:
    def __init__(
        self,
        decider: ThrottleDecider,
        metrics: ServiceMetrics,
        clock: Clock,
        source: VolumeSource | None = None,
        interval_seconds: float = 60.0,
    ) -> None:
        self.decider = decider
        self.metrics = metrics
        self.clock = clock
        self.source = source
        self.interval_seconds = interval_seconds
        self.rounds = 0
        self.history: HistoryWriter | None = None  # set while the app runs with history on
        # Where the decider's state outlives this process (app/server/runtime/saved_state.py); None: nowhere.
        self.saved_state: SavedState | None = None
        self._save_pending: asyncio.TimerHandle | None = None
        # With several replicas (app/server/runtime/shared_state.py): whether this one observes (it is the
        # elected decider), and where a node report it took goes for the others.
        self.may_observe: Callable[[], bool] = lambda: True
        self.node_report_taken: Callable[[NodeReport], None] | None = None
        self._wake = asyncio.Event()
        self.publications: list[Publication] = []  # refreshed after every change, in order
        # The enforcement in force (the quota service's, once it runs): every decision carries it.
        self.enforcement: Callable[[], Enforcement] = lambda: ENFORCE_EVERYWHERE
        self._cluster_changes = ClusterChanges(decider.validity_seconds, decider.cache.keeps_fenced)
        self._decision_changes = DecisionChanges()
        self._next_change: float | None = None  # when the published decision changes by itself

    def apply_round(self, round_: ObservationRound) -> Decision:
        self.rounds += 1
        evaluation = self.decider.apply_round(round_, self.applied_factor(round_))
        self.metrics.record_round(round_, evaluation, len(self.decider.active_brokers), len(self.decider.fenced_brokers))
        for change in self._cluster_changes.after_round(round_, self.decider.evicted, self.decider.cache.brokers()):
            log.log(change.level, change.message, extra=dict(change.fields))
        decision = self.publish()
        if self.history is not None:
            self.history.submit(round_, decision)
        self.save_state()
        return decision

    def take_node_report(self, report: NodeReport, shared: bool = False) -> None:
        """A node's report of its own volumes: recorded, published at once when it changes what
        shims act on, and saved with the state within a second. One another replica took
        (``shared``) is not handed on again."""
        if not shared and self.node_report_taken is not None:
            self.node_report_taken(report)
        before = _what_shims_act_on(self.decider.metadata.at(report.received_at))
        after = self.decider.record_node_report(report)
        if _what_shims_act_on(after) != before:
            self.publish()
        self.save_state_soon()

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
        return AppliedFactor.under(self.decider.reading(round_.started_at).factor, self.enforcement())

    def decision(self, now: float) -> Decision:
        """The decider's decision at ``now``, with the enforcement in force."""
        return dataclasses.replace(self.decider.decision(now), enforcement=self.enforcement())

    def publish(self) -> Decision:
        """Log what changed in the decision since it was last published, and publish."""
        decision = self.decision(self.clock())
        self._next_change = decision.reading.next_change_at
        changes, fallback_took_over = self._decision_changes.after(decision)
        if fallback_took_over:
            self.metrics.fallback_applied.inc()
        for change in changes:
            log.log(change.level, change.message, extra=dict(change.fields))
        for publication in self.publications:
            publication.publish()
        return decision

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
                        round_ = await self._publishing_changes_until(worker.submit(self.source.observe))
                    except Exception as exc:  # a source must not raise; if one does, the round failed
                        log.exception("volume source raised")
                        now = self.clock()
                        round_ = ObservationRound(now, now, error=f"volume source raised {type(exc).__name__}: {exc}")
                    if self.may_observe():  # a replica that stopped being the decider meanwhile drops it
                        self.apply_round(round_)
                self._wake = asyncio.Event()
                await self._publishing_changes_until(self._pause(self._wake, started + self.interval_seconds - loop.time()))
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
                if self._next_change is not None:
                    timeout = max(0.0, self._next_change - self.clock()) + 0.001
                done, _ = await asyncio.wait({task}, timeout=timeout)
                if done:
                    return task.result()
                self.publish()
        finally:
            task.cancel()
