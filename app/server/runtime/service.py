"""The running service as the API sees it: one facade over the decider, the observation loop,
the node-report path, the publications and the quota service. Routes read and act through it
(and through the domain's types it hands out: a read-only ``DecisionView``, the ``QuotaService``,
the publications); they never reach into the decider, its cache or the loop
(tests/unit/test_architecture.py holds them to it). The wiring (app/server/app.py) and tests
hold ``decider`` and ``loop`` directly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from app.clock import Clock
from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.decision.view import DecisionView
from app.observation.node_reports import NodeReport
from app.quotas.service import QuotaService
from app.server.runtime.loop import ObservationLoop
from app.server.runtime.node_intake import NodeIntake, Refusal
from app.server.runtime.publisher import Publisher
from app.server.runtime.publishing import Publication
from app.settings import Settings


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    source: FactorSource
    rounds: int


class Service:
    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        decider: ThrottleDecider,
        loop: ObservationLoop,
        publisher: Publisher,
        intake: NodeIntake,
        decisions: Publication,
        registry: CollectorRegistry,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.decider = decider  # the wiring's and the tests'; routes use view()
        self.loop = loop  # the wiring's and the tests'
        self.publisher = publisher
        self.intake = intake
        self.decisions = decisions
        self.registry = registry
        # Opened with the app's lifespan (the quota store is a file or a topic).
        self.quotas: QuotaService | None = None
        self.quota_table: Publication | None = None

    def view(self) -> DecisionView:
        """The live decision, read-only."""
        return self.decider

    def view_version(self, now: float) -> tuple[object, object, int, str]:
        """What /volumes and /what-if show depends on: the latest round and the view's step (it
        ends at each expiry), as objects whose identity tells a change; the node reports taken;
        the published decision's ETag."""
        decider = self.decider
        return (
            decider.latest_round,
            decider.view_at(now),
            self.intake.taken,
            self.decisions.current().etag,
        )

    def readiness(self) -> Readiness:
        """A first round succeeded (here, or on the replica whose decision this one mirrors, or
        before a restart whose state it resumed), or the fallback is in force (or observation is
        off), and the quota table and the saved state are the store's (Kafka-backed: their
        topics have been read to their end)."""
        source = self.decider.reading(self.clock()).source
        saved = self.loop.saved_state
        ready = (
            source is not FactorSource.INITIAL
            and self.quotas is not None
            and self.quotas.ready
            and (saved is None or saved.loaded)
        )
        return Readiness(ready, source, self.loop.rounds)

    @property
    def ready(self) -> bool:
        return self.readiness().ready

    def registered_brokers(self) -> set[int]:
        return self.decider.registered_brokers()

    def offer_node_report(
        self, node_id: int, report: Callable[[float], NodeReport]
    ) -> Refusal | None:
        """Take node ``node_id``'s report, or say why not (app/server/runtime/node_intake.py)."""
        return self.intake.offer(node_id, report, self.clock())

    def quota_service(self) -> QuotaService:
        assert self.quotas is not None, "quotas are served while the app runs"
        return self.quotas

    def stopping(self) -> None:
        """The service is stopping: answer every held long-poll now (a 304 that renews the
        client's copy, or the new representation), and every later one at once, so that no
        open request holds the stop and each client keeps its table or polls another replica."""
        self.publisher.release()
