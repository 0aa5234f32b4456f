"""Synthetic histories with answers known by construction, written the way the service writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.history.files import HistoryFiles, Retention, file_for
from app.history.schema import FIELD_NAMES

MiB = 1024 * 1024
HARD = 10 * MiB
SOFT = 20 * MiB
TOTAL = 100 * MiB
CHECK_INTERVAL = 60.0

# Usable bytes of a volume at round i, or None when the volume is not observed in that round.
Usable = Callable[[int], int | None]
# The hard and soft limits (bytes; soft None when none is configured) in force at round i.
Limits = Callable[[int], tuple[int, int | None]]


def default_limits(i: int) -> tuple[int, int | None]:
    return HARD, SOFT


def instant(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def status_of(usable: int, hard: int = HARD, soft: int | None = SOFT) -> str:
    return "breaching" if usable <= hard else "ramping" if soft is not None and usable <= soft else "ok"


def volume_row(
    moment: datetime, broker_id: int, log_dir: str, usable: int, state: str, source: str = "observed", hard: int = HARD, soft: int | None = SOFT
) -> dict:
    """``usable`` below 0: the broker did not report the volume's bytes (unjudged)."""
    reported = usable >= 0
    status = status_of(usable, hard, soft) if reported else "unjudged"
    factor = 0.0 if status == "breaching" else (usable - hard) / (soft - hard) if status == "ramping" else 1.0
    return {
        "time": instant(moment),
        "broker_id": broker_id,
        "log_dir": log_dir,
        "total_bytes": TOTAL if reported else -1,
        "usable_bytes": usable,
        "available_ratio": usable / TOTAL if reported else None,
        "log_dir_error": None,
        "limit_kind": "min-available-bytes",
        "hard_limit": float(hard),
        "soft_limit": float(soft) if soft is not None else None,
        "volume_status": status,
        "volume_factor": factor,
        "cluster_factor": {"OPEN": 1.0, "THROTTLE": 0.5, "PAUSE": 0.0}[state],
        "state": state,
        "source": source,
        "round_complete": True,
        "check_interval_seconds": CHECK_INTERVAL,
    }


def no_volume_row(moment: datetime, state: str, source: str, hard: int = HARD, soft: int | None = SOFT) -> dict:
    row = dict.fromkeys(FIELD_NAMES)
    row.update(
        time=instant(moment),
        limit_kind="min-available-bytes",
        hard_limit=float(hard),
        soft_limit=float(soft) if soft is not None else None,
        cluster_factor={"OPEN": 1.0, "THROTTLE": 0.5, "PAUSE": 0.0}[state],
        state=state,
        source=source,
        round_complete=False,
        check_interval_seconds=CHECK_INTERVAL,
    )
    return row


def write_rounds(
    directory: Path,
    start: datetime,
    rounds: int,
    volumes: dict[tuple[int, str], Usable],
    outage: set[int],
    outage_state: str = "PAUSE",
    limits: Limits = default_limits,
) -> None:
    """One round per check interval; each round's state is the worst of its volumes (PAUSE on
    a breach, THROTTLE on a ramp), or the fallback's during the outage rounds."""
    files = HistoryFiles(directory, Retention(max_age_days=100000, max_total_bytes=1 << 50))
    for i in range(rounds):
        moment = start + timedelta(seconds=CHECK_INTERVAL * i)
        hard, soft = limits(i)
        if i in outage:
            rows = [no_volume_row(moment, outage_state, "fallback", hard, soft)]
        else:
            observed = {key: usable(i) for key, usable in volumes.items() if usable(i) is not None}
            statuses = {status_of(u, hard, soft) for u in observed.values() if u >= 0}
            state = "PAUSE" if "breaching" in statuses else "THROTTLE" if "ramping" in statuses else "OPEN"
            rows = [volume_row(moment, b, d, u, state, hard=hard, soft=soft) for (b, d), u in sorted(observed.items())]
        files.append("".join(json.dumps(row) + "\n" for row in rows).encode(), moment.timestamp())
    files.close()


def append_raw(directory: Path, moment: datetime, text: str) -> None:
    """Lines as a broken disk or a killed process would leave them."""
    path = file_for(directory, moment.timestamp())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        handle.write(text)


def at(year: int, month: int, day: int, hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# --- Histories written by the service's own writer, from rounds decided by its own decider ---

SERVICE_DIRS = ("/data/a", "/data/b")
SERVICE_BROKERS = (1, 2, 3, 4)


def _service_usable(i: int, broker: int, log_dir: str) -> int:
    """A realistic mix: retention saw-tooths on most volumes (fill for 40 rounds, then the
    oldest segments go), one volume filling into its hard limit and freed, one ramping into its
    soft limit and back."""
    d = SERVICE_DIRS.index(log_dir)
    if (broker, log_dir) == (1, "/data/a") and 20 <= i < 95:
        return max(4 * MiB, 40 * MiB - (i - 20) * 3 * MiB // 4)
    if (broker, log_dir) == (2, "/data/b") and 100 <= i < 130:
        return 16 * MiB + abs(i - 115) * MiB // 8
    return 70 * MiB - ((i + 7 * broker + 13 * d) % 40) * MiB // 2 - (broker * 37 + i * 11) % 97 * 1024


def service_rounds(start: datetime, rounds: int):
    """(round, decision) pairs as the service's loop hands them to the history writer: a
    decider judging observation rounds of four brokers of two log dirs each, one round a
    minute over several UTC hours; a broker fenced for a while (its observations kept), one
    missing a few rounds, an outage (the cluster unreachable), limits changed mid-way, and a
    log dir that leaves. Deterministic."""
    from app.decision.decider import ThrottleDecider
    from app.decision.policy import LimitKind, StoragePolicy
    from app.observation.model import ObservationRound, VolumeObservation

    began = start.timestamp()
    decider = ThrottleDecider(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, HARD, SOFT), 300.0, 0.0, started_at=began - 1)
    for i in range(rounds):
        at_ = began + CHECK_INTERVAL * i
        if i == 120:  # a new soft limit: the shared values change
            decider.policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, HARD, 25 * MiB)
        if 170 <= i < 173:
            round_ = ObservationRound(at_ - 0.5, at_, error="cluster unreachable")
        else:
            fenced = (3,) if 140 <= i < 150 else ()
            missing = {4: "timed out"} if 160 <= i < 164 else {}
            active = tuple(b for b in SERVICE_BROKERS if b not in fenced)
            observations = tuple(
                VolumeObservation(b, d, TOTAL, _service_usable(i, b, d), at_ - 0.25)
                for b in active
                if b not in missing
                for d in SERVICE_DIRS
                if not (i >= 180 and (b, d) == (4, "/data/b"))
            )
            round_ = ObservationRound(at_ - 0.5, at_, active, observations, missing, fenced_brokers=fenced)
        decider.apply_round(round_)
        yield round_, decider.decision(at_)


def write_service_history(directory: Path, start: datetime, rounds: int, compaction=None, only: range | None = None, codec=None) -> None:
    """The rounds of ``service_rounds`` written by the service's history writer: format 1 without
    ``compaction``, format 2 with it (closed hours compressed, by ``codec`` or the default);
    ``only``: the rounds this writer writes (a service run: another run writes the others)."""
    from app.history.writer import HistoryCounters, HistoryWriter

    counters = HistoryCounters(lambda n: None, lambda reason, n: None, lambda n: None)
    files = HistoryFiles(directory, Retention(max_age_days=100000, max_total_bytes=1 << 50), **({"codec": codec} if codec else {}))
    writer = HistoryWriter(files, CHECK_INTERVAL, counters, queue_rounds=1 << 20, compaction=compaction)
    writer.start()
    for i, (round_, decision) in enumerate(service_rounds(start, rounds)):
        if only is None or i in only:
            writer.submit(round_, decision)
    writer.close(timeout_seconds=120)
