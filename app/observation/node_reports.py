"""What the nodes' shims report about their own volumes (PUT /nodes/{node_id}/volumes), and how
long each report stays in the view.

The admin API cannot see a controller-only node, nor a metadata log dir kept apart from the
data dirs, so every node that loads the shim reports its own: one entry per configured
directory, with what it holds (``data``, ``metadata``, or both when they share a file store).

A report replaces the node's previous one whole (a directory it no longer reports is dropped,
not kept as a ghost), and stays in the view for the validity duration from when it arrived, as
an admin observation does. A node that stops reporting is forgotten a validity duration after
its last report, as a broker that DescribeCluster no longer lists: the service cannot tell a
controller-only node that halted from one that was removed. The one exception mirrors the
fenced-broker rule: a node with the broker role that DescribeCluster lists as fenced keeps its
last report, with ``keep_fenced``, for as long as the rounds list it so."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from app.observation.model import VolumeObservation, reported_observation

DATA = "data"
METADATA = "metadata"
BROKER_ROLE = "broker"


@dataclass(frozen=True, slots=True)
class NodeVolume:
    """One directory of a node's report: its file store's figures and what it holds."""

    log_dir: str
    total_bytes: int
    usable_bytes: int
    holds: frozenset[str]

    @property
    def holds_metadata(self) -> bool:
        return METADATA in self.holds

    @property
    def holds_data(self) -> bool:
        return DATA in self.holds


_new_volume = object.__new__
_set_dir, _set_total, _set_usable, _set_holds = (
    getattr(NodeVolume, name).__set__
    for name in ("log_dir", "total_bytes", "usable_bytes", "holds")
)
# What a directory holds, as a report's entries say it (one frozenset each, shared).
_HOLDS = {
    tuple(entries): frozenset(entries)
    for entries in ((DATA,), (METADATA,), (DATA, METADATA), (METADATA, DATA))
}


def report_holds(holds: Iterable[str]) -> frozenset[str] | None:
    """What a directory holds, from a report's list of one or two of ``data`` and ``metadata``;
    None for a list that names one twice."""
    return _HOLDS.get(tuple(holds))


def node_volume(
    log_dir: str, total_bytes: int, usable_bytes: int, holds: Sequence[str]
) -> NodeVolume:
    """``NodeVolume(log_dir, total_bytes, usable_bytes, frozenset(holds))``, the same object made
    at about half the cost (its slots set through their descriptors, not the frozen dataclass's
    ``__init__``): every report makes one per directory, 1,000 nodes a dozen each a second."""
    volume = _new_volume(NodeVolume)
    _set_dir(volume, log_dir)
    _set_total(volume, total_bytes)
    _set_usable(volume, usable_bytes)
    _set_holds(volume, _HOLDS.get(tuple(holds)) or frozenset(holds))
    return volume


@dataclass(frozen=True, slots=True)
class NodeReport:
    node_id: int
    roles: frozenset[str]
    volumes: tuple[NodeVolume, ...]
    received_at: float

    def observations(self) -> list[tuple[VolumeObservation, NodeVolume]]:
        """Each metadata volume as an observation the storage policy judges, with its entry."""
        node_id, at = self.node_id, self.received_at
        return [
            (reported_observation(node_id, v.log_dir, v.total_bytes, v.usable_bytes, at), v)
            for v in self.volumes
            if METADATA in v.holds
        ]


_new_report = object.__new__
_set_node, _set_roles, _set_volumes, _set_received = (
    getattr(NodeReport, name).__set__ for name in ("node_id", "roles", "volumes", "received_at")
)
# A node's roles, as a report lists them (one frozenset each, shared).
_ROLES = {
    tuple(roles): frozenset(roles)
    for roles in (
        ("broker",),
        ("controller",),
        ("broker", "controller"),
        ("controller", "broker"),
    )
}


def report_roles(roles: Iterable[str]) -> frozenset[str] | None:
    """A node's roles, from a report's list of one or two of ``broker`` and ``controller``; None
    for a list that names one twice."""
    return _ROLES.get(tuple(roles))


def node_report(
    node_id: int,
    roles: Sequence[str] | frozenset[str],
    volumes: tuple[NodeVolume, ...],
    received_at: float,
) -> NodeReport:
    """``NodeReport(node_id, frozenset(roles), volumes, received_at)``, made as ``node_volume``
    makes its volumes (one a report)."""
    report = _new_report(NodeReport)
    _set_node(report, node_id)
    _set_roles(
        report,
        roles if type(roles) is frozenset else _ROLES.get(tuple(roles)) or frozenset(roles),
    )
    _set_volumes(report, volumes)
    _set_received(report, received_at)
    return report


class NodeReportBook:
    """The latest report of every node, each valid for ``validity_seconds`` from its arrival
    (or from the latest round that listed the node as a fenced broker, with ``keep_fenced``)."""

    def __init__(self, validity_seconds: float, keep_fenced: bool = True) -> None:
        self._validity = validity_seconds
        self._keep_fenced = keep_fenced
        self._reports: dict[int, NodeReport] = {}
        self._confirmed: dict[int, float] = {}  # node id -> when a round last listed it fenced

    @property
    def validity_seconds(self) -> float:
        return self._validity

    def record(self, report: NodeReport) -> None:
        self._reports[report.node_id] = report
        self._confirmed.pop(report.node_id, None)

    def latest(self, node_id: int) -> NodeReport | None:
        """The node's report in the book, if any."""
        return self._reports.get(node_id)

    def confirm_fenced(self, fenced_brokers: frozenset[int], at: float) -> None:
        """A round's DescribeCluster answer listed ``fenced_brokers`` as fenced: with
        keep_fenced, their broker-role nodes' last reports stay in the view."""
        if not self._keep_fenced:
            return
        for node_id in fenced_brokers:
            report = self._reports.get(node_id)
            if report is not None and BROKER_ROLE in report.roles:
                self._confirmed[node_id] = at

    def expires_at(self, report: NodeReport) -> float:
        """The last instant ``report`` is in the view: exactly validity old is still valid."""
        return (
            max(report.received_at, self._confirmed.get(report.node_id, report.received_at))
            + self._validity
        )

    def expiry_as_now(self) -> Callable[[NodeReport], float]:
        """``expires_at`` as the book stands now (its confirmations copied): for a reader on
        another thread, or one that must not see later confirmations."""
        confirmed, validity = dict(self._confirmed), self._validity
        return lambda report: (
            max(report.received_at, confirmed.get(report.node_id, report.received_at)) + validity
        )

    def evict_expired(self, now: float) -> list[NodeReport]:
        expired = [r for r in self._reports.values() if now > self.expires_at(r)]
        for report in expired:
            del self._reports[report.node_id]
            self._confirmed.pop(report.node_id, None)
        return expired
