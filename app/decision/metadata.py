"""The metadata volumes' limits and the mutation factor they imply. Pure: reads pass ``now``.

The nodes' shims report their metadata log volumes (app/observation/node_reports.py); the same
storage policy code judges them against the metadata limits (``throttle.service.metadata.*``).

- ``mutation_factor`` is the minimum over the metadata volumes in the view: 0 at the hard
  limit (partition mutations refused), ramping between the soft and the hard limit, 1 when
  none breaches. The shims scale CONTROLLER_MUTATION quotas by it.
- ``data_factor`` is the minimum over those of them that also hold data (a combined node's
  shared volume, or ``metadata.log.dir`` inside a data dir): filling such a volume also needs
  produce throttled, so the cluster factor is lowered to it.
- Validity and fallback as for the admin API's observations: each report is valid for the
  validity duration; at start-up the mutation factor is 1.0 for one validity duration (as the
  cluster factor is); once no metadata volume is in the view after that, the fallback factor
  applies to mutations (source ``fallback``) until a node reports again. The fallback never
  lowers the cluster factor: that one has its own lifecycle.

Cheap per report: a report's volumes are judged once, when it arrives (with the hysteresis of
that node's previous verdicts), and only the nodes whose volumes ask for less than 1 (few or
none) are kept apart; a read takes the minimum over those still valid. The whole list of
volumes is built only for what shows it (/volumes, metrics, the history), on the event loop
that owns the watch; another thread gets it built in the round (``MetadataStep.frozen``).

Without metadata limits the watch still lists the reports (``/volumes``) but every factor is 1."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from app.decision.factor import FactorSource
from app.decision.policy import (
    LimitKind,
    StoragePolicy,
    VolumeStatus,
    VolumeVerdict,
    judge_volume,
    ok_verdict,
)
from app.observation.model import reported_observation
from app.observation.node_reports import DATA, METADATA, NodeReport, NodeReportBook, NodeVolume


@dataclass(frozen=True, slots=True)
class MetadataVerdict:
    """A metadata volume's verdict under the metadata limits, with what the volume holds."""

    verdict: VolumeVerdict
    entry: NodeVolume
    roles: frozenset[str]
    expires_at: float


@dataclass(frozen=True, slots=True)
class _Judged:
    """A node's report as judged when it arrived."""

    report: NodeReport
    verdicts: tuple[VolumeVerdict, ...]  # its metadata volumes, in the report's order
    entries: tuple[NodeVolume, ...]
    mutation_factor: float
    data_factor: float

    @property
    def listed(self) -> bool:
        return self.mutation_factor < 1.0


def _breached(judged: _Judged, log_dir: str) -> bool:
    """Whether ``log_dir`` breached in the node's report ``judged`` (the hysteresis holds it)."""
    return any(v.status is _BREACHING and v.volume.log_dir == log_dir for v in judged.verdicts)


_new_judged = object.__new__
_set_report, _set_verdicts, _set_entries, _set_mutation, _set_data = (
    getattr(_Judged, name).__set__
    for name in ("report", "verdicts", "entries", "mutation_factor", "data_factor")
)


def _judged(
    report: NodeReport,
    verdicts: tuple[VolumeVerdict, ...],
    entries: tuple[NodeVolume, ...],
    mutation_factor: float,
    data_factor: float,
) -> _Judged:
    """``_Judged(report, verdicts, entries, mutation_factor, data_factor)``, its slots set
    through their descriptors (one a report, 1,000 a second)."""
    judged = _new_judged(_Judged)
    _set_report(judged, report)
    _set_verdicts(judged, verdicts)
    _set_entries(judged, entries)
    _set_mutation(judged, mutation_factor)
    _set_data(judged, data_factor)
    return judged


@dataclass(frozen=True)
class MetadataStep:
    """The metadata side of the decision at one moment."""

    mutation_factor: float
    data_factor: float  # what the metadata volumes that also hold data ask of the cluster factor
    source: FactorSource
    limited: bool  # metadata limits are set
    judged: tuple[
        MetadataVerdict, ...
    ]  # the volumes that ask for less than 1 (breaching, ramping), by key
    next_change_at: float | None
    # Every metadata volume in the view, judged, by key: a tuple, or (from ``MetadataWatch.at``)
    # a function that builds it when first asked for. That function reads the watch's dicts as
    # they are when called, on the event loop only; ``_freeze`` instead copies what it needs
    # now (the reports in the view, the confirmations) and gives a function of those copies.
    _all: Callable[[], tuple[MetadataVerdict, ...]] | tuple[MetadataVerdict, ...] = ()
    _freeze: Callable[[], Callable[[], tuple[MetadataVerdict, ...]]] | None = None

    @functools.cached_property
    def volumes(self) -> tuple[MetadataVerdict, ...]:
        return self._all if isinstance(self._all, tuple) else self._all()

    def frozen(self) -> MetadataStep:
        """This step as it is now, reading nothing that changes later: safe to hand to another
        thread (which builds the volumes, if it asks for them, from copies taken here)."""
        if self._freeze is None:
            return self
        if "volumes" in self.__dict__:  # already built
            return replace(self, _all=self.volumes, _freeze=None)
        return replace(self, _all=self._freeze(), _freeze=None)

    @property
    def listed(self) -> tuple[MetadataVerdict, ...]:
        """The metadata volumes that set the mutation factor: breaching, else ramping."""
        breaching = tuple(v for v in self.judged if v.verdict.status is VolumeStatus.BREACHING)
        return breaching or tuple(
            v for v in self.judged if v.verdict.status is VolumeStatus.RAMPING
        )

    @property
    def reporting_nodes(self) -> list[int]:
        return sorted({v.verdict.volume.broker_id for v in self.volumes})


UNLIMITED = MetadataStep(1.0, 1.0, FactorSource.OBSERVED, False, (), None)
_OK, _BREACHING = VolumeStatus.OK, VolumeStatus.BREACHING
MIN_AVAILABLE_BYTES = LimitKind.MIN_AVAILABLE_BYTES
# Read at every node report: looked up once (an enum member read through its class costs a
# descriptor call).
_OBSERVED, _INITIAL, _FALLBACK = FactorSource.OBSERVED, FactorSource.INITIAL, FactorSource.FALLBACK


class MetadataWatch:
    def __init__(
        self, policy: StoragePolicy | None, book: NodeReportBook, fallback: float, started_at: float
    ) -> None:
        self.policy = policy
        self.book = book
        self.fallback = fallback
        self._initial_until = started_at + book.validity_seconds
        self._judged: dict[int, _Judged] = {}  # node id -> its latest report, judged
        self._listed: dict[int, _Judged] = {}  # those of them asking for less than 1
        self._latest_expiry: float | None = None  # the last instant any report is in the view

    def record(self, report: NodeReport) -> None:
        """Take a node's report: judge its metadata volumes now (a volume that breached in the
        node's previous report is held by the hysteresis)."""
        node_id, at = report.node_id, report.received_at
        previous = self._judged.get(node_id)
        policy = self.policy
        if policy is not None:
            ok_above, by_bytes = policy.ok_above, policy.kind is MIN_AVAILABLE_BYTES
        verdicts, entries = [], []
        mutation = data = 1.0
        for entry in report.volumes:
            holds = entry.holds
            if METADATA not in holds:
                continue
            total, usable = entry.total_bytes, entry.usable_bytes
            observation = reported_observation(node_id, entry.log_dir, total, usable, at)
            if policy is None or (
                total >= 0
                and usable >= 0
                # policy.measure(total, usable) > ok_above, inline: ok whatever it was before
                and (float(usable) if by_bytes else (usable / total if total > 0 else 0.0))
                > ok_above
            ):
                verdict = ok_verdict(observation)
            else:
                verdict = judge_volume(
                    policy,
                    observation,
                    previous is not None and _breached(previous, entry.log_dir),
                )
                factor = verdict.factor
                mutation = min(mutation, factor)
                if DATA in holds:
                    data = min(data, factor)
            verdicts.append(verdict)
            entries.append(entry)
        judged = _judged(report, tuple(verdicts), tuple(entries), mutation, data)
        self.book.record(report)
        self._judged[node_id] = judged
        if mutation < 1.0:  # judged.listed
            self._listed[node_id] = judged
        elif self._listed:
            self._listed.pop(node_id, None)
        if verdicts:
            self._extend_view(report)

    def confirm_fenced(self, fenced_brokers: frozenset[int], at: float) -> None:
        """A round listed ``fenced_brokers`` as fenced: their broker-role nodes' reports stay."""
        self.book.confirm_fenced(fenced_brokers, at)
        for node_id in fenced_brokers:
            judged = self._judged.get(node_id)
            if judged is not None and judged.verdicts:
                self._extend_view(judged.report)

    def _extend_view(self, report: NodeReport) -> None:
        """Some metadata volume is in the view at least until ``report`` expires."""
        expiry = self.book.expires_at(report)
        self._latest_expiry = (
            expiry if self._latest_expiry is None else max(self._latest_expiry, expiry)
        )

    def evict_expired(self, now: float) -> list[NodeReport]:
        """Drop the reports past their validity at ``now``; returns them."""
        expired = self.book.evict_expired(now)
        for report in expired:
            self._judged.pop(report.node_id, None)
            self._listed.pop(report.node_id, None)
        return expired

    def acting_at(self, now: float) -> tuple[float, float, FactorSource, tuple[object, ...]]:
        """Of ``at(now)``: the mutation factor, the data factor, the source and each listed
        volume's key and reason; without building the step when no report asks for less than 1
        (the common case, asked at every node report)."""
        if self._listed:
            step = self.at(now)
            listed = tuple((m.verdict.volume.key, m.verdict.reason) for m in step.listed)
            return step.mutation_factor, step.data_factor, step.source, listed
        # As ``at`` with nothing listed: the data factor 1, the mutation factor 1 but for the
        # fallback's.
        source = self._source_at(now)
        mutation = self.fallback if source is _FALLBACK else 1.0
        return mutation, 1.0, source, ()

    def _source_at(self, now: float) -> FactorSource:
        """Where the step at ``now`` comes from: the reports while one is in the view (always
        without metadata limits), else the start-up grace until it ends, then the fallback."""
        if self._reports_in_view(now) or self.policy is None:
            return _OBSERVED
        return _INITIAL if now <= self._initial_until else _FALLBACK

    def _reports_in_view(self, now: float) -> bool:
        """Some metadata volume's report is in the view at ``now``."""
        return self._latest_expiry is not None and now <= self._latest_expiry

    def at(self, now: float) -> MetadataStep:
        expires_at = self.book.expires_at
        listed = [j for j in self._listed.values() if now <= expires_at(j.report)]
        judged = tuple(m for m in self._verdicts(listed) if m.verdict.factor < 1.0)
        # What changes the factors by itself: a listed report expiring, or the last one.
        changes = [expires_at(j.report) for j in listed]
        if self._reports_in_view(now):
            assert self._latest_expiry is not None
            changes.append(self._latest_expiry)
        next_change = min(changes) if changes else None
        limited = self.policy is not None
        source = self._source_at(now)
        if source is FactorSource.OBSERVED:
            mutation = min((j.mutation_factor for j in listed), default=1.0)
            data = min((j.data_factor for j in listed), default=1.0)
            return MetadataStep(
                mutation,
                data,
                FactorSource.OBSERVED,
                limited,
                judged,
                next_change,
                lambda: self._all_volumes(now),
                lambda: self._frozen_volumes(now),
            )
        if source is FactorSource.INITIAL:
            return MetadataStep(1.0, 1.0, FactorSource.INITIAL, limited, (), self._initial_until)
        return MetadataStep(self.fallback, 1.0, FactorSource.FALLBACK, limited, (), None)

    def _all_volumes(self, now: float) -> tuple[MetadataVerdict, ...]:
        return _in_view(tuple(self._judged.values()), self.book.expires_at, now)

    def _frozen_volumes(self, now: float) -> Callable[[], tuple[MetadataVerdict, ...]]:
        """``_all_volumes(now)`` to be built later, on any thread, from copies taken now (a
        tuple of the judged reports and the confirmations: well under a millisecond at 10,000
        nodes, where building the volumes takes tens)."""
        judged, expires_at = tuple(self._judged.values()), self.book.expiry_as_now()
        return lambda: _in_view(judged, expires_at, now)

    def _verdicts(self, judged: Iterable[_Judged]) -> tuple[MetadataVerdict, ...]:
        return _verdicts(judged, self.book.expires_at)

    def __len__(self) -> int:
        return len(self._judged)

    def __contains__(self, node_id: int) -> bool:
        return node_id in self._judged


def _in_view(
    judged: tuple[_Judged, ...], expires_at: Callable[[NodeReport], float], now: float
) -> tuple[MetadataVerdict, ...]:
    """The metadata volumes of the judged reports still in the view at ``now``, by key."""
    return _verdicts((j for j in judged if now <= expires_at(j.report)), expires_at)


def _verdicts(
    judged: Iterable[_Judged], expires_at: Callable[[NodeReport], float]
) -> tuple[MetadataVerdict, ...]:
    """The metadata volumes of these judged reports, by key."""
    return tuple(
        sorted(
            (
                MetadataVerdict(v, e, j.report.roles, expires_at(j.report))
                for j in judged
                for v, e in zip(j.verdicts, j.entries, strict=True)
            ),
            key=lambda m: m.verdict.volume.key,
        )
    )
