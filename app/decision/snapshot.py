"""The decider's state between rounds as bytes, and back: what a restarted service or another
replica needs to decide exactly as this one would.

A decision is a function of what the decider keeps between rounds, not only of the latest
round: the cached observations (a fenced broker's kept one, a missing broker's), when each was
last confirmed, the volumes remembered in breach (hysteresis), the fill trends of the
time-to-full rule and the volumes it holds, the nodes' reports and their verdicts, and the
factor lifecycle (the last valid timeline, what a failed round still knew). A snapshot holds
all of it; ``restore_decider`` puts it into a decider built with the same settings, which then
answers every read, and every later round, as the one it was taken from.

Pure: no I/O, no clock. Cheap enough to take every round at 12,000 volumes: the numbers go into
typed arrays (``array``), not JSON text, and an observation shared by the cache and the
timelines is written once. The format is versioned; a snapshot of another format, or one that
does not parse, is refused with ``SnapshotError`` (the caller starts afresh and says so).

Safe to read from a shared topic: JSON and raw arrays of numbers only, nothing executable."""

from __future__ import annotations

import gc
import json
import struct
import sys
import weakref
from array import array
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, compress
from operator import attrgetter, eq, not_
from typing import TYPE_CHECKING, Any

import pydantic_core

from app.decision.fill_rate import FillTrend, TimeToFull
from app.decision.horizon import MAX_TREND_OBSERVATIONS
from app.decision.merge import MergedTimeline, round_view
from app.decision.policy import StoragePolicy, VolumeStatus, VolumeVerdict
from app.decision.timeline import SteadyTimeline, Timeline, ViewTimeline
from app.observation.cache import VolumeCache
from app.observation.model import (
    BROKER_ID,
    ERROR,
    LOG_DIR,
    OBSERVED_AT,
    TOTAL_BYTES,
    USABLE_BYTES,
    ObservationRound,
    VolumeKey,
    VolumeObservation,
)
from app.observation.node_reports import NodeReport, NodeVolume

if TYPE_CHECKING:
    from app.decision.decider import ThrottleDecider
    from app.decision.metadata import MetadataWatch

MAGIC = b"KTDS"
FORMAT = 1
_HEADER = struct.Struct("<4sII")  # magic, format, header length
_NAN = float("nan")


class SnapshotError(ValueError):
    """The bytes are not a snapshot this version can restore."""


@dataclass(frozen=True, slots=True)
class Restored:
    """What a restore brought back."""

    saved_at: float  # when the snapshot was taken
    exact: bool  # the settings matched: everything was restored; else only the observations
    volumes: int
    node_reports: int
    trends: int


def settings_fingerprint(decider: ThrottleDecider) -> dict[str, Any]:
    """The settings a snapshot's meaning rests on: with others, only the facts carry over."""

    def policy(p: StoragePolicy | None) -> list[Any] | None:
        return None if p is None else [p.kind.value, p.hard_level, p.soft_level, p.hysteresis]

    return {
        "policy": policy(decider.policy),
        "metadata_policy": policy(decider.metadata.policy),
        "validity": decider.validity_seconds,
        "fallback": decider.fallback,
        "keep_fenced": decider.cache.keeps_fenced,
        "horizon": decider.horizon.horizon_seconds if decider.horizon is not None else None,
    }


# -- writing -------------------------------------------------------------------------------------


class _Writer:
    """Collects the observations (each once), the strings and the arrays of a snapshot."""

    def __init__(self) -> None:
        self._index: dict[int, int] | None = None  # id(observation) -> its position, once asked
        self._observations: list[VolumeObservation] = []
        self._strings: dict[str, int] = {}
        self.arrays: dict[str, array[int] | array[float]] = {}

    def observations(self, volumes: Iterable[VolumeObservation]) -> list[int]:
        """The positions of ``volumes`` in the pool, adding those not in it yet."""
        pool = self._observations
        if not pool:  # the first set (the cache's): all new, distinct
            pool.extend(volumes)
            return list(range(len(pool)))
        index = self._index
        if index is None:  # most snapshots need none: their timelines are the cache's view
            index = self._index = dict(zip(map(id, pool), range(len(pool))))
        positions = [index.get(id(v), -1) for v in volumes]
        if -1 in positions:
            volumes = list(volumes) if not isinstance(volumes, list) else volumes
            for i, position in enumerate(positions):
                if position == -1:
                    volume = volumes[i]
                    pooled = index.get(id(volume), -1)
                    if pooled == -1:
                        pooled = index[id(volume)] = len(pool)
                        pool.append(volume)
                    positions[i] = pooled
        return positions

    def string(self, text: str) -> int:
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self._strings)
        return index

    def strings_of(self, texts: list[str]) -> list[int]:
        # Few distinct names (a broker's log dirs) among many entries: look each up once.
        table = {text: self.string(text) for text in set(texts)}
        return list(map(table.__getitem__, texts))

    def key(self, key: VolumeKey) -> list[Any]:
        return [key[0], self.string(key[1])]

    def keys(self, name: str, keys: list[VolumeKey]) -> None:
        """Many keys, as two arrays (broker ids, log dir strings)."""
        self.arrays[f"{name}_brokers"] = array("q", [k[0] for k in keys])
        self.arrays[f"{name}_dirs"] = array("q", self.strings_of([k[1] for k in keys]))

    def pool(self) -> dict[str, Any]:
        volumes = self._observations
        # Whole columns, gathered in C (map, attrgetter): this runs for every volume every round.
        self.arrays["obs_broker"] = array("q", list(map(BROKER_ID, volumes)))
        self.arrays["obs_dir"] = array("q", self.strings_of(list(map(LOG_DIR, volumes))))
        self.arrays["obs_total"] = array("q", list(map(TOTAL_BYTES, volumes)))
        self.arrays["obs_usable"] = array("q", list(map(USABLE_BYTES, volumes)))
        self.arrays["obs_at"] = array("d", list(map(OBSERVED_AT, volumes)))
        errors_column = list(map(ERROR, volumes))
        errors = (
            {str(i): error for i, error in enumerate(errors_column) if error is not None}
            if errors_column.count(None) != len(errors_column)
            else {}
        )
        return {"count": len(volumes), "errors": errors}

    def strings(self) -> list[str]:
        return list(self._strings)

    def encode(self, header: dict[str, Any]) -> bytes:
        blobs, offset, layout = [], 0, {}
        for name, values in self.arrays.items():
            if sys.byteorder != "little":
                swapped = array(values.typecode, values)
                swapped.byteswap()
                blob = swapped.tobytes()
            else:
                blob = values.tobytes()
            layout[name] = [values.typecode, offset, len(values)]
            blobs.append(blob)
            offset += len(blob)
        header["arrays"] = layout
        text = to_json(header)
        return _HEADER.pack(MAGIC, FORMAT, len(text)) + text + b"".join(blobs)


def _timeline(
    writer: _Writer, timeline: Timeline | None, name: str, validity: float
) -> dict[str, Any] | None:
    timeline = round_view(timeline)  # the reports over it are written as node reports
    if timeline is None:
        return None
    if isinstance(timeline, SteadyTimeline):
        step = timeline.at(timeline.end)
        assert step is not None
        return {
            "kind": "steady",
            "factor": step.factor,
            "start": step.start,
            "until": step.valid_until,
        }
    assert isinstance(timeline, ViewTimeline)
    groups = timeline._groups  # noqa: SLF001 - the snapshot is the timeline's own serialisation
    bounds, members, counts = [], array("q"), array("q")
    for bound, volumes in groups.items():
        bounds.append(bound)
        indexes = writer.observations(volumes)
        members.extend(indexes)
        counts.append(len(indexes))
    writer.arrays[f"{name}_members"] = members
    writer.arrays[f"{name}_counts"] = counts
    writer.arrays[f"{name}_bounds"] = array("d", bounds)
    return {
        "kind": "view",
        "start": timeline._start,  # noqa: SLF001
        "validity": validity,  # what an empty view is valid for
        "breaching": [writer.key(k) for k in timeline._breaching],  # noqa: SLF001
        "times_to_full": _times_to_full(writer, timeline._times_to_full),  # noqa: SLF001
    }


def _cache_view(view: Timeline | None) -> dict[str, Any] | None:
    """The latest round's view: its groups are the cache's by expiry (the cache changes only in
    a round, which builds the view from it), so only what else it rests on is written."""
    view = round_view(view)
    if view is None:
        return None
    assert isinstance(view, ViewTimeline)
    times_to_full = view._times_to_full  # noqa: SLF001
    return {
        "kind": "cache",
        "start": view._start,  # noqa: SLF001
        "breaching": [[k[0], k[1]] for k in view._breaching],  # noqa: SLF001
        "times_to_full": None
        if times_to_full is None
        else [
            [k[0], k[1], t.fill_rate, t.seconds_to_hard_limit, t.factor]
            for k, t in times_to_full.items()
        ],
    }


def _times_to_full(
    writer: _Writer, times: Mapping[VolumeKey, TimeToFull] | None
) -> list[Any] | None:
    if times is None:
        return None
    return [
        [*writer.key(k), t.fill_rate, t.seconds_to_hard_limit, t.factor] for k, t in times.items()
    ]


def _floats(values: Iterable[float | None]) -> array[float]:
    """Numbers or None (NaN in the array)."""
    return array("d", [_NAN if v is None else v for v in values])


def _repeated(lists: list[list[float]]) -> tuple[array[int], list[float]]:
    """Lists that often equal the one before (the times and factors applied of one broker's log
    dirs, observed in the same rounds): a flag for each (1: the same as the one before) and the
    others' values, flattened. Compared and gathered in C (map, compress, chain)."""
    same = [False, *map(eq, lists, lists[1:])] if lists else []
    values = list(chain.from_iterable(compress(lists, map(not_, same))))
    return array("b", same), values


def _trends(writer: _Writer, trends: Mapping[VolumeKey, FillTrend]) -> dict[str, Any]:
    # This runs for every volume every round: whole columns, iterated in C (map, chain).
    values = list(trends.values())
    writer.keys("trend", list(trends))
    times, usable, weights = (
        list(map(attrgetter(name), values)) for name in ("times", "usable", "weights")
    )
    times_same, times_values = _repeated(times)
    weights_same, weights_values = _repeated(weights)
    slopes = list(map(attrgetter("_slopes"), values))
    writer.arrays.update(
        trend_counts=array("q", list(map(len, times))),
        trend_times_same=times_same,
        trend_times=array("d", times_values),
        trend_usable=array("d", list(chain.from_iterable(usable))),
        trend_weights_same=weights_same,
        trend_weights=array("d", weights_values),
        trend_slope_counts=array("q", [-1 if s is None else len(s) for s in slopes]),
        trend_slopes=array("d", list(chain.from_iterable(filter(None, slopes)))),
        trend_previous=_floats(map(attrgetter("_previous"), values)),
        trend_before=_floats(map(attrgetter("_before"), values)),
        trend_rates=_floats(map(attrgetter("fill_rate"), values)),
    )
    return {"count": len(values)}


def to_json(data: Any) -> bytes:
    """``data`` (JSON-ready: dicts, lists, strings, numbers, None) as compact JSON, NaN and the
    infinities written as Python's ``json`` writes and reads them: a snapshot of 1,000 nodes'
    reports is written every second while they report, and pydantic-core's writer takes a
    fifth of the time of the standard library's."""
    return pydantic_core.to_json(data, inf_nan_mode="constants")


def _sorted_names(names: frozenset[str]) -> list[str]:
    """``sorted(names)``: the few sets of roles and holdings, each sorted once (the lists are
    only read)."""
    listed = _SORTED_NAMES.get(names)
    if listed is None:
        listed = sorted(names)
        if len(_SORTED_NAMES) < 64:
            _SORTED_NAMES[names] = listed
    return listed


_SORTED_NAMES: dict[frozenset[str], list[str]] = {}


def encode_node_report(report: NodeReport) -> dict[str, Any]:
    """A node report as JSON-ready data (the state topic carries reports so too)."""
    return {
        "node": report.node_id,
        "roles": _sorted_names(report.roles),
        "at": report.received_at,
        "volumes": [
            (v.log_dir, v.total_bytes, v.usable_bytes, _sorted_names(v.holds))
            for v in report.volumes
        ],
    }


def _verdict(verdict: VolumeVerdict) -> list[Any]:
    ttf = verdict.time_to_full
    return [
        verdict.status.value,
        verdict.factor,
        verdict.reason,
        None if ttf is None else [ttf.fill_rate, ttf.seconds_to_hard_limit, ttf.factor],
    ]


def _judged_node(judged: Any) -> dict[str, Any]:
    return {
        **encode_node_report(judged.report),
        "verdicts": [_verdict(v) for v in judged.verdicts],
    }


# Per watch, each node's judged report and its encoding in the latest snapshot: a snapshot is
# taken every second while nodes report, and at the shims' 5-s interval four nodes in five have
# not reported since the last one (their judged report is the same object, encoded the same).
_ENCODED: weakref.WeakKeyDictionary[MetadataWatch, dict[int, tuple[Any, dict[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)


def _metadata(watch: MetadataWatch) -> dict[str, Any]:
    book = watch.book
    judged_nodes, reports = watch._judged, book._reports  # noqa: SLF001
    before = _ENCODED.get(watch, {})
    encoded = {}
    for node, judged in judged_nodes.items():
        kept = before.get(node)
        encoded[node] = (
            kept if kept is not None and kept[0] is judged else (judged, _judged_node(judged))
        )
    _ENCODED[watch] = encoded
    return {
        "initial_until": watch._initial_until,  # noqa: SLF001
        "latest_expiry": watch._latest_expiry,  # noqa: SLF001
        "confirmed": [[node, at] for node, at in book._confirmed.items()],  # noqa: SLF001
        "nodes": [node for _, node in encoded.values()],
        # A report the book holds without a judged twin (none today): kept as a report.
        "unjudged": [encode_node_report(r) for n, r in reports.items() if n not in judged_nodes],
    }


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Tens of thousands of objects made at once: the cyclic collector, run every few hundred
    allocations, would walk them again and again (a third of a restore's time), and none of
    them can be garbage before the restore ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def snapshot_decider(decider: ThrottleDecider, saved_at: float) -> bytes:
    """Everything ``decider`` keeps between rounds, as bytes."""
    with _collector_paused():
        return _snapshot(decider, saved_at)


def _snapshot(decider: ThrottleDecider, saved_at: float) -> bytes:
    writer = _Writer()
    cache = decider.cache
    entries = writer.observations(cache._entries.values())  # noqa: SLF001
    holder = decider.holder
    view = decider._view  # noqa: SLF001
    last_valid, known = holder._last_valid, holder._known  # noqa: SLF001
    header: dict[str, Any] = {
        "saved_at": saved_at,
        "settings": settings_fingerprint(decider),
        "cache": {
            "entries": entries,
            "confirmed": [[*writer.key(k), at] for k, at in cache._confirmed.items()],  # noqa: SLF001
            "fenced": sorted(cache.fenced),
        },
        "decider": {
            "active": list(decider.active_brokers),
            "fenced": list(decider.fenced_brokers),
            "last_success_at": decider.last_success_at,
            "breaching": [writer.key(k) for k in decider._breaching],  # noqa: SLF001
            "latest_round": _round(decider.latest_round),
        },
        "view": _cache_view(view),
        "holder": {
            "initial": holder._initial,  # noqa: SLF001
            "latest_succeeded": holder._latest_succeeded,  # noqa: SLF001
            # The last valid timeline is most often the view itself: written once.
            "last_valid": "view"
            if last_valid is view
            else _timeline(writer, last_valid, "last_valid", decider.validity_seconds),
            "known": "view"
            if known is not None and known is view
            else _timeline(writer, known, "known", decider.validity_seconds),
        },
        "metadata": _metadata(decider.metadata),
        # The reports' data dirs: their verdicts held in breach, the discrepancy episodes.
        "reported": {
            "breaching": [writer.key(k) for k in decider.reported.breaching_keys()],
            "disagreeing": [writer.key(k) for k in sorted(decider.reported.disagreeing)],
        },
    }
    horizon = decider.horizon
    if horizon is not None:
        header["horizon"] = {
            "trends": _trends(writer, horizon._trends),  # noqa: SLF001
            "rates": _rates(writer, horizon.rates),
            "at_risk": _times_to_full(writer, horizon._at_risk),  # noqa: SLF001
            "held_at": [[*writer.key(k), at] for k, at in horizon._held_at.items()],  # noqa: SLF001
        }
    header["observations"] = writer.pool()
    header["strings"] = writer.strings()
    return writer.encode(header)


def _rates(writer: _Writer, rates: Mapping[VolumeKey, float | None]) -> int:
    writer.keys("rate", list(rates))
    writer.arrays["rate_values"] = _floats(rates.values())
    return len(rates)


def _round(round_: ObservationRound | None) -> dict[str, Any] | None:
    """What the decision shows of the latest round (its observations are in the cache)."""
    if round_ is None:
        return None
    return {
        "started_at": round_.started_at,
        "finished_at": round_.finished_at,
        "active": list(round_.active_brokers),
        "fenced": list(round_.fenced_brokers),
        "missing": [[b, r] for b, r in round_.missing_brokers.items()],
        "error": round_.error,
    }


# -- reading -------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes) -> None:
        try:
            magic, version, length = _HEADER.unpack_from(data)
        except struct.error as exc:
            raise SnapshotError("too short to be a decider snapshot") from exc
        if magic != MAGIC:
            raise SnapshotError("not a decider snapshot")
        if version != FORMAT:
            raise SnapshotError(f"snapshot format {version}; this version reads format {FORMAT}")
        try:
            self.header: dict[str, Any] = json.loads(data[_HEADER.size : _HEADER.size + length])
            body = memoryview(data)[_HEADER.size + length :]
            # the type codes come from the snapshot's header
            self.arrays: dict[str, array[Any]] = {}
            for name, (typecode, offset, count) in self.header["arrays"].items():
                values = array(typecode)
                end = offset + count * values.itemsize
                if end > len(body):
                    raise SnapshotError(f"snapshot cut short in {name}")
                values.frombytes(body[offset:end])
                if sys.byteorder != "little":
                    values.byteswap()
                self.arrays[name] = values
            self.strings: list[str] = self.header["strings"]
            self.observations = self._pool(self.header["observations"])
        except SnapshotError:
            raise
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise SnapshotError(f"snapshot does not parse: {type(exc).__name__}: {exc}") from exc

    def _pool(self, pool: dict[str, Any]) -> list[VolumeObservation]:
        a = self.arrays
        strings = self.strings
        errors = pool["errors"]
        columns = (
            a[name].tolist()
            for name in ("obs_broker", "obs_dir", "obs_total", "obs_usable", "obs_at")
        )
        volumes = [
            VolumeObservation(broker, strings[d], total, usable, at)
            for broker, d, total, usable, at in zip(*columns, strict=True)
        ]
        for i, error in errors.items():
            v = volumes[int(i)]
            volumes[int(i)] = VolumeObservation(
                v.broker_id, v.log_dir, v.total_bytes, v.usable_bytes, v.observed_at, error
            )
        return volumes

    def key(self, encoded: list[Any]) -> VolumeKey:
        return (int(encoded[0]), self.strings[encoded[1]])

    def keys(self, name: str) -> list[VolumeKey]:
        strings = self.strings
        return list(
            zip(
                self.arrays[f"{name}_brokers"].tolist(),
                [strings[d] for d in self.arrays[f"{name}_dirs"].tolist()],
                strict=True,
            )
        )

    def timeline(
        self,
        encoded: dict[str, Any] | None,
        name: str,
        policy: StoragePolicy,
        cache: VolumeCache | None = None,
    ) -> Timeline | None:
        if encoded is None:
            return None
        if encoded["kind"] == "cache":
            assert cache is not None
            return ViewTimeline(
                policy,
                cache.by_expiry(),
                frozenset((int(b), d) for b, d in encoded["breaching"]),
                encoded["start"],
                cache.validity_seconds,
                None
                if encoded["times_to_full"] is None
                else {
                    (int(b), d): TimeToFull(r, sec, f)
                    for b, d, r, sec, f in encoded["times_to_full"]
                },
            )
        if encoded["kind"] == "steady":
            return SteadyTimeline(encoded["factor"], encoded["start"], encoded["until"])
        members = self.arrays[f"{name}_members"].tolist()
        counts, bounds = (
            self.arrays[f"{name}_counts"].tolist(),
            self.arrays[f"{name}_bounds"].tolist(),
        )
        observations = self.observations
        groups: dict[float, list[VolumeObservation]] = {}
        position = 0
        for bound, count in zip(bounds, counts, strict=True):
            groups[bound] = [observations[i] for i in members[position : position + count]]
            position += count
        return ViewTimeline(
            policy,
            groups,
            frozenset(self.key(k) for k in encoded["breaching"]),
            encoded["start"],
            encoded["validity"],
            self.times_to_full(encoded["times_to_full"]),
        )

    def times_to_full(self, encoded: list[Any] | None) -> dict[VolumeKey, TimeToFull] | None:
        if encoded is None:
            return None
        return {
            (int(b), self.strings[d]): TimeToFull(rate, seconds, factor)
            for b, d, rate, seconds, factor in encoded
        }


def decode_node_report(encoded: dict[str, Any]) -> NodeReport:
    volumes = tuple(
        NodeVolume(d, total, usable, frozenset(holds))
        for d, total, usable, holds in encoded["volumes"]
    )
    return NodeReport(
        int(encoded["node"]), frozenset(encoded["roles"]), volumes, float(encoded["at"])
    )


def _nan_none(values: array[float]) -> list[float | None]:
    # NaN stands for None; only NaN differs from itself (cheaper than math.isnan per element)
    return [None if v != v else v for v in values.tolist()]  # noqa: PLR0124


def _unrepeated(counts: list[int], same: list[int], values: list[float]) -> list[list[float]]:
    """The lists ``_repeated`` wrote, each a list of its own (a trend changes its lists in place)."""
    out: list[list[float]] = []
    position = 0
    for count, repeated in zip(counts, same, strict=True):
        if repeated:
            out.append(list(out[-1]))
        else:
            out.append(values[position : position + count])
            position += count
    return out


def _restore_trends(decider: ThrottleDecider, reader: _Reader, encoded: dict[str, Any]) -> int:
    horizon = decider.horizon
    assert horizon is not None
    a = reader.arrays
    counts, slope_counts = a["trend_counts"].tolist(), a["trend_slope_counts"].tolist()
    usable, slopes = a["trend_usable"].tolist(), a["trend_slopes"].tolist()
    times = _unrepeated(counts, a["trend_times_same"].tolist(), a["trend_times"].tolist())
    weights = _unrepeated(counts, a["trend_weights_same"].tolist(), a["trend_weights"].tolist())
    previous, before, rates = (
        _nan_none(a[name]) for name in ("trend_previous", "trend_before", "trend_rates")
    )
    trends: dict[VolumeKey, FillTrend] = {}
    position = slope_position = 0
    window = horizon.window_seconds
    for i, key in enumerate(reader.keys("trend")):
        end = position + counts[i]
        trend = FillTrend(window, MAX_TREND_OBSERVATIONS)
        trend.times, trend.usable, trend.weights = times[i], usable[position:end], weights[i]
        position = end
        slope_count = slope_counts[i]
        if slope_count >= 0:
            trend._slopes = slopes[slope_position : slope_position + slope_count]  # noqa: SLF001
            slope_position += slope_count
        trend._previous, trend._before, trend.fill_rate = previous[i], before[i], rates[i]  # noqa: SLF001
        trends[key] = trend
    horizon._trends = trends  # noqa: SLF001
    horizon.rates = dict(zip(reader.keys("rate"), _nan_none(a["rate_values"]), strict=True))
    horizon._at_risk = reader.times_to_full(encoded["at_risk"]) or {}  # noqa: SLF001
    horizon._held_at = {reader.key([b, d]): at for b, d, at in encoded["held_at"]}  # noqa: SLF001
    return len(trends)


def _restore_metadata(
    decider: ThrottleDecider, reader: _Reader, encoded: dict[str, Any], exact: bool
) -> int:
    from app.decision.metadata import _Judged

    watch = decider.metadata
    book = watch.book
    nodes = encoded["nodes"]
    for node in sorted(nodes, key=lambda n: n["at"]) if not exact else nodes:
        report = decode_node_report(node)
        if not exact:
            watch.record(report)  # judged again by this decider's metadata limits
            continue
        verdicts = []
        for (observation, _), (status, factor, reason, ttf) in zip(
            report.observations(), node["verdicts"], strict=True
        ):
            time_to_full = None if ttf is None else TimeToFull(*ttf)
            verdicts.append(
                VolumeVerdict(observation, VolumeStatus(status), factor, reason, time_to_full)
            )
        entries = tuple(entry for _, entry in report.observations())
        mutation = min((v.factor for v in verdicts), default=1.0)
        data = min(
            (v.factor for v, e in zip(verdicts, entries, strict=True) if e.holds_data), default=1.0
        )
        judged = _Judged(report, tuple(verdicts), entries, mutation, data)
        book._reports[report.node_id] = report  # noqa: SLF001
        watch._judged[report.node_id] = judged  # noqa: SLF001
        if judged.listed:
            watch._listed[report.node_id] = judged  # noqa: SLF001
    for node in encoded["unjudged"]:
        report = decode_node_report(node)
        book._reports[report.node_id] = report  # noqa: SLF001
    book._confirmed = {int(n): at for n, at in encoded["confirmed"] if int(n) in book._reports}  # noqa: SLF001
    if exact:
        watch._initial_until = encoded["initial_until"]  # noqa: SLF001
        watch._latest_expiry = encoded["latest_expiry"]  # noqa: SLF001
    else:
        for node_id in book._confirmed:  # noqa: SLF001
            confirmed = watch._judged.get(node_id)  # noqa: SLF001
            if confirmed is not None and confirmed.verdicts:
                watch._extend_view(confirmed.report)  # noqa: SLF001
    return len(book._reports)  # noqa: SLF001


def restore_decider(
    decider: ThrottleDecider, data: bytes, now: float, exact_only: bool = False
) -> Restored:
    """Put the state in ``data`` into ``decider`` (freshly built: nothing recorded yet).

    With the settings the snapshot was taken under, everything comes back: the decider then
    decides as the one it was taken from. With other settings (limits, validity, horizon), only
    the facts do: the cached observations and when they were confirmed, the nodes' reports
    (judged again), the fill trends (with a horizon on both sides); the decider judges them
    afresh at its first round, and until then serves what it serves at start-up.

    A last valid factor that had already expired at ``now`` is not brought back either: the
    service starts as from nothing but the facts (the start-up grace, then its first round)."""
    with _collector_paused():
        return _restore_from(decider, data, now, exact_only)


def _restore_from(decider: ThrottleDecider, data: bytes, now: float, exact_only: bool) -> Restored:
    reader = _Reader(data)
    header = reader.header
    try:
        exact = header["settings"] == settings_fingerprint(decider)
        if exact_only and not exact:
            raise SnapshotError("the snapshot was taken under other settings")
        return _restore(decider, reader, header, exact, now)
    except SnapshotError:
        raise
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise SnapshotError(f"snapshot does not parse: {type(exc).__name__}: {exc}") from exc


def _restore(
    decider: ThrottleDecider, reader: _Reader, header: dict[str, Any], exact: bool, now: float
) -> Restored:
    _restore_cache(decider.cache, reader, header["cache"])
    _restore_round_state(decider, header["decider"])
    trends = 0
    if decider.horizon is not None and "horizon" in header:
        trends = _restore_trends(decider, reader, header["horizon"])
        if not exact:  # the volumes held are judged again at the next round
            decider.horizon._at_risk = {}  # noqa: SLF001
            decider.horizon._held_at = {}  # noqa: SLF001
    nodes = _restore_metadata(decider, reader, header["metadata"], exact)
    view = (
        reader.timeline(header["view"], "view", decider.policy, decider.cache)
        if exact and header["view"] is not None
        else None
    )
    assert view is None or isinstance(view, ViewTimeline)
    _restore_reported(decider, reader, header, exact, view)
    if exact:
        _restore_exact(decider, reader, header, view, now)
    return Restored(float(header["saved_at"]), exact, len(decider.cache), nodes, trends)


def _restore_cache(cache: VolumeCache, reader: _Reader, cached: dict[str, Any]) -> None:
    observations = reader.observations
    entries = [observations[i] for i in cached["entries"]]
    cache._entries = {(o.broker_id, o.log_dir): o for o in entries}  # noqa: SLF001
    cache._confirmed = {reader.key([b, d]): at for b, d, at in cached["confirmed"]}  # noqa: SLF001
    cache._fenced = frozenset(cached["fenced"])  # noqa: SLF001


def _restore_round_state(decider: ThrottleDecider, state: dict[str, Any]) -> None:
    decider.active_brokers = tuple(state["active"])
    decider.fenced_brokers = tuple(state["fenced"])
    latest = state["latest_round"]
    if latest is not None:
        decider.latest_round = ObservationRound(
            latest["started_at"],
            latest["finished_at"],
            active_brokers=tuple(latest["active"]),
            missing_brokers={int(b): r for b, r in latest["missing"]},
            error=latest["error"],
            fenced_brokers=tuple(latest["fenced"]),
        )


def _restore_reported(
    decider: ThrottleDecider,
    reader: _Reader,
    header: dict[str, Any],
    exact: bool,
    view: ViewTimeline | None,
) -> None:
    """The reports' data dirs over the view (a snapshot from before them has none)."""
    reported = header.get("reported", {"breaching": [], "disagreeing": []})
    decider.reported.restore(
        list(decider.metadata.book._reports.values()),  # noqa: SLF001
        frozenset(reader.key(k) for k in reported["breaching"]) if exact else frozenset(),
        frozenset(reader.key(k) for k in reported["disagreeing"]),
        view,
    )


def _restore_exact(
    decider: ThrottleDecider,
    reader: _Reader,
    header: dict[str, Any],
    view: ViewTimeline | None,
    now: float,
) -> None:
    """What only a snapshot taken under the same settings restores: the view, the breaching
    volumes and the factor lifecycle, exactly as they were."""
    state = header["decider"]
    decider.last_success_at = state["last_success_at"]
    decider._breaching = frozenset(reader.key(k) for k in state["breaching"])  # noqa: SLF001
    merged = MergedTimeline(view, decider.reported) if view is not None else None
    decider._view = merged  # noqa: SLF001
    if merged is not None and decider.latest_round is not None:
        step = merged.at(decider.latest_round.finished_at)
        decider.evaluation = step.evaluation if step is not None else None
    encoded = header["holder"]
    last_valid = (
        merged
        if encoded["last_valid"] == "view"
        else reader.timeline(encoded["last_valid"], "last_valid", decider.policy)
    )
    known = (
        merged
        if encoded["known"] == "view"
        else reader.timeline(encoded["known"], "known", decider.policy)
    )
    holder = decider.holder
    if last_valid is not None and last_valid.at(now) is not None:
        holder._last_valid = last_valid  # noqa: SLF001
        holder._initial = encoded["initial"]  # noqa: SLF001
        holder._latest_succeeded = encoded["latest_succeeded"]  # noqa: SLF001
    holder._known = known  # noqa: SLF001
