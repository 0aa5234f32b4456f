"""What the API may read of a decider: a read-only view (``ThrottleDecider`` is one, and so is
the twin ``judged_by`` makes for /what-if). Nothing here changes a decision."""

from __future__ import annotations

from typing import Protocol

from app.decision.decision import Decision, VolumeState
from app.decision.metadata import MetadataStep
from app.decision.policy import StoragePolicy
from app.decision.timeline import Step
from app.observation.model import ObservationRound


class DecisionView(Protocol):
    @property
    def validity_seconds(self) -> float: ...

    @property
    def active_brokers(self) -> tuple[int, ...]: ...

    @property
    def latest_round(self) -> ObservationRound | None: ...

    @property
    def fenced_now(self) -> frozenset[int]: ...

    @property
    def keeps_trends(self) -> bool: ...

    def decision(self, now: float) -> Decision: ...

    def volumes(self, now: float) -> list[VolumeState]: ...

    def metadata_at(self, now: float) -> MetadataStep: ...

    def view_at(self, now: float) -> Step | None: ...

    def registered_brokers(self) -> set[int]: ...

    def judged_by(
        self, policy: StoragePolicy, horizon_seconds: float | None = None
    ) -> DecisionView: ...
