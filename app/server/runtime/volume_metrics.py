"""The per-volume gauges (available and total bytes of every log dir's volume), rendered as the
exposition text ``generate_latest`` would write for them.

At 12,000 volumes these two families are 24,000 series, nearly all of the body. Formatting them
with ``generate_latest`` (escape, sort and format every label set, then the value) costs about
0.2 CPU-s a scrape; formatting them one volume at a time in a Python loop, with the label sets
kept between scrapes, still cost 0.025-0.045 s after a round that changed every volume's usable
bytes. So the volumes are read column by column (``attrgetter`` mapped over them: keys, total
and usable bytes) and compared with the columns of the last render as whole lists; for each
volume, in its order, a family keeps the beginning of its line (name and label set) and its
value as written. Only changed values are formatted again, only an arriving volume has its
label set escaped and formatted, and a family's text is one join of beginnings and values."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, compress, repeat

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from app.observation.model import (
    BROKER_ID,
    LOG_DIR,
    TOTAL_BYTES,
    USABLE_BYTES,
    VolumeKey,
    VolumeObservation,
)
from app.server.edge.exposition import RenderedFamily, header

AVAILABLE_NAME = "kafka_throttle_volume_available_bytes"
AVAILABLE_HELP = "Usable bytes of a log dir's volume"
TOTAL_NAME = "kafka_throttle_volume_total_bytes"
TOTAL_HELP = "Total bytes of a log dir's volume"

_EXACT_INTEGERS = 10**15
# Go's exponent for an integer of that many digits (7 to 15; fewer are written as ``123456.0``).
_EXPONENTS = ("",) * 7 + tuple(f"e+{digits - 1:02d}" for digits in range(7, 16))


def sample_value(value: float) -> str:
    """``floatToGoString(value)``, what ``generate_latest`` writes for a value; an integer below
    10**15 (a byte count: exact as a float, printed by ``repr`` with all its digits) without
    going through a float: from 7 digits on as Go's shortest exponent form
    (``1.099511627776e+12``, ``1e+07``), fewer as ``123456.0``."""
    if type(value) is int and 999_999 < value < _EXACT_INTEGERS:
        digits = str(value)
        mantissa = digits.rstrip("0")
        if len(mantissa) > 1:
            return f"{mantissa[0]}.{mantissa[1:]}{_EXPONENTS[len(digits)]}"
        return mantissa + _EXPONENTS[len(digits)]
    if type(value) is int and 0 <= value <= 999_999:
        return f"{value}.0"
    return floatToGoString(value)


def _label_value(value: str) -> str:
    """A label value escaped as the text exposition format wants it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


# Above this share of its volumes with a new figure, a family's lines are all formatted again
# in one pass rather than one by one.
_REFORMAT_ALL_SHARE = 0.25


def _formatted(values: list[float]) -> Iterator[str]:
    """``sample_value`` of each value, one that many volumes share (the total bytes of disks of
    one size) formatted once."""
    if len(set(values[:64])) * 4 <= min(len(values), 64):  # a glance before counting them all
        distinct = set(values)
        if len(distinct) * 4 <= len(values) and all(map(operator.eq, distinct, distinct)):  # no NaN
            formatted = {value: sample_value(value) for value in distinct}
            return map(formatted.__getitem__, values)
    return map(sample_value, values)


def _label_sets(broker_ids: list[int], log_dirs: list[str]) -> list[str]:
    """Each volume's label set and the space before its value."""
    joined = "".join(log_dirs)
    if "\\" in joined or "\n" in joined or '"' in joined:
        log_dirs = list(map(_label_value, log_dirs))
    return list(map('{{broker_id="{}",log_dir="{}"}} '.format, broker_ids, log_dirs))


class _Family:
    """One per-volume family and, for each volume of the last render (in its order), the
    beginning of its line (a newline, the name, the label set and a space), its value and the
    value as written."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        # The family's header without its last newline: every line begins with one.
        self._header = header(GaugeMetricFamily(name, documentation))[:-1]
        self._name = "\n" + name
        self._beginnings: list[str] = []
        self._values: Sequence[float | None] = []
        self._written: list[str] = []
        self._moved = False  # volumes arrived, left or moved since the text was joined
        self.rendered = RenderedFamily(name, documentation, "gauge", f"{self._header}\n".encode())

    def follow(self, positions: list[int], arrived: list[int], label_sets: list[str]) -> None:
        """Rearrange what is kept to the volumes now in the view: volume ``i`` was at
        ``positions[i]`` in the last render, or is new (``arrived``, at the position one past the
        last, with ``label_sets`` in the same order); the values of new volumes are unknown, so
        they are written at ``update``."""
        self._beginnings = list(map([*self._beginnings, ""].__getitem__, positions))
        self._values = list(map([*self._values, None].__getitem__, positions))
        self._written = list(map([*self._written, ""].__getitem__, positions))
        beginnings = self._beginnings
        for i, beginning in zip(arrived, map(self._name.__add__, label_sets)):
            beginnings[i] = beginning
        self._moved = True

    def update(self, values: list[float]) -> None:
        """Give the volumes these values (in the order ``follow`` set): only the values that
        changed are formatted again, and the text is joined again only if a value changed or a
        volume moved."""
        if not self._moved and values == self._values:
            return
        changed = list(map(operator.ne, values, self._values))
        count = changed.count(True)
        if count > len(values) * _REFORMAT_ALL_SHARE:
            self._written = list(_formatted(values))
        elif count:
            written = self._written
            for i in compress(range(len(values)), changed):
                written[i] = sample_value(values[i])
        self._values = values
        self._moved = False
        lines = "".join(chain.from_iterable(zip(self._beginnings, self._written)))
        text = f"{self._header}{lines}\n".encode()
        if text != self.rendered.text:  # an equal text keeps the family and its gzip blocks
            self.rendered = RenderedFamily(self.name, self.documentation, "gauge", text)


class VolumeCollector(Collector):
    """Per-volume gauges read from the cache at scrape time.

    Setting 2 x 12,000 labelled gauges every round would cost more than the whole decision;
    reading the cache when Prometheus asks costs nothing between scrapes, and a volume that
    leaves the cache leaves the metrics with it. A log dir without capacity figures (before
    Kafka 3.3, or offline) has no bytes series: a -1 would read as a full volume; such log
    dirs are counted by kafka_throttle_unjudged_log_dirs and kafka_throttle_offline_log_dirs.

    The whole text is reused while the cache holds the very same observations (no round or
    report since the last scrape); otherwise only the lines whose figures changed are formatted
    again, and a family's text is joined again only if one of its lines changed or the volumes
    did (which, in which order)."""

    def __init__(self, volumes: Callable[[], Iterable[VolumeObservation]]) -> None:
        self._volumes = volumes
        self._lock = threading.Lock()  # scrapes may run on several threads at once
        self._observations: tuple[VolumeObservation, ...] | None = None
        # The volumes of the last render, in their order.
        self._broker_ids: list[int] = []
        self._log_dirs: list[str] = []
        self._positions: dict[VolumeKey, int] = {}  # of each of those volumes
        self._available = _Family(AVAILABLE_NAME, AVAILABLE_HELP)
        self._total = _Family(TOTAL_NAME, TOTAL_HELP)

    def collect(self) -> Iterator[RenderedFamily]:
        volumes = tuple(self._volumes())
        with self._lock:
            kept = self._observations
            if (
                kept is None
                or len(kept) != len(volumes)
                or not all(map(operator.is_, kept, volumes))
            ):
                self._render(volumes)
                self._observations = volumes
            available, total = self._available.rendered, self._total.rendered
        yield available
        yield total

    def _render(self, volumes: tuple[VolumeObservation, ...]) -> None:
        broker_ids = list(map(BROKER_ID, volumes))
        log_dirs = list(map(LOG_DIR, volumes))
        totals = list(map(TOTAL_BYTES, volumes))
        usables = list(map(USABLE_BYTES, volumes))
        if volumes and (min(totals) < 0 or min(usables) < 0):  # not volume.capacity_known
            known = [total >= 0 and usable >= 0 for total, usable in zip(totals, usables)]
            broker_ids = list(compress(broker_ids, known))
            log_dirs = list(compress(log_dirs, known))
            totals = list(compress(totals, known))
            usables = list(compress(usables, known))
        if broker_ids != self._broker_ids or log_dirs != self._log_dirs:
            self._follow(broker_ids, log_dirs)
        self._available.update(usables)
        self._total.update(totals)

    def _follow(self, broker_ids: list[int], log_dirs: list[str]) -> None:
        """Volumes arrived or left, or the cache holds them in another order."""
        keys = list(zip(broker_ids, log_dirs))
        new = len(self._broker_ids)  # the position of a volume not kept
        positions = list(map(self._positions.get, keys, repeat(new)))
        self._positions = dict(zip(keys, range(len(keys))))
        arrived: list[int] = []
        label_sets: list[str] = []
        if new in positions:
            arrived = list(compress(range(len(positions)), map(new.__eq__, positions)))
            label_sets = _label_sets(
                [broker_ids[i] for i in arrived], [log_dirs[i] for i in arrived]
            )
        for family in (self._available, self._total):
            family.follow(positions, arrived, label_sets)
        self._broker_ids, self._log_dirs = broker_ids, log_dirs
