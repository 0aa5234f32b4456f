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

Without metadata limits the watch still lists the reports (``/volumes``) but every factor is 1."""

from __future__ import annotations

from dataclasses import dataclass

from app.decision.factor import FactorSource
from app.decision.policy import Evaluation, StoragePolicy, VolumeStatus, VolumeVerdict, evaluate
from app.observation.model import VolumeKey
from app.observation.node_reports import NodeReport, NodeReportBook, NodeVolume


@dataclass(frozen=True, slots=True)
class MetadataVerdict:
    """A metadata volume's verdict under the metadata limits, with what the volume holds."""

    verdict: VolumeVerdict
    entry: NodeVolume
    roles: frozenset[str]
    expires_at: float


@dataclass(frozen=True)
class MetadataStep:
    """The metadata side of the decision at one moment."""

    mutation_factor: float
    data_factor: float  # what the metadata volumes that also hold data ask of the cluster factor
    source: FactorSource
    evaluation: Evaluation | None  # None without metadata limits
    volumes: tuple[MetadataVerdict, ...]  # every metadata volume in the view, judged, by key
    next_change_at: float | None

    @property
    def listed(self) -> tuple[MetadataVerdict, ...]:
        """The metadata volumes that set the mutation factor: breaching, else ramping."""
        breaching = tuple(v for v in self.volumes if v.verdict.status is VolumeStatus.BREACHING)
        return breaching or tuple(v for v in self.volumes if v.verdict.status is VolumeStatus.RAMPING)


UNLIMITED = MetadataStep(1.0, 1.0, FactorSource.OBSERVED, None, (), None)


class MetadataWatch:
    def __init__(
        self,
        policy: StoragePolicy | None,
        book: NodeReportBook,
        fallback: float,
        started_at: float,
    ) -> None:
        self.policy = policy
        self.book = book
        self.fallback = fallback
        self._initial_until = started_at + book.validity_seconds
        self._breaching: frozenset[VolumeKey] = frozenset()

    def record(self, report: NodeReport, now: float) -> MetadataStep:
        """Take a node's report; remember which volumes breach (hysteresis holds them)."""
        self.book.record(report)
        self.book.evict_expired(now)
        step = self.at(now)
        if step.evaluation is not None:
            self._breaching = step.evaluation.breaching_keys
        return step

    def at(self, now: float) -> MetadataStep:
        reports = self.book.valid(now)
        pairs = [(o, v, r) for r in reports for o, v in r.observations()]
        next_change = self.book.next_expiry_after(now)
        if self.policy is None:
            verdicts = tuple(
                MetadataVerdict(VolumeVerdict(o, VolumeStatus.OK, 1.0, ""), v, r.roles, self.book.expires_at(r)) for o, v, r in pairs
            )
            return MetadataStep(1.0, 1.0, FactorSource.OBSERVED, None, verdicts, next_change)
        evaluation = evaluate(self.policy, (o for o, _, _ in pairs), self._breaching & {o.key for o, _, _ in pairs})
        judged = {v.volume.key: v for v in (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged)}
        verdicts = tuple(
            MetadataVerdict(judged.get(o.key) or VolumeVerdict(o, VolumeStatus.OK, 1.0, ""), v, r.roles, self.book.expires_at(r))
            for o, v, r in sorted(pairs, key=lambda p: p[0].key)
        )
        data_factor = min((m.verdict.factor for m in verdicts if m.entry.holds_data), default=1.0)
        if verdicts:
            return MetadataStep(evaluation.factor, data_factor, FactorSource.OBSERVED, evaluation, verdicts, next_change)
        if now <= self._initial_until:
            return MetadataStep(1.0, 1.0, FactorSource.INITIAL, evaluation, (), self._initial_until)
        return MetadataStep(self.fallback, 1.0, FactorSource.FALLBACK, evaluation, (), None)
