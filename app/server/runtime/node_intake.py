"""The node-report path: a node's report of its own volumes (``PUT /nodes/{id}/volumes``) is
admitted (app/server/runtime/node_admission.py), paced (app/server/runtime/report_rate.py),
recorded by the decider, handed to the other replicas, published at once when it changes what
shims act on, and saved with the decider's state within a second. The API asks ``take`` and turns
a refusal into its answer; it never reaches the decider itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.decision.decider import ThrottleDecider
from app.observation.node_reports import NodeReport
from app.server.runtime.loop import ObservationLoop
from app.server.runtime.node_admission import NodeAdmission
from app.server.runtime.publisher import Publisher, what_shims_act_on
from app.server.runtime.report_rate import ReportRate


@dataclass(frozen=True, slots=True)
class UnknownNode:
    """Neither a broker the cluster registered nor one of the few unlisted nodes taken."""


@dataclass(frozen=True, slots=True)
class TooSoon:
    """The node has used its reports' burst and reports faster than one per token interval."""

    retry_after: int


Refusal = UnknownNode | TooSoon


class NodeIntake:
    def __init__(
        self, decider: ThrottleDecider, loop: ObservationLoop, publisher: Publisher, observing: bool
    ) -> None:
        self._decider = decider
        self._loop = loop
        self._publisher = publisher
        self._observing = observing
        self.admission = NodeAdmission()
        self.rate = ReportRate()
        # With several replicas (app/server/runtime/shared_state.py): where a report this replica
        # took goes for the others.
        self.shared: Callable[[NodeReport], None] | None = None

    @property
    def taken(self) -> int:
        """Reports taken so far: the node view may have changed when it moves."""
        return self.rate.taken

    def offer(
        self, node_id: int, report: Callable[[float], NodeReport], now: float
    ) -> Refusal | None:
        """Take node ``node_id``'s report (made by ``report`` at ``now``), or say why not."""
        if not self.admission.admits(node_id, self._decider, now, observing=self._observing):
            return UnknownNode()
        retry_after = self.rate.retry_after(node_id, now)
        if retry_after is not None:
            return TooSoon(retry_after)
        self.take(report(now))
        return None

    def take(self, report: NodeReport, shared: bool = False) -> None:
        """Record ``report``: published at once when it changes what shims act on, and saved with
        the state within a second. One another replica took (``shared``) is not handed on again."""
        if not shared and self.shared is not None:
            self.shared(report)
        now = report.received_at
        self._decider.record_node_report(report)
        # Published when what shims act on is no longer what was last published: whether this
        # report changed it, or a change not yet published that the report leaves in place.
        if what_shims_act_on(self._decider, now) != self._publisher.acting:
            self._publisher.publish()
        self._loop.save_state_soon()
