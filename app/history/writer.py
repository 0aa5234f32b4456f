"""The history writer: a thread of its own behind a bounded queue.

The event loop only hands over the round's immutable results (``submit`` never blocks);
rows are built, encoded and written on the writer thread. When the queue is full (the disk
is slower than the rounds) the round's rows are dropped and counted, never waited for.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from app.history.files import HistoryFiles
from app.history.kafka_topic import HistoryTopic
from app.history.rows import round_lines, round_rows, row_count
from app.decision.decision import Decision
from app.observation.model import ObservationRound


log = logging.getLogger("app.history")

QUEUE_ROUNDS = 64  # rounds waiting to be written before new ones are dropped


@dataclass(frozen=True)
class _RoundResult:
    round_: ObservationRound
    decision: Decision


@dataclass(frozen=True)
class HistoryCounters:
    """Where the writer reports what it did (Prometheus counters in production)."""

    written: Callable[[int], None]
    dropped: Callable[[str, int], None]  # (reason, rows)
    topic_errors: Callable[[int], None]


class HistoryWriter:
    def __init__(
        self,
        files: HistoryFiles,
        check_interval_seconds: float,
        counters: HistoryCounters,
        topic: HistoryTopic | None = None,
        queue_rounds: int = QUEUE_ROUNDS,
    ) -> None:
        self.files = files
        self.topic = topic
        self._interval = check_interval_seconds
        self._counters = counters
        self._queue: queue.Queue[_RoundResult | None] = queue.Queue(maxsize=queue_rounds)
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._failing = False

    def start(self) -> None:
        self._thread.start()

    def submit(self, round_: ObservationRound, decision: Decision) -> None:
        """Called on the event loop after each round with the decision it led to; returns at once."""
        try:
            self._queue.put_nowait(_RoundResult(round_, decision))
        except queue.Full:
            self._counters.dropped("queue_full", row_count(round_, decision))

    def close(self, timeout_seconds: float = 10.0) -> None:
        """Write what is queued, then stop (the sentinel waits behind the queued rounds)."""
        if self._thread.is_alive():
            self._queue.put(None, timeout=timeout_seconds)
            self._thread.join(timeout_seconds)
        self.files.close()
        if self.topic is not None:
            self.topic.close()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._write(item)
            except Exception:  # a bug must not stop the history for good
                log.exception("history writer failed on a round")
                self._counters.dropped("write_error", row_count(item.round_, item.decision))

    def _write(self, item: _RoundResult) -> None:
        lines = round_lines(item.round_, item.decision, self._interval).encode()
        count = row_count(item.round_, item.decision)
        try:
            self.files.append(lines, item.round_.finished_at)
        except OSError as exc:
            self._counters.dropped("write_error", count)
            if not self._failing:
                log.error("history files not writable (%s): rows are dropped and counted until it recovers", exc)
                self._failing = True
        else:
            self._counters.written(count)
            if self._failing:
                log.info("history files writable again")
                self._failing = False
        if self.topic is not None:
            self.topic.publish(round_rows(item.round_, item.decision, self._interval))
