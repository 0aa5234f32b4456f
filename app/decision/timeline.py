"""What a set of cached observations says over time, as each of them expires in turn.

Between two rounds nothing is observed, yet the view changes: an observation leaves it at the
instant it becomes older than the validity duration. A round's timeline is the list of those
instants, each with the evaluation of the observations still valid: the factor in force at
any moment is read from it, so a stale observation leaves the decision exactly when it
expires, and never makes the whole factor read as expired while newer observations are valid.

Pure: no clock, no I/O. Later steps are evaluated the first time they are read."""

from __future__ import annotations

import bisect
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.decision.fill_rate import TimeToFull
from app.decision.policy import Evaluation, StoragePolicy, evaluate
from app.observation.model import VolumeKey, VolumeObservation


@dataclass(frozen=True, slots=True)
class Step:
    """One stretch of a timeline: ``evaluation`` of ``volumes`` holds from ``start`` until
    ``valid_until`` (inclusive)."""

    start: float
    valid_until: float
    evaluation: Evaluation
    volumes: Sequence[VolumeObservation]

    @property
    def factor(self) -> float:
        return self.evaluation.factor


class Timeline:
    """Steps from ``start``; ``at(now)`` is None once everything has expired."""

    def at(self, now: float) -> Step | None:
        raise NotImplementedError

    @property
    def end(self) -> float:
        """The instant after which nothing is valid."""
        raise NotImplementedError

    def next_change_after(self, now: float) -> float | None:
        """The first instant after ``now`` at which the step in force changes."""
        raise NotImplementedError

    def factor_holds_until(self, now: float) -> float | None:
        """The end of the run of steps from ``now`` on that keep the factor in force: a client
        holding that factor may use it until then (a stale observation leaving the view at the
        same factor changes nothing a client acts on). None once everything has expired."""
        raise NotImplementedError

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None = None
    ) -> Timeline:
        """The same observations over the same instants, judged by ``policy`` with no volume
        remembered in breach and the time factors ``times_to_full`` (what-if)."""
        raise NotImplementedError


class SteadyTimeline(Timeline):
    """One factor from ``start`` until ``until``: the start-up grace, or a test's factor."""

    def __init__(self, factor: float, start: float, until: float) -> None:
        self._step = Step(start, until, Evaluation(factor, (), (), (), 0), ())

    def at(self, now: float) -> Step | None:
        return self._step if now <= self._step.valid_until else None

    @property
    def end(self) -> float:
        return self._step.valid_until

    def next_change_after(self, now: float) -> float | None:
        return self._step.valid_until if now <= self._step.valid_until else None

    def factor_holds_until(self, now: float) -> float | None:
        return self.next_change_after(now)

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None = None
    ) -> Timeline:
        return self  # no observations: nothing to judge


class ViewTimeline(Timeline):
    """The evaluations of the cached observations of one round, from the round on.

    ``by_expiry`` groups the observations by the instant each leaves the view (a round's
    observations share one), so the steps are few and each is a union of groups."""

    def __init__(
        self,
        policy: StoragePolicy,
        by_expiry: dict[float, list[VolumeObservation]],
        previously_breaching: frozenset[VolumeKey],
        start: float,
        validity_seconds: float,
        times_to_full: Mapping[VolumeKey, TimeToFull] | None = None,
    ) -> None:
        # An empty view is valid for the validity duration: a cluster without log dirs to
        # judge is judged healthy, as a round.
        self._bounds = sorted(by_expiry) or [start + validity_seconds]
        self._groups = by_expiry
        self._policy = policy
        self._breaching = previously_breaching
        self._start = start
        self._times_to_full = times_to_full
        self._steps: dict[int, Step] = {}

    @property
    def end(self) -> float:
        return self._bounds[-1]

    @property
    def start(self) -> float:
        return self._start

    @property
    def bounds(self) -> Sequence[float]:
        """The instants at which a step ends, in order."""
        return self._bounds

    @property
    def times_to_full(self) -> Mapping[VolumeKey, TimeToFull] | None:
        return self._times_to_full

    @property
    def groups(self) -> Mapping[float, Sequence[VolumeObservation]]:
        """The observations by the instant each leaves the view."""
        return self._groups

    def at(self, now: float) -> Step | None:
        index = bisect.bisect_left(self._bounds, now)  # the first bound at or after now
        return self._step(index) if index < len(self._bounds) else None

    def _step(self, index: int) -> Step:
        step = self._steps.get(index)
        if step is None:
            volumes: list[VolumeObservation] = []
            for bound in self._bounds[index:]:
                volumes += self._groups.get(bound, ())
            evaluation = evaluate(self._policy, volumes, self._breaching, self._times_to_full)
            start = self._start if index == 0 else self._bounds[index - 1]
            step = self._steps[index] = Step(start, self._bounds[index], evaluation, volumes)
        return step

    def next_change_after(self, now: float) -> float | None:
        index = bisect.bisect_left(self._bounds, now)
        return self._bounds[index] if index < len(self._bounds) else None

    def factor_holds_until(self, now: float) -> float | None:
        index = bisect.bisect_left(self._bounds, now)
        if index == len(self._bounds):
            return None
        factor = self._step(index).factor
        while index + 1 < len(self._bounds) and self._step(index + 1).factor == factor:
            index += 1
        return self._bounds[index]

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None = None
    ) -> Timeline:
        twin = copy.copy(self)
        # a copy of this timeline: its own private state, re-judged
        twin._policy, twin._breaching = policy, frozenset()  # noqa: SLF001
        twin._steps, twin._times_to_full = {}, times_to_full  # noqa: SLF001
        return twin
