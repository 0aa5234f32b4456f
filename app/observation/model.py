"""What the service knows about a log dir's volume, and what one observation round yields."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Literal

VolumeKey = tuple[int, str]  # (broker id, log dir)

# Where an observation came from: DescribeLogDirs (an admin round), or the node's own shim
# (PUT /nodes/{node_id}/volumes).
ObservedBy = Literal["admin-api", "node-report"]
ADMIN_API: ObservedBy = "admin-api"
NODE_REPORT: ObservedBy = "node-report"


@dataclass(frozen=True, slots=True)
class VolumeObservation:
    """One log dir as DescribeLogDirs reported it (KIP-827 TotalBytes / UsableBytes), or as
    the node's shim did (``observed_by`` NODE_REPORT: its file store's figures, never an error).

    total_bytes and usable_bytes are -1 when the broker does not report them (before
    Kafka 3.3, or DescribeLogDirs below v4). ``error`` names the Kafka error of a log dir
    that is offline (e.g. KAFKA_STORAGE_ERROR)."""

    broker_id: int
    log_dir: str
    total_bytes: int
    usable_bytes: int
    observed_at: float
    error: str | None = None
    observed_by: ObservedBy = ADMIN_API

    @property
    def key(self) -> VolumeKey:
        return (self.broker_id, self.log_dir)

    @property
    def capacity_known(self) -> bool:
        return self.total_bytes >= 0 and self.usable_bytes >= 0

    @property
    def available_ratio(self) -> float | None:
        if not self.capacity_known:
            return None
        return self.usable_bytes / self.total_bytes if self.total_bytes > 0 else 0.0


# A field of many observations at once, read in C: ``list(map(BROKER_ID, volumes))``.
BROKER_ID, LOG_DIR, TOTAL_BYTES, USABLE_BYTES, OBSERVED_AT, ERROR = map(
    attrgetter, ("broker_id", "log_dir", "total_bytes", "usable_bytes", "observed_at", "error")
)

_new_observation = object.__new__
_set_broker, _set_dir, _set_total, _set_usable, _set_at, _set_error, _set_by = (
    getattr(VolumeObservation, name).__set__
    for name in (
        "broker_id",
        "log_dir",
        "total_bytes",
        "usable_bytes",
        "observed_at",
        "error",
        "observed_by",
    )
)


def admin_observation(
    broker_id: int,
    log_dir: str,
    total_bytes: int,
    usable_bytes: int,
    observed_at: float,
    error: str | None = None,
) -> VolumeObservation:
    """``VolumeObservation(broker_id, log_dir, total_bytes, usable_bytes, observed_at, error)``,
    the same object, made at a half to a third of the cost: its slots are set through their
    descriptors instead of the frozen dataclass's ``__init__`` (an ``object.__setattr__`` call a
    field). A round makes 12,000 of them at 1,000 brokers."""
    volume = _new_observation(VolumeObservation)
    _set_broker(volume, broker_id)
    _set_dir(volume, log_dir)
    _set_total(volume, total_bytes)
    _set_usable(volume, usable_bytes)
    _set_at(volume, observed_at)
    _set_error(volume, error)
    _set_by(volume, ADMIN_API)
    return volume


def reported_observation(
    node_id: int, log_dir: str, total_bytes: int, usable_bytes: int, received_at: float
) -> VolumeObservation:
    """A node report's entry as an observation, ``VolumeObservation(node_id, log_dir,
    total_bytes, usable_bytes, received_at, observed_by=NODE_REPORT)``, made as
    ``admin_observation`` makes its own (every report makes one per metadata volume)."""
    volume = admin_observation(node_id, log_dir, total_bytes, usable_bytes, received_at)
    _set_by(volume, NODE_REPORT)
    return volume


class KeptReason(str, enum.Enum):
    """Why an observation in the view after a round is not the round's own: the cache kept
    it from an earlier round."""

    FENCED = (
        "fenced"  # DescribeCluster lists the broker as fenced (stopped, or halted by a failed disk)
    )
    MISSING = "missing"  # the broker is active but did not answer the round (or its DescribeLogDirs failed)
    UNREGISTERED = "unregistered"  # DescribeCluster no longer lists the broker at all
    LAST_VALID = (
        "last-valid"  # the round reached no one (DescribeCluster failed): nothing was learned
    )


@dataclass(frozen=True)
class ObservationRound:
    """The result of one DescribeCluster + DescribeLogDirs round.

    ``error`` is set when the round produced nothing (cluster unreachable, DescribeCluster
    failed). Otherwise ``missing_brokers`` maps each active broker that did not answer to the
    reason, and the round is complete only when that map is empty. ``fenced_brokers`` are
    registered but fenced (stopped, or halted by a failed disk): DescribeCluster lists them,
    nobody asks them for their log dirs."""

    started_at: float
    finished_at: float
    active_brokers: tuple[int, ...] = ()
    observations: tuple[VolumeObservation, ...] = ()
    missing_brokers: dict[int, str] = field(default_factory=dict)
    error: str | None = None
    fenced_brokers: tuple[int, ...] = ()

    @property
    def failed(self) -> bool:
        return self.error is not None

    # Looked up per broker (``kept_reason``): a tuple of a thousand brokers is scanned in turn.
    @cached_property
    def _active_set(self) -> frozenset[int]:
        return frozenset(self.active_brokers)

    @cached_property
    def _fenced_set(self) -> frozenset[int]:
        return frozenset(self.fenced_brokers)

    @property
    def complete(self) -> bool:
        return self.error is None and not self.missing_brokers

    @property
    def cluster_answered(self) -> bool:
        """DescribeCluster answered: the service reached the cluster this round."""
        return bool(self.active_brokers or self.fenced_brokers)

    @property
    def answered_brokers(self) -> tuple[int, ...]:
        return tuple(b for b in self.active_brokers if b not in self.missing_brokers)

    def kept_reason(self, broker_id: int) -> KeptReason | None:
        """Why an observation of ``broker_id`` in the view after this round was kept from an
        earlier one; None when the broker answered this round (its observations are fresh)."""
        if not self.cluster_answered:
            return KeptReason.LAST_VALID
        if broker_id in self._fenced_set:
            return KeptReason.FENCED
        if broker_id in self._active_set:
            return (
                None
                if not self.failed and broker_id not in self.missing_brokers
                else KeptReason.MISSING
            )
        return KeptReason.UNREGISTERED
