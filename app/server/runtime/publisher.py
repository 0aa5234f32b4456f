"""The one publisher of the decision: the observation loop (after a round, and at each instant
the decision changes by itself), the node-report path (a report that changes what shims act on),
the enforcement (changed at run time) and a mirrored snapshot all notify it; it logs what changed
in the decision once and refreshes every publication (/throttle-factor, /quotas), in order.
Nothing it publishes calls back into the loop or the decider: a publication renders from a
``Decision`` read here."""

from __future__ import annotations

import dataclasses
import logging

from app.clock import Clock
from app.decision.changes import DecisionChanges
from app.decision.decider import ThrottleDecider
from app.decision.decision import Decision
from app.server.runtime.enforcement import EnforcementInForce
from app.server.runtime.metrics import ServiceMetrics
from app.server.runtime.publishing import Publication

log = logging.getLogger("app.decision")


def what_shims_act_on(decider: ThrottleDecider, now: float) -> tuple[object, ...]:
    """What of the decision at ``now`` a node report can change that the shims act on: the
    cluster factor (its data volumes' and the metadata volumes that hold data), its source, the
    mutation factor and the metadata volumes that set it."""
    # The fields of ThrottleDecider.with_metadata's reading and of the metadata step, without
    # building either (every node report asks).
    mutation, data, metadata_source, listed = decider.metadata.acting_at(now)
    factor, source = decider.holder.factor_at(now)
    return (decider.cluster_factor(factor, data), source, mutation, metadata_source, listed)


class Publisher:
    def __init__(
        self,
        decider: ThrottleDecider,
        enforcement: EnforcementInForce,
        metrics: ServiceMetrics,
        clock: Clock,
    ) -> None:
        self._decider = decider
        self._enforcement = enforcement
        self._metrics = metrics
        self._clock = clock
        self._changes = DecisionChanges()
        self._publications: list[Publication] = []
        # When the published decision changes by itself (an observation or the factor expiring).
        self.next_change: float | None = None
        # What shims act on in the decision last published (what_shims_act_on), None before.
        self.acting: tuple[object, ...] | None = None

    def add(self, publication: Publication) -> None:
        self._publications.append(publication)

    def remove(self, publication: Publication) -> None:
        self._publications.remove(publication)

    def decision(self, now: float) -> Decision:
        """The decider's decision at ``now``, with the enforcement in force."""
        return dataclasses.replace(self._decider.decision(now), enforcement=self._enforcement())

    def publish(self) -> Decision:
        """Log what changed in the decision since it was last published, and publish."""
        now = self._clock()
        decision = self.decision(now)
        self.next_change = decision.reading.next_change_at
        self.acting = what_shims_act_on(self._decider, now)
        changes, fallback_took_over = self._changes.after(decision)
        if fallback_took_over:
            self._metrics.fallback_applied.inc()
        for change in changes:
            log.log(change.level, change.message, extra=dict(change.fields))
        for publication in self._publications:
            publication.publish()
        return decision

    def release(self) -> None:
        """The service is stopping: answer every held long-poll now, and every later one at once."""
        for publication in self._publications:
            publication.release()
