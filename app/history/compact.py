"""The history's format 2: rows in proportion to what happened (``app/history/schema.py``).

Every round writes its round row. A volume's row is written when the round is the first of its
hour or of the writer's run (a keyframe: every volume in the view is written), when anything the
decision or the report reads of it changed (status, factor, kept, log dir error, the rule that
slows it, its capacity, what it holds, a metadata volume's limits), every round while it is not
``ok``, and otherwise once its last row is ``keyframe_seconds`` old or its usable bytes moved by
more than ``usable_share`` of its total since. A volume that leaves the view gets a gone row.
A volume row leaves out its ``available_ratio`` (usable / total: the reader computes it) and
every field that is null.
The limits, enforcement and canary brokers are on the round row when they change (``shared``).

``Compactor`` decides (pure: no I/O, no clock; the writer thread owns one); ``expand`` is the
reference reader, giving back the rows format 1 would have written for the same rounds: every
value the same, except that a volume's rounds between two of its rows repeat the first row's
observation (usable bytes, when it was made), as the decision saw nothing worth a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.decision.decision import Decision
from app.decision.policy import VolumeStatus
from app.history.rows import (
    HistoryRow,
    _common_fields,
    _metadata_rows,
    _Provenance,
    _time_to_full,
    _view,
    _volume_rule,
)
from app.history.schema import (
    FIELD_NAMES,
    GONE,
    ROUND,
    ROUND_FIELDS,
    ROW_KIND,
    SHARED_FIELDS,
    VOLUME,
    VOLUME_ROW_FIELDS,
)
from app.observation.model import ADMIN_API, NODE_REPORT, ObservationRound, VolumeObservation
from app.observation.node_reports import DATA
from app.timefmt import iso_instant

DEFAULT_KEYFRAME_SECONDS = 300.0
DEFAULT_USABLE_SHARE = 0.01
_LIMIT_FIELDS = ("limit_kind", "hard_limit", "soft_limit")
_OK = VolumeStatus.OK.value

# A volume as the format names it: broker id, log dir and what it holds (a combined node's
# shared volume has a data row and a metadata row).
VolumeKey = tuple[int, str, str]


@dataclass(frozen=True)
class Compaction:
    """When a volume whose decision did not change gets a row: once its last is this old, or
    its usable bytes moved by more than this share of its total. ``keyframe_seconds`` 0: every
    round (format 2 with every row, the size of format 1)."""

    keyframe_seconds: float = DEFAULT_KEYFRAME_SECONDS
    usable_share: float = DEFAULT_USABLE_SHARE


@dataclass
class _Last:
    signature: tuple
    usable: int
    at: float  # the round time of the volume's last row


class Compactor:
    """The rows of each round in format 2, from what was written before in the hour."""

    def __init__(self, compaction: Compaction = Compaction()) -> None:
        self.compaction = compaction
        self.reset()

    def reset(self) -> None:
        """Forget what was written: the next round is a keyframe (after a failed write, the
        rows the state assumed may not be on disk)."""
        self._hour: int | None = None
        self._last: dict[VolumeKey, _Last] = {}
        self._shared: tuple | None = None

    def rows(
        self, round_: ObservationRound, decision: Decision, check_interval_seconds: float
    ) -> list[HistoryRow]:
        """The round row, then the volume rows due and the gone rows, in that order (a crash
        mid-write leaves the round row whole before its volumes)."""
        at = round_.finished_at
        hour = int(at // 3600)
        keyframe = hour != self._hour
        if keyframe:
            self._hour, self._last, self._shared = hour, {}, None
        time = iso_instant(at)
        view = _view(round_, decision)
        rows = [
            self._round_row(time, len(view), round_, decision, check_interval_seconds, keyframe)
        ]
        seen: set[VolumeKey] = set()
        rows += self._data_rows(time, at, view, round_, decision, seen)
        rows += self._metadata_rows(time, at, round_, decision, seen)
        # Every volume seen has a last row now: none is gone unless more are remembered.
        gone = [key for key in self._last if key not in seen] if len(self._last) > len(seen) else []
        for key in gone:
            del self._last[key]
            rows.append(
                {
                    "time": time,
                    ROW_KIND: GONE,
                    "broker_id": key[0],
                    "log_dir": key[1],
                    "holds": key[2],
                }
            )
        return rows

    def _round_row(
        self,
        time: str | None,
        volumes: int,
        round_: ObservationRound,
        decision: Decision,
        check_interval_seconds: float,
        keyframe: bool,
    ) -> HistoryRow:
        """The round's own row; the shared values on it when they changed (and in a keyframe).
        Their values are format 1's (``_common_fields``), split as ROUND_FIELDS and SHARED_FIELDS."""
        common = _common_fields(round_, decision, check_interval_seconds)
        shared_values = tuple(common[name] for name in SHARED_FIELDS)
        round_row: HistoryRow = {
            "time": time,
            ROW_KIND: ROUND,
            "volumes": volumes,
            **{name: common[name] for name in ROUND_FIELDS},
        }
        if shared_values != self._shared:
            round_row.update(shared=True, **dict(zip(SHARED_FIELDS, shared_values)))
            self._shared = shared_values
        if keyframe:
            round_row["keyframe"] = True
        return round_row

    def _data_rows(
        self,
        time: str | None,
        at: float,
        view: Sequence[VolumeObservation],
        round_: ObservationRound,
        decision: Decision,
        seen: set[VolumeKey],
    ) -> list[HistoryRow]:
        """The rows of the data volumes in the view that are due."""
        evaluation = decision.evaluation
        verdicts = (
            (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged) if evaluation else ()
        )
        listed = {v.volume.key: v for v in verdicts}
        provenance = _Provenance(round_)
        keyframe_seconds, share = self.compaction.keyframe_seconds, self.compaction.usable_share
        lasts, add = self._last, seen.add
        # Most volumes are ok and not due: ``_due``'s test is made in place for them, and the
        # kept reason is looked up once per broker (a broker's log dirs come one after another).
        rows = []
        broker_before: int | None = None
        kept: str | None = None
        for volume in view:
            broker, log_dir = volume.broker_id, volume.log_dir
            key = (broker, log_dir, DATA)
            add(key)
            verdict = listed.get((broker, log_dir)) if listed else None
            if broker != broker_before:
                kept, broker_before = provenance.kept(volume), broker
            usable, total = volume.usable_bytes, volume.total_bytes
            if verdict is None:
                status, factor, volume_rule = _OK, 1.0, None
                signature: tuple = (_OK, 1.0, kept, volume.error, None, total, volume.observed_by)
                last = lasts.get(key)
                if (
                    last is not None
                    and signature == last.signature
                    and at - last.at < keyframe_seconds
                ):
                    moved, allowed = usable - last.usable, share * total if total > 0 else 0.0
                    if -allowed <= moved <= allowed:
                        continue  # not due
                lasts[key] = _Last(signature, usable, at)
            else:
                status, factor = verdict.status.value, verdict.factor
                volume_rule = _volume_rule(verdict)
                signature = (
                    status,
                    factor,
                    kept,
                    volume.error,
                    volume_rule,
                    total,
                    volume.observed_by,
                )
                if not self._due(
                    key, signature, status, usable, total, at, keyframe_seconds, share
                ):
                    continue
            observed_at, age = provenance.time_and_age(volume)
            rate, seconds = _time_to_full(decision, volume)
            row = {
                "time": time, ROW_KIND: VOLUME, "broker_id": broker, "log_dir": log_dir,
                "total_bytes": total, "usable_bytes": usable,
                "log_dir_error": volume.error, "observed_at": observed_at, "observation_age_seconds": age, "kept": kept,
                "volume_status": status, "volume_factor": factor, "fill_rate_bytes_per_second": rate,
                "seconds_to_hard_limit": seconds, "volume_rule": volume_rule, "holds": DATA,
                # absent: admin-api (the reader's default), as in rows written before the field
                "observed_by": None if volume.observed_by == ADMIN_API else volume.observed_by,
            }  # fmt: skip
            rows.append({name: value for name, value in row.items() if value is not None})
        return rows

    def _metadata_rows(
        self,
        time: str | None,
        at: float,
        round_: ObservationRound,
        decision: Decision,
        seen: set[VolumeKey],
    ) -> list[HistoryRow]:
        """The rows of the nodes' reported (metadata) volumes that are due."""
        keyframe_seconds, share = self.compaction.keyframe_seconds, self.compaction.usable_share
        rows = []
        for full in _metadata_rows(round_, decision, {}):
            key = (full["broker_id"], full["log_dir"], full["holds"])
            seen.add(key)
            signature = tuple(
                full[name]
                for name in ("volume_status", "volume_factor", "total_bytes", *_LIMIT_FIELDS)
            )
            if not self._due(
                key,
                signature,
                full["volume_status"],
                full["usable_bytes"],
                full["total_bytes"],
                at,
                keyframe_seconds,
                share,
            ):
                continue
            row = {
                "time": time,
                ROW_KIND: VOLUME,
                **{
                    name: full[name]
                    for name in VOLUME_ROW_FIELDS[1:] + _LIMIT_FIELDS
                    if name != "available_ratio"
                },
            }
            rows.append({name: value for name, value in row.items() if value is not None})
        return rows

    def forget(self, row: HistoryRow) -> None:
        """A row of the last round was not written: its volume is due again next round. A round
        row not written makes the next round a keyframe."""
        if row.get(ROW_KIND) == ROUND:
            self.reset()
        else:
            key: tuple[Any, Any, Any] = (row.get("broker_id"), row.get("log_dir"), row.get("holds"))
            self._last.pop(key, None)

    def _due(
        self,
        key: VolumeKey,
        signature: tuple,
        status: str,
        usable: int,
        total: int,
        at: float,
        keyframe_seconds: float,
        share: float,
    ) -> bool:
        last = self._last.get(key)
        if (
            last is None
            or status != _OK
            or signature != last.signature
            or at - last.at >= keyframe_seconds
            or abs(usable - last.usable) > share * max(total, 0)
        ):
            self._last[key] = _Last(signature, usable, at)
            return True
        return False


def available_ratio(usable: int | None, total: int | None) -> float | None:
    """A volume row's ratio, which format 2 leaves out (half a compressed row's bytes): as the
    service computes it (``VolumeObservation.available_ratio``)."""
    if usable is None or total is None or usable < 0 or total < 0:
        return None
    return usable / total if total > 0 else 0.0


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def expand(rows: Iterable[dict[str, Any]]) -> Iterator[HistoryRow]:
    """The rows of a history (parsed lines, in the order written) as format 1 rows: format 1
    rows as they are; each format 2 round as the rows format 1 would have written for it. A
    volume row counts from its round on, until that volume's next row or gone row, the next
    keyframe or the end of its hour; a round row gives the round's fields to every volume
    row of its round, and a row without a volume when its view was empty."""
    hour: str | None = None
    carried: dict[VolumeKey, dict[str, Any]] = {}
    shared: dict[str, Any] = dict.fromkeys(SHARED_FIELDS)
    pending: dict[str, Any] | None = None  # the round whose volume rows are being read

    def flush() -> Iterator[HistoryRow]:
        if pending is None:
            return
        time, at = pending["time"], _epoch(pending["time"])
        round_values = {name: pending.get(name) for name in ROUND_FIELDS}
        out = []
        if pending.get("volumes") == 0:
            out.append({**dict.fromkeys(FIELD_NAMES), **shared, **round_values, "time": time})
        for volume in carried.values():
            row = {**dict.fromkeys(FIELD_NAMES), **shared, **round_values}
            row.update({name: volume.get(name) for name in VOLUME_ROW_FIELDS})
            if row["available_ratio"] is None:
                row["available_ratio"] = available_ratio(
                    volume.get("usable_bytes"), volume.get("total_bytes")
                )
            metadata = "metadata" in (volume.get("holds") or "")
            if metadata:
                row.update({name: volume.get(name) for name in _LIMIT_FIELDS})
            if row["observed_by"] is None:  # left out, or written before the field existed
                row["observed_by"] = NODE_REPORT if metadata else ADMIN_API
            if volume["time"] != time:  # a round it stands for: its observation, aged by then
                row["time"] = time
                if volume.get("observed_at") is not None:
                    row["observation_age_seconds"] = round(
                        max(0.0, at - _epoch(volume["observed_at"])), 3
                    )
            out.append(row)
        yield from out

    for row in rows:
        kind = row.get(ROW_KIND)
        if kind is None:
            yield row
            continue
        row_hour = str(row.get("time"))[:13]
        if kind == ROUND:
            yield from flush()
            if row_hour != hour or row.get("keyframe"):
                if row_hour != hour:
                    shared = dict.fromkeys(SHARED_FIELDS)
                hour, carried = row_hour, {}
            if row.get("shared"):
                shared = {name: row.get(name) for name in SHARED_FIELDS}
            pending = row
        elif pending is not None and row_hour == hour:
            key: tuple[Any, Any, Any] = (row.get("broker_id"), row.get("log_dir"), row.get("holds"))
            carried.pop(
                key, None
            )  # a volume written again moves to the end: the order rows are written in
            if kind == VOLUME:
                carried[key] = row
    yield from flush()
