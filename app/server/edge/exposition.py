"""The Prometheus text exposition of a registry, with families a collector renders itself.

``prometheus_client.generate_latest`` formats every sample of every family at each scrape: at
12,000 volumes that is 24,000 label sets escaped, sorted and formatted, about 0.2 CPU-s for a
2.5 MB body. A collector whose families are large and change only when their values do yields
``RenderedFamily`` objects instead: the family's exposition text, rendered by the collector
(which keeps it between scrapes and re-renders only what changed). ``exposition`` copies that
text as it is and formats the other families with ``generate_latest``, in the registry's order,
so the body is what ``generate_latest`` would write, byte for byte.

Gzipped (Prometheus asks for it), a rendered family is compressed once, on its own, as a run of
raw deflate blocks that ends on a byte boundary; the body's gzip member is those runs and the
other families' text compressed at the scrape, one after the other, then an empty final block
and the checksum of the whole text: a single gzip member any decoder reads, at the cost of
compressing only what was formatted at the scrape.

A ``RenderedFamily`` is still a ``Metric``: anything else that reads the registry (a test, a
push gateway) gets its samples, parsed back from the text when first asked for."""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterable
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


class _Families:
    """Some families, as ``generate_latest`` reads a registry."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


def header(family: Metric) -> str:
    """The ``# HELP`` and ``# TYPE`` lines ``generate_latest`` writes for ``family`` (its samples
    left out)."""
    empty = Metric(family.name, family.documentation, family.type, family.unit)
    return generate_latest(_Families([empty])).decode()


class RenderedFamily(Metric):
    """A family and its exposition text (header and sample lines, as ``generate_latest`` writes
    them)."""

    def __init__(self, name: str, documentation: str, typ: str, text: bytes) -> None:
        super().__init__(name, documentation, typ)
        self.text = text
        self._parsed: list[Sample] | None = None
        self._deflated: bytes | None = None
        self._lock = threading.Lock()

    @property
    def deflated(self) -> bytes:
        """``text`` as raw deflate blocks ending on a byte boundary (none of them final)."""
        with self._lock:
            if self._deflated is None:
                self._deflated = _deflate(self.text)
            return self._deflated

    @property
    def samples(self) -> list[Sample]:
        if self._parsed is None:
            families = list(text_string_to_metric_families(self.text.decode()))
            self._parsed = [sample for family in families for sample in family.samples]
        return self._parsed

    @samples.setter
    def samples(self, value: Any) -> None:  # Metric.__init__ sets an empty list
        if value:
            self._parsed = list(value)


# Level 1: a 2.5 MB exposition compresses to about 7% of its size in a few milliseconds.
GZIP_LEVEL = 1
# The gzip header: deflate, no flags, no modification time, no extra flags, OS unknown.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# An empty final block of fixed Huffman codes: ends the deflate stream.
_FINAL_BLOCK = b"\x03\x00"


def _deflate(data: bytes) -> bytes:
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


def _parts(registry: Any) -> list[bytes | RenderedFamily]:
    """The exposition in order: the text of the families formatted now, and the rendered ones."""
    parts: list[bytes | RenderedFamily] = []
    pending: list[Metric] = []
    for family in registry.collect():
        if isinstance(family, RenderedFamily):
            if pending:
                parts.append(generate_latest(_Families(pending)))
                pending = []
            parts.append(family)
        else:
            pending.append(family)
    if pending:
        parts.append(generate_latest(_Families(pending)))
    return parts


def exposition(registry: Any) -> bytes:
    """What ``generate_latest(registry)`` writes, the rendered families copied as they are."""
    return b"".join(p.text if isinstance(p, RenderedFamily) else p for p in _parts(registry))


def gzipped_exposition(registry: Any) -> bytes:
    """``exposition(registry)`` gzipped: one gzip member, the rendered families' deflate blocks
    reused from earlier scrapes."""
    blocks = [_GZIP_HEADER]
    checksum = 0
    size = 0
    for part in _parts(registry):
        if isinstance(part, RenderedFamily):
            text, deflated = part.text, part.deflated
        else:
            text, deflated = part, _deflate(part)
        blocks.append(deflated)
        checksum = zlib.crc32(text, checksum)
        size += len(text)
    blocks.append(_FINAL_BLOCK)
    blocks.append(struct.pack("<II", checksum, size & 0xFFFFFFFF))
    return b"".join(blocks)
