"""The seam between the decision logic and wherever volume observations come from."""

from __future__ import annotations

from typing import Protocol

from app.observation.model import ObservationRound


class VolumeSource(Protocol):
    def observe(self) -> ObservationRound:
        """Run one observation round. Blocking; never raises: failures are in the round."""
        ...

    def close(self) -> None: ...
