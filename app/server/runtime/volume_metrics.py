"""The per-volume gauges (available and total bytes of every log dir's volume), rendered as the
exposition text ``generate_latest`` would write for them.

At 12,000 volumes these two families are 24,000 series, nearly all of the body. Formatting them
with ``generate_latest`` (escape, sort and format every label set, then the value) costs about
0.2 CPU-s a scrape; formatting them here one volume at a time, with the label sets kept between
scrapes, still cost some 0.03 s after a round that changed every volume's figures. So a family
is rendered in bulk: the volumes' keys and figures are read column by column (``attrgetter``
mapped over the volumes), a column that did not change keeps its text, and a new text is the
kept line beginnings (name and label set) joined, in one pass, with the newly formatted values.
Only a volume that arrives has its label set escaped and formatted."""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, compress
from operator import attrgetter
from typing import cast

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from app.observation.model import VolumeKey, VolumeObservation
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


_BROKER_ID = attrgetter("broker_id")
_LOG_DIR = attrgetter("log_dir")
_TOTAL_BYTES = attrgetter("total_bytes")
_USABLE_BYTES = attrgetter("usable_bytes")


class _Family:
    """One per-volume family: the beginning of each volume's line (a newline, the name, the
    label set and a space), kept by volume, and the text last rendered with its values."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        # The family's header without its last newline: every line beginning starts with one.
        self._header = header(GaugeMetricFamily(name, documentation))[:-1]
        self.beginnings: dict[VolumeKey, str] = {}
        self.values: list[int] = []
        self.rendered = RenderedFamily(name, documentation, "gauge", self._header.encode() + b"\n")

    def beginning(self, broker_id: int, log_dir: str) -> str:
        return f'\n{self.name}{{broker_id="{broker_id}",log_dir="{_label_value(log_dir)}"}} '

    def render(self, beginnings: Sequence[str], values: list[int]) -> RenderedFamily:
        """The family with these lines (``beginnings[i]`` then ``values[i]``)."""
        self.values = values
        body = "".join(chain.from_iterable(zip(beginnings, map(sample_value, values))))
        text = f"{self._header}{body}\n".encode()
        if text != self.rendered.text:  # an equal text keeps the family and its gzip blocks
            self.rendered = RenderedFamily(self.name, self.documentation, "gauge", text)
        return self.rendered


class VolumeCollector(Collector):
    """Per-volume gauges read from the cache at scrape time.

    Setting 2 x 12,000 labelled gauges every round would cost more than the whole decision;
    reading the cache when Prometheus asks costs nothing between scrapes, and a volume that
    leaves the cache leaves the metrics with it. A log dir without capacity figures (before
    Kafka 3.3, or offline) has no bytes series: a -1 would read as a full volume; such log
    dirs are counted by kafka_throttle_unjudged_log_dirs and kafka_throttle_offline_log_dirs.

    The whole text is reused while the cache holds the very same observations (no round or
    report since the last scrape); otherwise a family is rendered again only if its figures
    or its volumes (which, in which order) changed."""

    def __init__(self, volumes: Callable[[], Iterable[VolumeObservation]]) -> None:
        self._volumes = volumes
        self._lock = threading.Lock()  # scrapes may run on several threads at once
        self._observations: tuple[VolumeObservation, ...] | None = None
        self._broker_ids: list[int] = []
        self._log_dirs: list[str] = []
        self._available = _Family(AVAILABLE_NAME, AVAILABLE_HELP)
        self._total = _Family(TOTAL_NAME, TOTAL_HELP)
        # The line beginnings of the volumes last rendered, in their order, per family.
        self._beginnings: tuple[list[str], list[str]] = ([], [])

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
        broker_ids = list(map(_BROKER_ID, volumes))
        log_dirs = list(map(_LOG_DIR, volumes))
        totals = list(map(_TOTAL_BYTES, volumes))
        usables = list(map(_USABLE_BYTES, volumes))
        if volumes and (min(totals) < 0 or min(usables) < 0):  # not volume.capacity_known
            known = [total >= 0 and usable >= 0 for total, usable in zip(totals, usables)]
            broker_ids = list(compress(broker_ids, known))
            log_dirs = list(compress(log_dirs, known))
            totals = list(compress(totals, known))
            usables = list(compress(usables, known))
        same_volumes = broker_ids == self._broker_ids and log_dirs == self._log_dirs
        if not same_volumes:  # some arrived or left, or the cache holds them in another order
            self._beginnings = (
                self._line_beginnings(self._available, broker_ids, log_dirs),
                self._line_beginnings(self._total, broker_ids, log_dirs),
            )
            self._broker_ids, self._log_dirs = broker_ids, log_dirs
        available_beginnings, total_beginnings = self._beginnings
        if not same_volumes or usables != self._available.values:
            self._available.render(available_beginnings, usables)
        if not same_volumes or totals != self._total.values:
            self._total.render(total_beginnings, totals)

    @staticmethod
    def _line_beginnings(family: _Family, broker_ids: list[int], log_dirs: list[str]) -> list[str]:
        """The line beginnings of these volumes, in their order: kept ones looked up, the rest
        formatted; only these volumes' are kept from now on."""
        keys = list(zip(broker_ids, log_dirs))
        found = list(map(family.beginnings.get, keys))
        if None in found:
            found = [
                beginning if beginning is not None else family.beginning(*key)
                for key, beginning in zip(keys, found)
            ]
        beginnings = cast(list[str], found)  # none missing now
        family.beginnings = dict(zip(keys, beginnings))
        return beginnings
