"""Everything a route reaches, in one place: ``service_state(request)``."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request
from prometheus_client import CollectorRegistry

from app.clock import Clock
from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.quotas.service import QuotaService
from app.server.runtime.loop import ObservationLoop
from app.server.runtime.publishing import Publication
from app.server.runtime.node_admission import NodeAdmission
from app.server.runtime.report_rate import ReportRate
from app.server.api.schemas.decision import ThrottleDecision
from app.server.api.schemas.quotas import QuotaTableModel
from app.server.api.view_cache import ViewCache
from app.settings import Settings


@dataclass
class ServiceState:
    settings: Settings
    clock: Clock
    decider: ThrottleDecider
    loop: ObservationLoop
    decisions: Publication[ThrottleDecision]
    registry: CollectorRegistry
    # Opened with the app's lifespan (the quota store is a file).
    quotas: QuotaService | None = None
    quota_table: Publication[QuotaTableModel] | None = None
    node_report_rate: ReportRate = field(default_factory=ReportRate)
    node_admission: NodeAdmission = field(default_factory=NodeAdmission)
    views: ViewCache = field(default_factory=ViewCache)  # /volumes and /what-if, rendered once per change

    @property
    def ready(self) -> bool:
        """A first round succeeded (here, or on the replica whose decision this one mirrors, or
        before a restart whose state it resumed), or the fallback is in force (or observation is
        off), and the quota table and the saved state are the store's (Kafka-backed: their
        topics have been read to their end)."""
        decided = self.decider.reading(self.clock()).source is not FactorSource.INITIAL
        saved = self.loop.saved_state
        return decided and self.quotas is not None and self.quotas.ready and (saved is None or saved.loaded)

    def stopping(self) -> None:
        """The service is stopping: answer every held long-poll now (a 304 that renews the
        client's copy, or the new representation), and every later one at once, so that no
        open request holds the stop and each client keeps its table or polls another replica."""
        for publication in self.loop.publications:
            publication.release()

    def quota_service(self) -> QuotaService:
        assert self.quotas is not None, "quotas are served while the app runs"
        return self.quotas


def service_state(request: Request) -> ServiceState:
    return request.app.state.service
