"""History rows of one observation round. Pure: no I/O, no clock."""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

from app.decision.decision import Decision
from app.decision.fill_rate import seconds_to_limit
from app.decision.metadata import MetadataVerdict
from app.decision.policy import LimitKind, VolumeStatus, VolumeVerdict, rule_of
from app.history.schema import FIELD_NAMES
from app.observation.model import ADMIN_API, NODE_REPORT, ObservationRound, VolumeObservation
from app.observation.node_reports import DATA
from app.timefmt import iso_instant

HistoryRow = dict[str, Any]


# A row's fields of one volume: null in the row of a round that observed none.
_VOLUME_FIELDS = (
    "broker_id", "log_dir", "total_bytes", "usable_bytes", "available_ratio", "log_dir_error",
    "observed_at", "observation_age_seconds", "kept", "volume_status", "volume_factor",
)  # fmt: skip
_OWN_FIELDS = 9  # the volume's own fields come before the limits, its verdict after them


class _Unrated(enum.Enum):
    """A volume the horizon rule has no rate for (or no horizon): a marker apart from None,
    which is a rate the rule could not measure."""

    UNRATED = enum.auto()


_UNRATED = _Unrated.UNRATED
# A volume's time to full (with a horizon) and the rule that slows it: after the round's fields.
_TIME_FIELDS = ("fill_rate_bytes_per_second", "seconds_to_hard_limit", "volume_rule")


class _Provenance:
    """Where each observation a round's decision rested on came from: its time and age as
    text, memoized per observed_at (a round's observations share a few), and why it was kept
    (memoized per broker)."""

    def __init__(self, round_: ObservationRound) -> None:
        self._round = round_
        self._times: dict[float, tuple[str, float]] = {}
        self._kept: dict[int, str | None] = {}

    def time_and_age(self, volume: VolumeObservation) -> tuple[str, float]:
        known = self._times.get(volume.observed_at)
        if known is None:
            at = volume.observed_at
            known = self._times[at] = (
                iso_instant(at) or "",
                round(max(0.0, self._round.finished_at - at), 3),
            )
        return known

    def kept(self, volume: VolumeObservation) -> str | None:
        broker = volume.broker_id
        if broker not in self._kept:
            reason = self._round.kept_reason(broker)
            self._kept[broker] = None if reason is None else reason.value
        return self._kept[broker]

    def encoded(self, volume: VolumeObservation) -> str:
        """The three fields as ``round_lines`` writes them, after log_dir_error."""
        observed_at, age = self.time_and_age(volume)
        return (
            f',"observed_at":{ROW_ENCODER.encode(observed_at)},"observation_age_seconds":{ROW_ENCODER.encode(age)},'
            f'"kept":{ROW_ENCODER.encode(self.kept(volume))}'
        )


def _view(round_: ObservationRound, decision: Decision) -> Sequence[VolumeObservation]:
    """What the decision rested on: the observations in its view (the round's own, and those
    kept from earlier rounds); a decision without a view (observation off), the round's own."""
    return decision.volumes if decision.evaluation is not None else round_.observations


def _metadata_volumes(decision: Decision) -> Sequence[MetadataVerdict]:
    """The metadata log volumes the decision judged: only with metadata limits set."""
    return decision.metadata.volumes if decision.metadata_policy is not None else ()


def row_count(round_: ObservationRound, decision: Decision) -> int:
    """How many rows ``round_rows`` gives for the round."""
    return max(1, len(_view(round_, decision))) + len(_metadata_volumes(decision))


def _enforcement_fields(decision: Decision) -> dict[str, Any]:
    """Whether the decision bit, and on which brokers."""
    canary = decision.enforcement.canary_brokers
    return {
        "enforced": decision.enforced,
        "canary_brokers": ",".join(map(str, canary)) if canary else None,
    }


def _time_to_full(
    decision: Decision, volume: VolumeObservation
) -> tuple[float | None, float | None]:
    """The fill rate the horizon rule estimated for ``volume`` and the seconds to its hard limit
    at that rate (both None without a horizon or an estimate)."""
    rates = decision.fill_rates
    if rates is None or volume.key not in rates:
        return None, None
    rate = rates[volume.key]
    policy = decision.policy
    hard = (
        policy.hard_level
        if policy.kind is LimitKind.MIN_AVAILABLE_BYTES
        else policy.hard_level * volume.total_bytes
    )
    return rate, seconds_to_limit(volume.usable_bytes, hard, rate)


def _volume_rule(verdict: VolumeVerdict | None) -> str | None:
    return rule_of(verdict.reason) if verdict is not None else None


def _metadata_rows(
    round_: ObservationRound, decision: Decision, common: dict[str, Any]
) -> list[HistoryRow]:
    """One row per metadata log volume, judged by the metadata limits."""
    policy = decision.metadata_policy
    if policy is None:
        return []
    rows = []
    for volume in decision.metadata.volumes:
        observed, verdict = volume.verdict.volume, volume.verdict
        rows.append(
            {
                **common,
                "broker_id": observed.broker_id,
                "log_dir": observed.log_dir,
                "total_bytes": observed.total_bytes,
                "usable_bytes": observed.usable_bytes,
                "available_ratio": observed.available_ratio,
                "log_dir_error": None,
                "observed_at": iso_instant(observed.observed_at),
                "observation_age_seconds": round(
                    max(0.0, round_.finished_at - observed.observed_at), 3
                ),
                "kept": None,
                "limit_kind": policy.kind.value,
                "hard_limit": policy.hard_level,
                "soft_limit": policy.soft_level,
                "volume_status": verdict.status.value,
                "volume_factor": verdict.factor,
                **dict.fromkeys(_TIME_FIELDS),
                "holds": ",".join(sorted(volume.entry.holds)),
                "observed_by": NODE_REPORT,
            }
        )
    return rows


def _common_fields(
    round_: ObservationRound, decision: Decision, check_interval_seconds: float
) -> HistoryRow:
    """The fields every row of a round shares."""
    policy = decision.policy
    return {
        "time": iso_instant(round_.finished_at),
        "limit_kind": policy.kind.value,
        "hard_limit": policy.hard_level,
        "soft_limit": policy.soft_level,
        "cluster_factor": decision.factor,
        "state": decision.state.value,
        "source": decision.source.value,
        "round_complete": round_.complete,
        "check_interval_seconds": check_interval_seconds,
        **_enforcement_fields(decision),
        "rule": rule_of(decision.rule),
        "mutation_factor": decision.mutation_factor,
    }


def round_rows(
    round_: ObservationRound, decision: Decision, check_interval_seconds: float
) -> list[HistoryRow]:
    """One row per volume in the view the round's decision rested on (``_view``), or one row
    without a volume when that is empty; ``decision`` is the one the round led to."""
    evaluation = decision.evaluation
    verdicts = (
        (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged) if evaluation else ()
    )
    listed = {v.volume.key: v for v in verdicts}
    common = _common_fields(round_, decision, check_interval_seconds)
    rows: list[HistoryRow] = []
    provenance = _Provenance(round_)
    for volume in _view(round_, decision):
        verdict = listed.get(volume.key)
        observed_at, age = provenance.time_and_age(volume)
        rows.append(
            {
                **common,
                "broker_id": volume.broker_id,
                "log_dir": volume.log_dir,
                "total_bytes": volume.total_bytes,
                "usable_bytes": volume.usable_bytes,
                "available_ratio": volume.available_ratio,
                "log_dir_error": volume.error,
                "observed_at": observed_at,
                "observation_age_seconds": age,
                "kept": provenance.kept(volume),
                "volume_status": verdict.status.value if verdict else VolumeStatus.OK.value,
                "volume_factor": verdict.factor if verdict else 1.0,
                **dict(
                    zip(_TIME_FIELDS, (*_time_to_full(decision, volume), _volume_rule(verdict)))
                ),
                "holds": DATA,
                "observed_by": volume.observed_by,
            }
        )
    if not rows:
        rows.append(
            {
                **common,
                **dict.fromkeys(_VOLUME_FIELDS + _TIME_FIELDS),
                "holds": None,
                "observed_by": None,
            }
        )
    rows += _metadata_rows(round_, decision, common)
    # The declared field order, so every line reads the same.
    return [{name: row[name] for name in FIELD_NAMES} for row in rows]


# The writer's encoding of a row: compact, ASCII, the declared field order (round_lines).
ROW_ENCODER = json.JSONEncoder(separators=(",", ":"))
# round_lines writes the fields in this order; the schema declares it.
assert tuple(FIELD_NAMES) == (
    "time",
    *_VOLUME_FIELDS[:_OWN_FIELDS],
    "limit_kind",
    "hard_limit",
    "soft_limit",
    *_VOLUME_FIELDS[_OWN_FIELDS:],
    "cluster_factor",
    "state",
    "source",
    "round_complete",
    "check_interval_seconds",
    "enforced",
    "canary_brokers",
    *_TIME_FIELDS,
    "rule",
    "holds",
    "mutation_factor",
    "observed_by",
)


def round_lines(round_: ObservationRound, decision: Decision, check_interval_seconds: float) -> str:
    """The JSON lines of ``round_rows``, as ``ROW_ENCODER`` writes them, built without a dict
    per row: the fields every row of the round shares are encoded once, a volume's own ones in
    place. At a thousand brokers of 12 log dirs a round has 12,000 rows; encoding them one dict
    at a time took 0.11 s of CPU a round, this a fraction of it."""
    view = _view(round_, decision)
    if not view:
        return "".join(
            ROW_ENCODER.encode(row) + "\n"
            for row in round_rows(round_, decision, check_interval_seconds)
        )
    evaluation = decision.evaluation
    verdicts = (
        (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged) if evaluation else ()
    )
    listed = {v.volume.key: v for v in verdicts}
    policy = decision.policy
    encode = ROW_ENCODER.encode
    text = json.encoder.encode_basestring_ascii  # what the encoder does with a string
    head = '{"time":' + encode(iso_instant(round_.finished_at)) + ',"broker_id":'
    limits = (
        ',"limit_kind":'
        + encode(policy.kind.value)
        + ',"hard_limit":'
        + encode(policy.hard_level)
        + ',"soft_limit":'
        + encode(policy.soft_level)
        + ',"volume_status":'
    )
    round_fields = (
        ',"cluster_factor":'
        + encode(decision.factor)
        + ',"state":'
        + encode(decision.state.value)
        + ',"source":'
        + encode(decision.source.value)
        + ',"round_complete":'
        + encode(round_.complete)
        + ',"check_interval_seconds":'
        + encode(check_interval_seconds)
        + "".join(
            f',"{name}":' + encode(value) for name, value in _enforcement_fields(decision).items()
        )
    )
    tail = (
        ',"rule":'
        + encode(rule_of(decision.rule))
        + ',"holds":'
        + encode(DATA)
        + ',"mutation_factor":'
        + encode(decision.mutation_factor)
        + ',"observed_by":'
    )
    by_source = {source: encode(source) + "}\n" for source in (ADMIN_API, NODE_REPORT)}
    ok = encode(VolumeStatus.OK.value) + ',"volume_factor":' + encode(1.0)
    untimed = ',"fill_rate_bytes_per_second":null,"seconds_to_hard_limit":null,"volume_rule":'
    rates = decision.fill_rates
    hard, by_bytes = policy.hard_level, policy.kind is LimitKind.MIN_AVAILABLE_BYTES
    lines = []
    provenance = _Provenance(round_)
    # A broker's log dirs share their provenance (one answer, one time): encoded once per broker and time.
    provenances: dict[tuple[int, float], str] = {}
    for volume in view:
        key = (volume.broker_id, volume.log_dir)
        verdict = listed.get(key)
        judged = (
            ok
            if verdict is None
            else encode(verdict.status.value) + ',"volume_factor":' + encode(verdict.factor)
        )
        ratio = volume.available_ratio  # finite: JSON writes it as repr does
        source = (volume.broker_id, volume.observed_at)
        if (came_from := provenances.get(source)) is None:
            came_from = provenances[source] = provenance.encoded(volume)
        rate = _UNRATED if rates is None else rates.get(key, _UNRATED)
        if rate is _UNRATED:
            timed = untimed
        else:
            # Finite numbers: JSON writes them as repr does.
            seconds = seconds_to_limit(
                volume.usable_bytes, hard if by_bytes else hard * volume.total_bytes, rate
            )
            timed = (
                f',"fill_rate_bytes_per_second":{"null" if rate is None else repr(rate)},'
                f'"seconds_to_hard_limit":{"null" if seconds is None else repr(seconds)},"volume_rule":'
            )
        lines.append(
            f'{head}{volume.broker_id},"log_dir":{text(volume.log_dir)},"total_bytes":{volume.total_bytes},'
            f'"usable_bytes":{volume.usable_bytes},"available_ratio":{"null" if ratio is None else repr(ratio)},'
            f'"log_dir_error":{"null" if volume.error is None else text(volume.error)}{came_from}{limits}{judged}'
            f"{round_fields}{timed}{'null' if verdict is None else encode(_volume_rule(verdict))}{tail}"
            f"{by_source[volume.observed_by]}"
        )
    metadata_rows = _metadata_rows(
        round_, decision, _common_fields(round_, decision, check_interval_seconds)
    )
    lines += [
        ROW_ENCODER.encode({name: row[name] for name in FIELD_NAMES}) + "\n"
        for row in metadata_rows
    ]
    return "".join(lines)
