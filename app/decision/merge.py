"""Two sources for a data volume: the admin rounds (DescribeLogDirs) and the node's own report
(PUT /nodes/{node_id}/volumes, its data dirs). Pure: no clock, no I/O.

Both name a volume by (broker id, log dir). The view holds, per key, the newer of the two (by
observation time); each keeps its own time, validity and the fenced and expiry rules (an admin
observation the cache's, app/observation/cache.py; a report the report book's,
app/observation/node_reports.py): once one has expired, the other is the volume's observation.

The rounds cross-check the reports: a round's fresh observation of a volume whose node's report
is valid is compared with that report. When they differ by more than the tolerance (a share of
the volume's total bytes, or the round saw a log dir error), a discrepancy episode begins: it is
logged once and counted, and while it lasts the MORE CONSERVATIVE of the two (the error, else
the less room as the storage limits measure it) is the volume's observation, whichever is newer.
It ends when they agree again (a later report or round within the tolerance), or when either is
no longer valid. Between rounds a report is not a discrepancy: it is newer, and a volume that
fills or is emptied moves. With change-triggered reporting (the shim reports a move of more
than 1% of total at once) the latest report is within that share of the truth, so a round that
finds more is a disagreement rather than the passage of time.

Cheap per report: a report's data dirs are judged once, when it arrives; only the entries that
can change the evaluation (judged other than ok, overriding a volume the round did not judge
ok, in an episode, or without an admin observation) are ``notable``, and a step of the merged
timeline is the round's step with those substituted: a few entries, not every volume. The full
list of volumes in a step is built only when something reads it (the history, /volumes)."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NamedTuple, overload

from app.decision.fill_rate import TimeToFull
from app.decision.policy import (
    Evaluation,
    LimitKind,
    StoragePolicy,
    VolumeStatus,
    VolumeVerdict,
    judge_volume,
)
from app.decision.timeline import Step, Timeline, ViewTimeline
from app.observation.cache import VolumeCache
from app.observation.model import NODE_REPORT, ObservationRound, VolumeKey, VolumeObservation
from app.observation.node_reports import DATA, NodeReport, NodeReportBook, NodeVolume

log = logging.getLogger(__name__)

DEFAULT_TOLERANCE = 0.01
_OK = VolumeStatus.OK
_BREACHING = VolumeStatus.BREACHING
_MIN_AVAILABLE_BYTES = LimitKind.MIN_AVAILABLE_BYTES  # read at every node report: looked up once


class Reported(NamedTuple):
    """A data dir of a node's report, judged when it arrived (a tuple: thousands are made a
    second, one per data dir of every report)."""

    volume: NodeVolume
    report: NodeReport  # the report it came in: its time, and its expiry (the book's)
    # None: ok, decided inline (most of them: no object is made for those until one is read).
    verdict: VolumeVerdict | None = None

    @property
    def status(self) -> VolumeStatus:
        return _OK if self.verdict is None else self.verdict.status

    @property
    def observed_at(self) -> float:
        return self.report.received_at

    @property
    def observation(self) -> VolumeObservation:
        if self.verdict is not None:
            return self.verdict.volume
        report, volume = self.report, self.volume
        return VolumeObservation(
            report.node_id,
            volume.log_dir,
            volume.total_bytes,
            volume.usable_bytes,
            report.received_at,
            None,
            NODE_REPORT,
        )


# ``Reported(volume, report)`` made by tuple's own constructor, not the named tuple's ``__new__``
# (a Python function): one per data dir of every report.
_reported = tuple.__new__


def disagree(admin: VolumeObservation, reported: NodeVolume, tolerance: float) -> bool:
    """The two observations of one volume differ by more than ``tolerance`` of its total bytes,
    or the admin API saw an error a report cannot show."""
    if admin.error is not None:
        return True
    total, usable = reported.total_bytes, reported.usable_bytes
    if admin.total_bytes < 0 or admin.usable_bytes < 0 or total < 0 or usable < 0:
        return False
    margin = tolerance * max(admin.total_bytes, total)
    return abs(admin.usable_bytes - usable) > margin or abs(admin.total_bytes - total) > margin


def more_conservative(
    policy: StoragePolicy, a: VolumeObservation, b: VolumeObservation
) -> VolumeObservation:
    """The one of ``a`` and ``b`` that makes the cluster look less healthy: an error, else the
    less room as ``policy`` measures it (usable bytes, or usable/total); on a tie the newer."""
    if (a.error is None) != (b.error is None):
        return a if a.error is not None else b
    if a.capacity_known and b.capacity_known:
        room_a = policy.measure(a.total_bytes, a.usable_bytes)
        room_b = policy.measure(b.total_bytes, b.usable_bytes)
        if room_a != room_b:
            return a if room_a < room_b else b
    return a if a.observed_at >= b.observed_at else b


class ReportOverlay:
    """The data dirs of the nodes' reports, over the admin cache: which of the two is each
    volume's observation, and the discrepancy episodes between them."""

    def __init__(
        self,
        policy: StoragePolicy,
        cache: VolumeCache,
        book: NodeReportBook,
        tolerance: float = DEFAULT_TOLERANCE,
    ) -> None:
        self.policy = policy
        self.cache = cache
        self.book = book
        self.tolerance = tolerance
        self.entries: dict[VolumeKey, Reported] = {}
        self._by_node: dict[int, tuple[VolumeKey, ...]] = {}
        self.notable: dict[VolumeKey, Reported] = {}
        self.disagreeing: set[VolumeKey] = set()
        self.discrepancies = 0  # episodes begun in this process
        # A round's view (generation) and the reports over it (version): a merged timeline reads
        # the overlay while its generation is the current one, and is the round's alone after.
        self.generation = 0
        self.version = 0  # moves with every report
        self.notable_version = 0  # moves when what a step's evaluation reads changes
        # What the round judged other than ok, or keeps for less than its view lasts (_take_base).
        self.base_listed: frozenset[VolumeKey] = frozenset()
        self.times_to_full: Mapping[VolumeKey, TimeToFull] | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def expires_at(self, entry: Reported) -> float:
        return self.book.expires_at(entry.report)

    def _judge(self, observation: VolumeObservation, was_breaching: bool) -> VolumeVerdict:
        times = self.times_to_full
        return judge_volume(
            self.policy,
            observation,
            was_breaching,
            times.get((observation.broker_id, observation.log_dir)) if times else None,
        )

    def _is_notable(self, key: VolumeKey, entry: Reported) -> bool:
        """Whether a step's evaluation must read ``entry``: judged other than ok, over a volume
        the round did not judge ok, in a discrepancy episode, or without an admin observation."""
        return (
            entry.status is not _OK
            or key in self.base_listed
            or key in self.disagreeing
            or key not in self.cache._entries  # noqa: SLF001 - read in place
        )

    def record(self, report: NodeReport, breaching: frozenset[VolumeKey]) -> None:
        """Take ``report``'s data dirs (replacing the node's previous ones); ``breaching``: the
        volumes in breach in the view now (the hysteresis holds them)."""
        node = report.node_id
        previous = self._by_node.get(node, ())
        # The first data dir in the overlay: the steps' volume lists must be rebuilt to show it.
        changed = not self.entries
        keys = []
        policy = self.policy
        ok_above, by_bytes = policy.ok_above, policy.kind is _MIN_AVAILABLE_BYTES
        entries, notable = self.entries, self.notable
        # Most often empty: looked into only when not.
        disagreeing, base_listed = self.disagreeing or None, self.base_listed or None
        times = self.times_to_full or None
        admin = self.cache._entries  # noqa: SLF001 - read in place
        for volume in report.volumes:
            if DATA not in volume.holds:
                continue
            key = (node, volume.log_dir)
            keys.append(key)
            total, usable = volume.total_bytes, volume.usable_bytes
            if (
                total >= 0
                and usable >= 0
                # policy.measure(total, usable) > ok_above, inline
                and (float(usable) if by_bytes else (usable / total if total > 0 else 0.0))
                > ok_above
                and not (disagreeing and key in disagreeing)
                and not (base_listed and key in base_listed)
                and not (times and key in times)
            ):
                # The common case inline (_entry and _note, to the same effect): plainly ok, no
                # disagreement to settle; a step's evaluation reads it only when the admin API
                # has not observed the volume.
                entry = entries[key] = _reported(Reported, (volume, report, None))
                if key not in admin:
                    notable[key] = entry
                    changed = True
                elif key in notable:
                    del notable[key]
                    changed = True
                continue
            entry = self._entry(key, volume, report, breaching, ok_above)
            changed = self._note(key, entry) or changed
        now_keys = tuple(keys)
        if previous and previous != now_keys:
            for key in set(previous).difference(keys):
                changed = changed or key in self.notable
                self._forget(key)
        if keys:
            self._by_node[node] = now_keys
        else:
            self._by_node.pop(node, None)
        self.version += 1
        if changed:
            self.notable_version += 1

    def _entry(
        self,
        key: VolumeKey,
        volume: NodeVolume,
        report: NodeReport,
        breaching: frozenset[VolumeKey],
        ok_above: float,
    ) -> Reported:
        """``volume`` of ``report`` as the overlay's entry for ``key``, judged unless plainly ok
        (``ok_above``: the policy's, as evaluate decides the common case inline)."""
        entries, times = self.entries, self.times_to_full
        total, usable = volume.total_bytes, volume.usable_bytes
        if (
            total >= 0
            and usable >= 0
            and not (times and key in times)
            and self.policy.measure(total, usable) > ok_above
        ):
            entry = entries[key] = Reported(volume, report)
            return entry
        before = entries.get(key)
        was_breaching = key in breaching or (before is not None and before.status is _BREACHING)
        unjudged = Reported(volume, report)
        entry = entries[key] = Reported(
            volume, report, self._judge(unjudged.observation, was_breaching)
        )
        return entry

    def _note(self, key: VolumeKey, entry: Reported) -> bool:
        """Settle a disagreement the new entry ends, and keep the entry among the notable ones
        when a step's evaluation must read it. Returns whether what the steps read changed."""
        changed = False
        if key in self.disagreeing:
            admin = self.cache.get(key)
            if admin is None or not disagree(admin, entry.volume, self.tolerance):
                self._agreed(key)
                changed = True
        if self._is_notable(key, entry):
            self.notable[key] = entry
            return True
        if key in self.notable:
            del self.notable[key]
            return True
        return changed

    def _forget(self, key: VolumeKey) -> None:
        self.entries.pop(key, None)
        self.notable.pop(key, None)
        self.disagreeing.discard(key)

    def evict(self, expired: Sequence[NodeReport]) -> None:
        """The book dropped these reports (past their validity): their data dirs go too."""
        for report in expired:
            for key in self._by_node.pop(report.node_id, ()):
                entry = self.entries.get(key)
                if entry is not None and entry.report is report:
                    self._forget(key)
        if expired:
            self.version += 1
            self.notable_version += 1

    def _disagreed(self, admin: VolumeObservation, entry: Reported) -> None:
        key = (admin.broker_id, admin.log_dir)
        if key in self.disagreeing:
            return
        self.disagreeing.add(key)
        self.discrepancies += 1
        reported = entry.observation
        chosen = more_conservative(self.policy, reported, admin)
        log.warning(
            "node %d's report of %s disagrees with DescribeLogDirs by more than %s of its total "
            "(report: %d of %d bytes usable; DescribeLogDirs: %s); the more conservative (%s) is "
            "used until they agree",
            admin.broker_id,
            admin.log_dir,
            f"{self.tolerance:.2%}",
            reported.usable_bytes,
            reported.total_bytes,
            f"error {admin.error}"
            if admin.error is not None
            else f"{admin.usable_bytes} of {admin.total_bytes} bytes usable",
            chosen.observed_by,
        )

    def _agreed(self, key: VolumeKey) -> None:
        self.disagreeing.discard(key)
        log.info(
            "node %d's report of %s and DescribeLogDirs agree again (or one of them is no longer "
            "valid): the newer is used",
            *key,
        )

    def rebase(self, base: ViewTimeline, round_: ObservationRound, now: float) -> None:
        """A round was applied (the cache holds its observations; ``base`` is its view): cross-check
        its fresh observations with the reports, and judge again what the round may change."""
        self.generation += 1
        self.version += 1
        self.notable_version += 1
        self._take_base(base, now)
        if self.entries:
            self._cross_check(round_, now)
        self._end_stale_disagreements(now)
        self._rejudge()

    def _cross_check(self, round_: ObservationRound, now: float) -> None:
        """The round's fresh observations against the valid reports of the same volumes. A pass
        over the round's observations, inline but for the volumes a report covers; a node's
        entries share its report, so its validity is looked up once."""
        entries, book, tolerance = self.entries, self.book, self.tolerance
        valid: dict[int, bool] = {}
        for fresh in round_.observations:
            entry = entries.get((fresh.broker_id, fresh.log_dir))
            if entry is None:
                continue
            node_valid = valid.get(fresh.broker_id)
            if node_valid is None:
                node_valid = valid[fresh.broker_id] = now <= book.expires_at(entry.report)
            if not node_valid:
                continue
            if disagree(fresh, entry.volume, tolerance):
                self._disagreed(fresh, entry)
            elif (fresh.broker_id, fresh.log_dir) in self.disagreeing:
                self._agreed((fresh.broker_id, fresh.log_dir))

    def _end_stale_disagreements(self, now: float) -> None:
        """A disagreement ends when either side is gone or past its validity."""
        entries, book, cache = self.entries, self.book, self.cache
        for key in list(self.disagreeing):
            reported_entry, admin = entries.get(key), cache.get(key)
            if (
                reported_entry is None
                or admin is None
                or now > book.expires_at(reported_entry.report)
                or now > cache.expires_at(admin)
            ):
                self._agreed(key)

    def _rejudge(self) -> None:
        """Judge again the entries the round may change (those not ok, or with a time to full),
        and list the notable ones afresh."""
        entries, times = self.entries, self.times_to_full
        notable: dict[VolumeKey, Reported] = {}
        for key, held in entries.items():
            entry, verdict = held, held.verdict
            if (verdict is not None and verdict.status is not _OK) or (times and key in times):
                judged = self._judge(entry.observation, entry.status is _BREACHING)
                if judged != verdict:
                    entry = entries[key] = entry._replace(verdict=judged)
            if self._is_notable(key, entry):
                notable[key] = entry
        self.notable = notable

    def _take_base(self, base: ViewTimeline, at: float) -> None:
        """What a report over the round's view ``base`` must be put over it for: the volumes the
        round judged other than ok, and those whose admin observation leaves the view before the
        view ends (a missing broker's kept one: a report then stands alone)."""
        listed: set[VolumeKey] = set()
        step = base.at(at)
        if step is not None:
            evaluation = step.evaluation
            listed.update(
                v.volume.key
                for v in (*evaluation.breaching, *evaluation.ramping, *evaluation.unjudged)
            )
        end = base.end
        for bound, volumes in base.groups.items():
            if bound < end:
                listed.update((v.broker_id, v.log_dir) for v in volumes)
        self.base_listed = frozenset(listed)
        self.times_to_full = base.times_to_full

    def restore(
        self,
        reports: Sequence[NodeReport],
        breaching: frozenset[VolumeKey],
        disagreeing: frozenset[VolumeKey],
        base: ViewTimeline | None,
    ) -> None:
        """Rebuild the overlay from the reports in the book (a snapshot's), with the volumes
        their verdicts held in breach and the episodes in progress, over the round's ``base``."""
        if base is not None:
            self._take_base(base, base.start)
        self.disagreeing = set(disagreeing)
        for report in sorted(reports, key=lambda r: r.received_at):
            self.record(report, breaching)
        self.disagreeing &= set(self.entries)

    def breaching_keys(self) -> list[VolumeKey]:
        """The data dirs whose report was judged in breach (a snapshot keeps them)."""
        # The verdict read in place: most entries are ok, decided inline, without one.
        return [
            k
            for k, e in self.entries.items()
            if e.verdict is not None and e.verdict.status is _BREACHING
        ]

    def chosen(self, key: VolumeKey, entry: Reported, at: float) -> bool:
        """Whether ``entry``'s report is the volume's observation at ``at`` (else the admin
        API's, or none)."""
        if at > self.book.expires_at(entry.report):
            return False
        cache = self.cache
        admin = cache._entries.get(key)  # noqa: SLF001 - read in place: per report
        if admin is None or at > cache.expires_at(admin):
            return True
        if key in self.disagreeing:
            reported = entry.observation
            return more_conservative(self.policy, reported, admin) is reported
        return entry.report.received_at > admin.observed_at

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None
    ) -> ReportOverlay:
        """A copy whose reports are judged by ``policy`` (no volume remembered in breach), every
        entry notable (what-if: rare, and the twin's round judged the volumes otherwise)."""
        twin = ReportOverlay(policy, self.cache, self.book, self.tolerance)
        twin.times_to_full = times_to_full
        twin.disagreeing = set(self.disagreeing)
        twin.generation, twin.version = self.generation, self.version
        twin.notable_version = self.notable_version
        twin.entries = {
            k: e._replace(verdict=twin._judge(e.observation, False))
            for k, e in self.entries.items()
        }
        twin.notable = dict(twin.entries)
        return twin

    def merged_step(self, base: Step, start: float, bound: float) -> Step:
        """``base`` (the round's step in force until ``bound``) with the reports that are their
        volume's observation then in place of the admin API's."""
        replaced: dict[VolumeKey, VolumeVerdict | None] = {}
        extra: list[VolumeKey] = []
        cache = self.cache
        for key, entry in self.notable.items():
            if self.chosen(key, entry, bound):
                replaced[key] = entry.verdict
                admin = cache.get(key)
                if admin is None or bound > cache.expires_at(admin):
                    extra.append(key)
        evaluation = base.evaluation
        if replaced:
            lists: dict[VolumeStatus, list[VolumeVerdict]] = {
                VolumeStatus.BREACHING: [
                    v for v in evaluation.breaching if v.volume.key not in replaced
                ],
                VolumeStatus.RAMPING: [
                    v for v in evaluation.ramping if v.volume.key not in replaced
                ],
                VolumeStatus.UNJUDGED: [
                    v for v in evaluation.unjudged if v.volume.key not in replaced
                ],
            }
            for verdict in replaced.values():
                if verdict is not None and verdict.status is not _OK:
                    lists[verdict.status].append(verdict)
            order: Callable[[VolumeVerdict], VolumeKey] = lambda v: v.volume.key  # noqa: E731
            breaching, ramping, unjudged = (
                tuple(sorted(lists[s], key=order))
                for s in (VolumeStatus.BREACHING, VolumeStatus.RAMPING, VolumeStatus.UNJUDGED)
            )
            factor = min((v.factor for v in (*breaching, *ramping, *unjudged)), default=1.0)
            evaluation = Evaluation(
                factor, breaching, ramping, unjudged, evaluation.volume_count + len(extra)
            )
        base_volumes = base.volumes
        if not self.entries:  # no report's data dir (no node token): the round's own step
            return Step(start, bound, evaluation, base_volumes)
        entries, chosen = self.entries, self.chosen

        def build() -> list[VolumeObservation]:
            volumes = []
            for volume in base_volumes:
                key = (volume.broker_id, volume.log_dir)
                entry = entries.get(key)
                volumes.append(
                    entry.observation if entry is not None and chosen(key, entry, bound) else volume
                )
            volumes += [entries[k].observation for k in extra if k in entries]
            return volumes

        return Step(
            start, bound, evaluation, _LazyVolumes(build, len(base_volumes) + len(extra), self)
        )


class _LazyVolumes(Sequence[VolumeObservation]):
    """A step's volumes, built when first read (every volume: a report must not cost that),
    and again when read after a report changed which observations are in the view (a step is
    kept while the reports change nothing its evaluation reads)."""

    __slots__ = ("_build", "_count", "_overlay", "_version", "_volumes")

    def __init__(
        self, build: Callable[[], list[VolumeObservation]], count: int, overlay: ReportOverlay
    ) -> None:
        self._build = build
        self._count = count
        self._overlay = overlay
        self._version = -1
        self._volumes: list[VolumeObservation] | None = None

    def _items(self) -> list[VolumeObservation]:
        if self._volumes is None or self._version != self._overlay.version:
            self._version = self._overlay.version
            self._volumes = self._build()
        return self._volumes

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> VolumeObservation: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[VolumeObservation]: ...
    def __getitem__(self, index: int | slice) -> VolumeObservation | Sequence[VolumeObservation]:
        return self._items()[index]

    def __iter__(self) -> Iterator[VolumeObservation]:
        return iter(self._items())


class MergedTimeline(Timeline):
    """A round's view (``base``) with the nodes' reports over it, as they arrive: read while
    the round is the latest (the overlay's generation); after the next round, the round's own."""

    def __init__(self, base: ViewTimeline, overlay: ReportOverlay) -> None:
        self.base = base
        self.overlay = overlay
        self._generation = overlay.generation
        self._version = -1
        self._bounds: list[float] = []
        self._steps: dict[int, Step] = {}

    @property
    def live(self) -> bool:
        return self.overlay.generation == self._generation

    def _refresh(self) -> list[float]:
        overlay = self.overlay
        if overlay.notable_version != self._version:
            self._version, self._steps = overlay.notable_version, {}
            base = self.base
            start, end = base.start, base.end
            bounds = set(base.bounds)
            for entry in overlay.notable.values():
                expiry = overlay.expires_at(entry)
                if start < expiry < end:
                    bounds.add(expiry)
            self._bounds = sorted(bounds)
        return self._bounds

    @property
    def end(self) -> float:
        return self.base.end

    def _step(self, index: int) -> Step:
        step = self._steps.get(index)
        if step is None:
            bound = self._bounds[index]
            base = self.base.at(bound)
            assert base is not None  # every bound is within the base's life
            start = self.base.start if index == 0 else self._bounds[index - 1]
            step = self._steps[index] = self.overlay.merged_step(base, start, bound)
        return step

    def at(self, now: float) -> Step | None:
        if not self.live:
            return self.base.at(now)
        bounds = self._refresh()
        index = bisect.bisect_left(bounds, now)
        return self._step(index) if index < len(bounds) else None

    def next_change_after(self, now: float) -> float | None:
        if not self.live:
            return self.base.next_change_after(now)
        bounds = self._refresh()
        index = bisect.bisect_left(bounds, now)
        return bounds[index] if index < len(bounds) else None

    def factor_holds_until(self, now: float) -> float | None:
        if not self.live:
            return self.base.factor_holds_until(now)
        bounds = self._refresh()
        index = bisect.bisect_left(bounds, now)
        if index == len(bounds):
            return None
        factor = self._step(index).factor
        while index + 1 < len(bounds) and self._step(index + 1).factor == factor:
            index += 1
        return bounds[index]

    def judged_by(
        self, policy: StoragePolicy, times_to_full: Mapping[VolumeKey, TimeToFull] | None = None
    ) -> Timeline:
        base = self.base.judged_by(policy, times_to_full)
        if not self.live:
            return base
        assert isinstance(base, ViewTimeline)
        return MergedTimeline(base, self.overlay.judged_by(policy, times_to_full))


def round_view(timeline: Timeline | None) -> Timeline | None:
    """The round's own view of ``timeline`` (what a snapshot writes: the reports are written
    apart, as the node reports they came in)."""
    return timeline.base if isinstance(timeline, MergedTimeline) else timeline
