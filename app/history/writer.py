"""The history writer: a thread of its own behind a bounded queue.

The event loop hands over the round and a snapshot of its decision taken in the round
(``Decision.frozen``: nothing in it reads the decider's dicts, which the event loop keeps
changing while this thread works); ``submit`` never blocks. Rows are built, encoded and
written on the writer thread. When the queue is full (the disk is slower than the rounds) the
round's rows are dropped and counted, never waited for. Whatever fails on a round (a file, a
row that cannot be encoded, a bug) drops those rows and counts them; the thread goes on.

With a ``Compaction`` the rows are format 2 (``app/history/compact.py``): a round row every round,
a volume's row when it is due; a round that fails to be written makes the next a keyframe.
Without, format 1: one full row per volume per round.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.decision.decision import Decision
from app.history.compact import Compaction, Compactor
from app.history.files import HistoryFiles
from app.history.kafka_topic import HistoryTopic
from app.history.rows import ROW_ENCODER, round_lines, round_rows, row_count
from app.observation.model import ObservationRound

log = logging.getLogger("app.history")

QUEUE_ROUNDS = 64  # rounds waiting to be written before new ones are dropped


@dataclass(frozen=True)
class _RoundResult:
    round_: ObservationRound
    decision: Decision  # frozen in the round: the writer builds from its copies, on its own thread


@dataclass(frozen=True)
class HistoryCounters:
    """Where the writer reports what it did (Prometheus counters in production)."""

    written: Callable[[int], None]
    dropped: Callable[[str, int], None]  # (reason, rows)
    topic_errors: Callable[[int], None]
    # When (epoch seconds) the writer last wrote rows; told once at start (nothing written yet).
    written_at: Callable[[float], None] = lambda at: None


class HistoryWriter:
    def __init__(
        self,
        files: HistoryFiles,
        check_interval_seconds: float,
        counters: HistoryCounters,
        topic: HistoryTopic | None = None,
        queue_rounds: int = QUEUE_ROUNDS,
        compaction: Compaction | None = None,
    ) -> None:
        self.files = files
        self.topic = topic
        self._interval = check_interval_seconds
        self._counters = counters
        self._queue: queue.Queue[_RoundResult | None] = queue.Queue(maxsize=queue_rounds)
        self._thread = threading.Thread(target=self._run, name="history-writer", daemon=True)
        self._failing = False
        self._compactor = Compactor(compaction) if compaction is not None else None

    def start(self) -> None:
        self._counters.written_at(time.time())
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def submit(self, round_: ObservationRound, decision: Decision) -> None:
        """Called on the event loop after each round with the decision it led to; returns at
        once. The decision is frozen here, in the round: the writer sees the round's view."""
        decision = decision.frozen()
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
            if self._compactor is not None:
                self._run_compact(item)
                continue
            rows = _rows_in(item)
            try:
                self._write(item, rows)
            except Exception:  # a bug must not stop the history for good: this round's rows go
                log.exception("history writer failed on a round: its %d rows are dropped", rows)
                self._counters.dropped("write_error", rows)
            if self.topic is not None:
                try:
                    self.topic.publish(round_rows(item.round_, item.decision, self._interval))
                except Exception:
                    log.exception(
                        "history topic failed on a round: its %d rows are not published", rows
                    )
                    self._counters.topic_errors(rows)

    def _run_compact(self, item: _RoundResult) -> None:
        """One round in format 2: its rows built, encoded and written whole, or dropped and
        counted whole (and the next round is a keyframe, so nothing relies on lost rows)."""
        assert self._compactor is not None
        try:
            rows = self._compactor.rows(item.round_, item.decision, self._interval)
            try:
                lines = "".join(ROW_ENCODER.encode(row) + "\n" for row in rows).encode()
            except Exception:  # noqa: BLE001 - a row that cannot be encoded: each is tried alone
                rows, lines = self._encodable_compact(rows)
        except Exception:
            self._compactor.reset()
            count = _rows_in(item)
            log.exception("history writer failed on a round: its %d rows are dropped", count)
            self._counters.dropped("write_error", count)
            return
        if not self._append(lines, len(rows), item.round_.finished_at):
            self._compactor.reset()
        if self.topic is not None:
            try:
                self.topic.publish(rows)
            except Exception:
                log.exception(
                    "history topic failed on a round: its %d rows are not published", len(rows)
                )
                self._counters.topic_errors(len(rows))

    def _encodable_compact(self, rows: list) -> tuple[list, bytes]:
        """The round's rows one by one: a volume row that cannot be encoded is dropped and
        counted, and its volume is due again next round (nothing stands for it meanwhile)."""
        assert self._compactor is not None
        kept, lines = [], []
        for row in rows:
            try:
                lines.append(ROW_ENCODER.encode(row) + "\n")
                kept.append(row)
            except Exception as exc:  # noqa: BLE001 - whatever the reason, the row is dropped and said so
                log.error(
                    "history row dropped: it cannot be encoded (%s: %s)", type(exc).__name__, exc
                )
                self._counters.dropped("write_error", 1)
                self._compactor.forget(row)
        return kept, "".join(lines).encode()

    def _append(self, lines: bytes, count: int, at: float) -> bool:
        try:
            self.files.append(lines, at)
        except OSError as exc:
            self._counters.dropped("write_error", count)
            if not self._failing:
                log.error(
                    "history files not writable (%s): rows are dropped and counted until it recovers",
                    exc,
                )
                self._failing = True
            return False
        self._counters.written(count)
        self._counters.written_at(time.time())
        if self._failing:
            log.info("history files writable again")
            self._failing = False
        return True

    def _write(self, item: _RoundResult, rows: int) -> None:
        try:
            lines, count = round_lines(item.round_, item.decision, self._interval).encode(), rows
        except Exception:  # noqa: BLE001 - a row that cannot be built or encoded: each is tried alone
            lines, count = self._encodable_lines(item, rows)
        if not count:
            return
        self._append(lines, count, item.round_.finished_at)

    def _encodable_lines(self, item: _RoundResult, rows: int) -> tuple[bytes, int]:
        """The round's rows one by one, when they cannot be encoded together: a row that
        cannot be built or encoded is dropped and counted, the others are written."""
        lines: list[str] = []
        for row in round_rows(item.round_, item.decision, self._interval):
            try:
                lines.append(ROW_ENCODER.encode(row) + "\n")
            except Exception as exc:  # noqa: BLE001 - whatever the reason, the row is dropped and said so
                log.error(
                    "history row dropped: it cannot be encoded (%s: %s)", type(exc).__name__, exc
                )
        if len(lines) < rows:
            self._counters.dropped("write_error", rows - len(lines))
        return "".join(lines).encode(), len(lines)


def _rows_in(item: _RoundResult) -> int:
    """How many rows the round has (what is dropped if it cannot be written); 1, the least a
    round has, when even counting them fails."""
    try:
        return row_count(item.round_, item.decision)
    except Exception:
        log.exception("history writer cannot count a round's rows")
        return 1
