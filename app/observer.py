"""The observation loop and the service state it feeds.

Every check interval a round runs on a worker thread (the Kafka client blocks), then its
result is applied on the event loop: cache, policy, factor lifecycle, metrics, and a new
published decision. One log line per change of state, never one per round or request."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from app.clock import Clock
from app.history.writer import HistoryWriter
from app.metrics import ServiceMetrics
from app.throttle.board import Board, Published
from app.throttle.decider import ThrottleDecider
from app.throttle.decision import ThrottleDecision
from app.throttle.factor import FactorSource
from app.policy.limits import State
from app.volumes.changes import ClusterChanges
from app.volumes.model import ObservationRound
from app.volumes.source import VolumeSource

log = logging.getLogger("app.decision")


def _describe_volumes(decision: ThrottleDecision) -> str:
    listed = decision.breaching or decision.ramping
    shown = ", ".join(f"broker {v.broker_id} {v.log_dir} ({v.reason}, usable {v.usable_bytes} of {v.total_bytes})" for v in listed[:5])
    more = f" and {len(listed) - 5} more" if len(listed) > 5 else ""
    return shown + more


class Observer:
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
        self.source = source
        self.interval_seconds = interval_seconds
        self.clock = clock
        self.board: Board[ThrottleDecision] = Board(self._render, clock)
        self.board.on_change(self._on_decision_change)
        self.rounds = 0
        self._changes = ClusterChanges(decider.validity_seconds, decider.cache.keeps_fenced)
        self._executor: ThreadPoolExecutor | None = None
        self.history: HistoryWriter | None = None  # set while the app runs with history on
        metrics.bind_reading(self._reading_for_metrics)
        metrics.bind_volumes(decider.cache.volumes)

    # -- decisions ---------------------------------------------------------------------
    def _render(self, now: float) -> tuple[ThrottleDecision, float | None]:
        decision, reading = self.decider.decision(now)
        return decision, reading.next_change_at

    def _reading_for_metrics(self) -> tuple[float, str, bool]:
        # Scrapes run on a worker thread: read the pure factor holder, never the board
        # (publishing belongs to the event loop thread).
        reading = self.decider.reading(self.clock())
        return reading.factor, State.of(reading.factor).value, reading.source is FactorSource.FALLBACK

    @property
    def ready(self) -> bool:
        """A first round succeeded, or the fallback is in force (or observation is off)."""
        source = self.board.current().model.source
        return source != FactorSource.INITIAL.value

    def apply_round(self, round_: ObservationRound) -> Published[ThrottleDecision]:
        self.rounds += 1
        evaluation = self.decider.apply_round(round_)
        self.metrics.round_duration.observe(max(0.0, round_.finished_at - round_.started_at))
        self.metrics.admin_connected.set(1 if round_.cluster_answered else 0)
        if round_.failed:
            self.metrics.observation_errors.labels("round").inc()
        if round_.missing_brokers:
            self.metrics.observation_errors.labels("broker").inc(len(round_.missing_brokers))
        self.metrics.record_evaluation(evaluation, len(self.decider.active_brokers), len(self.decider.fenced_brokers))
        for change in self._changes.after_round(round_, self.decider.evicted, self.decider.cache.brokers()):
            log.log(change.level, change.message)
        published = self.board.refresh()
        if self.history is not None:
            self.history.submit(round_, evaluation, published.model)
        return published

    # -- logging: one line per change --------------------------------------------------
    def _on_decision_change(self, new: Published[ThrottleDecision], old: Published[ThrottleDecision] | None) -> None:
        """Count a fallback taking over and log each change of source or state once."""
        decision = new.model
        before = old.model if old is not None else None
        if before is None or before.source != decision.source:
            if decision.source == FactorSource.FALLBACK.value:
                self.metrics.fallback_applied.inc()
                log.warning("fallback factor %.3f applied: no valid factor since %s", decision.factor, decision.computed_at)
            elif before is not None and before.source == FactorSource.FALLBACK.value:
                log.info("fallback lifted: factor source is %s", decision.source)
        if before is None or before.state != decision.state:
            detail = _describe_volumes(decision)
            log.warning(
                "state %s -> %s: factor %.3f (%s)%s",
                before.state if before else "none",
                decision.state,
                decision.factor,
                decision.source,
                f": {detail}" if detail else "",
            )

    # -- the loop ------------------------------------------------------------------------
    async def run(self) -> None:
        """Observe every interval until cancelled. Only runs with a source configured."""
        assert self.source is not None
        loop = asyncio.get_running_loop()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="volume-source")
        try:
            while True:
                started = loop.time()
                try:
                    round_ = await loop.run_in_executor(self._executor, self.source.observe)
                except Exception as exc:  # a source must not raise; if one does, the round failed
                    log.exception("volume source raised")
                    now = self.clock()
                    round_ = ObservationRound(now, now, error=f"volume source raised {type(exc).__name__}: {exc}")
                self.apply_round(round_)
                await self._sleep_until(started + self.interval_seconds)
        finally:
            await loop.run_in_executor(self._executor, self.source.close)
            self._executor.shutdown(wait=False)

    async def _sleep_until(self, loop_deadline: float) -> None:
        """Sleep until the next round, waking at any expiry in between so a fallback taking
        over is published and logged when it happens, not only at the next read."""
        loop = asyncio.get_running_loop()
        while (remaining := loop_deadline - loop.time()) > 0:
            expires_at = self.board.current().expires_at
            if expires_at is not None:
                remaining = min(remaining, max(0.0, expires_at - self.clock()) + 0.001)
            await asyncio.sleep(remaining)
