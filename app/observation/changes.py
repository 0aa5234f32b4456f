"""What changed in the cluster from one round to the next, said once.

An incident lasts many rounds; an operator reading the log wants one line when something
changes (a broker fenced, unregistered, not answering, a log dir going offline) and one when
it changes back, never the same line every round. Pure: it compares rounds and returns the
lines to log."""

from __future__ import annotations

import enum
import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from app.observation.model import ObservationRound, VolumeKey, VolumeObservation


class Registration(str, enum.Enum):
    ACTIVE = "active"
    FENCED = "fenced"


@dataclass(frozen=True, slots=True)
class Change:
    level: int
    message: str
    fields: Mapping[str, object] = field(
        default_factory=dict
    )  # the line's facts, for structured logs


def _change(level: int, event: str, message: str, **fields: object) -> Change:
    return Change(level, message, {"event": event, **fields})


class ClusterChanges:
    def __init__(self, validity_seconds: float, keep_fenced: bool) -> None:
        self._validity = validity_seconds
        self._keep_fenced = keep_fenced
        self._round_failed = False
        self._registered: dict[int, Registration] | None = (
            None  # None until DescribeCluster first answers
        )
        self._missing: frozenset[int] = frozenset()
        self._log_dir_errors: dict[VolumeKey, str] = {}  # the offline log dirs, with their error

    def after_round(
        self,
        round_: ObservationRound,
        evicted: list[VolumeObservation],
        cached_brokers: Collection[int] = (),
    ) -> list[Change]:
        """The lines to log for ``round_``; ``cached_brokers`` have an observation in the view."""
        changes: list[Change] = []
        changes += self._round_state(round_)
        if round_.cluster_answered:
            changes += self._registrations(round_, cached_brokers)
        if not round_.failed:
            changes += self._answers(round_)
            changes += self._log_dirs(round_)
        for volume in evicted:
            self._log_dir_errors.pop(volume.key, None)
            changes.append(
                _change(
                    logging.INFO,
                    "log_dir_forgotten",
                    f"forgot broker {volume.broker_id} log dir {volume.log_dir}: last observed or confirmed more than "
                    f"the validity duration ({self._validity:g} s) ago",
                    broker_id=volume.broker_id,
                    log_dir=volume.log_dir,
                )
            )
        return changes

    def _round_state(self, round_: ObservationRound) -> list[Change]:
        if round_.failed == self._round_failed:
            return []
        self._round_failed = round_.failed
        if round_.failed:
            return [
                _change(
                    logging.WARNING,
                    "observation_failing",
                    f"observation failing: {round_.error}",
                    error=round_.error,
                )
            ]
        active = len(round_.active_brokers)
        return [
            _change(
                logging.INFO,
                "observation_restored",
                f"observation restored: {active} active brokers",
                active_brokers=active,
            )
        ]

    def _registrations(
        self, round_: ObservationRound, cached_brokers: Collection[int]
    ) -> list[Change]:
        now = dict.fromkeys(round_.active_brokers, Registration.ACTIVE)
        now.update(dict.fromkeys(round_.fenced_brokers, Registration.FENCED))
        before, self._registered = self._registered, now
        changes = []
        for broker in sorted(set(now) | set(before or {})):
            was = before.get(broker) if before is not None else None
            status = now.get(broker)
            if was == status:
                continue
            if status is Registration.FENCED:
                line = self._fenced_line(broker, was, broker in cached_brokers)
                changes.append(_change(logging.WARNING, "broker_fenced", line, broker_id=broker))
            elif status is Registration.ACTIVE and was is Registration.FENCED:
                changes.append(
                    _change(
                        logging.INFO,
                        "broker_unfenced",
                        f"broker {broker} unfenced: serving again",
                        broker_id=broker,
                    )
                )
            elif status is Registration.ACTIVE and before is not None:
                changes.append(
                    _change(
                        logging.INFO,
                        "broker_registered",
                        f"broker {broker} registered",
                        broker_id=broker,
                    )
                )
            elif status is None:
                changes.append(
                    _change(
                        logging.WARNING,
                        "broker_unregistered",
                        f"broker {broker} no longer registered (unregistered or removed): its last observation is "
                        f"forgotten once older than the validity duration ({self._validity:g} s)",
                        broker_id=broker,
                    )
                )
        return changes

    def _fenced_line(self, broker: int, was: Registration | None, observed: bool) -> str:
        what = "fenced" if was is Registration.ACTIVE else "registered but fenced"
        if not observed:
            kept = "the service has no observation of it to keep"
        elif self._keep_fenced:
            kept = "its last observation stays in the view for as long as it stays registered"
        else:
            kept = f"its last observation is forgotten once older than the validity duration ({self._validity:g} s)"
        return f"broker {broker} {what} (stopped, or halted by a failed disk): {kept}"

    def _answers(self, round_: ObservationRound) -> list[Change]:
        missing = frozenset(round_.missing_brokers)
        changes = [
            _change(
                logging.WARNING,
                "broker_not_answering",
                f"broker {broker} did not answer DescribeLogDirs: {round_.missing_brokers[broker]}; its last observation "
                "stays in the view until older than the validity duration",
                broker_id=broker,
                error=round_.missing_brokers[broker],
            )
            for broker in sorted(missing - self._missing)
        ]
        active = set(round_.active_brokers)
        # Only a broker that answers again is said to; one that left (fenced, unregistered) was said so above.
        changes += [
            _change(
                logging.INFO,
                "broker_answering",
                f"broker {broker} answering again",
                broker_id=broker,
            )
            for broker in sorted(self._missing - missing)
            if broker in active
        ]
        self._missing = missing
        return changes

    def _log_dirs(self, round_: ObservationRound) -> list[Change]:
        # Only offline dirs are tracked: at 12,000 healthy log dirs a round compares nothing.
        errors = {
            (v.broker_id, v.log_dir): v.error for v in round_.observations if v.error is not None
        }
        changes = [
            _change(
                logging.WARNING,
                "log_dir_offline",
                f"broker {key[0]} log dir {key[1]} offline: {error} (counts as breaching the hard limit until the broker reports it back)",
                broker_id=key[0],
                log_dir=key[1],
                error=error,
            )
            for key, error in sorted(errors.items())
            if self._log_dir_errors.get(key) != error
        ]
        answered = set(round_.answered_brokers)
        back = {key for key in self._log_dir_errors if key not in errors and key[0] in answered}
        back_brokers = {key[0] for key in back}
        reported = (
            {(v.broker_id, v.log_dir) for v in round_.observations if v.broker_id in back_brokers}
            if back
            else set()
        )
        changes += [
            _change(
                logging.INFO,
                "log_dir_online",
                f"broker {key[0]} log dir {key[1]} back online",
                broker_id=key[0],
                log_dir=key[1],
            )
            for key in sorted(back)
            if key in reported
        ]
        # A dir still offline at a broker that did not answer stays tracked; one its broker no
        # longer reports is dropped without a word (it left with the broker's answer).
        self._log_dir_errors = {
            **{k: e for k, e in self._log_dir_errors.items() if k[0] not in answered},
            **errors,
        }
        return changes
