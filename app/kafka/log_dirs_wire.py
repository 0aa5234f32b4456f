"""DescribeLogDirs with an empty topic list, encoded and decoded here for the few fields a round
reads.

A round sends the same request to every broker and reads, of each answer, the error codes, the
log dirs and their TotalBytes/UsableBytes. kafka-python encodes each request through its generic
schema machinery (the header alone costs more than the body) and decodes each answer into
objects for every field; at 1,000 brokers that was a fifth of a round's CPU. ``LogDirsRequest``
is what kafka-python's connection sends (it asks only for what the connection calls: the version
negotiated, a header with the correlation id, the framed bytes, whether an answer comes), its
bytes built from one template per version; its answer is decoded by ``LogDirsAnswer`` straight
from the buffer with ``struct``, topics and tagged fields skipped, into plain tuples.

Wire format (Kafka's DescribeLogDirsRequest/Response.json, versions 1-5, flexible from 2): the
request header v1 (api key, version, correlation id, client id as a nullable int16 string), v2
adding an empty tagged-field section; the body an empty topic array (int32 0, or the compact
length 1 and an empty tagged-field section). The answer: the response header (correlation id;
tagged fields when flexible), ThrottleTimeMs, ErrorCode (v3+), Results (per log dir: ErrorCode,
LogDir, Topics, TotalBytes and UsableBytes v4+, IsCordoned v5+, tagged fields when flexible),
tagged fields when flexible."""

from __future__ import annotations

import struct
from typing import Any, Generic, NamedTuple, TypeVar

from kafka.protocol.admin import DescribeLogDirsRequest
from kafka.protocol.frame import KafkaBytes

API_KEY = 35
# The versions this module encodes and decodes: kafka-python's own range for the request.
MIN_VERSION = 1
MAX_VERSION = 5
FIRST_FLEXIBLE = 2

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64_PAIR = struct.Struct(">qq")
_HEADER = struct.Struct(">ihhi")  # frame size, api key, version, correlation id


# One log dir of an answer: (ErrorCode, LogDir, TotalBytes, UsableBytes, the number of topics
# listed); TotalBytes and UsableBytes are -1 below v4, no topics are listed as long as the empty
# topic list is honoured. A plain tuple: a round decodes 12,000 of them at 1,000 brokers.
LogDirResult = tuple[int, str, int, int, int]


class LogDirsResponse(NamedTuple):
    version: int
    throttle_time_ms: int
    error_code: int  # 0 below v3
    results: tuple[LogDirResult, ...]


class _Reader:
    """A cursor over an answer's bytes."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def int16(self) -> int:
        (value,) = _INT16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def skip(self, size: int) -> None:
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("DescribeLogDirs answer shorter than its fields")
        self.pos += size

    def uvarint(self) -> int:
        data, pos, shift, value = self.data, self.pos, 0, 0
        while True:
            if pos >= len(data) or shift > 28:
                raise ValueError("DescribeLogDirs answer: a malformed varint")
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return value
            shift += 7

    def array_length(self, flexible: bool) -> int:
        """An array's length (a null array, -1 or compact 0, read as empty)."""
        length = self.uvarint() - 1 if flexible else self.int32()
        return max(length, 0)

    def string(self, flexible: bool) -> str:
        size = self.uvarint() - 1 if flexible else self.int16()
        if size < 0:
            return ""
        start = self.pos
        self.skip(size)
        return self.data[start : self.pos].decode()

    def tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # the tag
            self.skip(self.uvarint())


def _skip_topics(reader: _Reader, flexible: bool) -> int:
    topics = reader.array_length(flexible)
    for _ in range(topics):
        reader.string(flexible)  # name
        for _ in range(reader.array_length(flexible)):
            reader.skip(4 + 8 + 8 + 1)  # index, size, offset lag, is-future
            if flexible:
                reader.tagged_fields()
        if flexible:
            reader.tagged_fields()
    return topics


def decode_response(data: bytes, version: int) -> LogDirsResponse:
    """The body of a DescribeLogDirs answer of ``version`` (after the response header)."""
    if version >= 4:
        answer = _decode_known(data, version)
        if answer is not None:
            return answer
        answer = _decode_plain(data, version)
        if answer is not None:
            _learn_layout(data, answer)
            return answer
    return _decode(data, version)


class _Layout:
    """The shape of a plain answer (see ``_decode_plain``) with given log dirs: one ``Struct``
    for the whole answer, and the values its fixed bytes must have. A broker's answers keep
    their shape from round to round (the same log dirs; only the figures move), and the brokers
    of a cluster mostly share one."""

    __slots__ = ("names", "ones", "raw_names", "sizes", "stride", "whole", "zeros")

    def __init__(self, version: int, names: tuple[str, ...]) -> None:
        raw = tuple(name.encode() for name in names)
        cordoned = "B" if version >= 5 else ""
        # ThrottleTimeMs, ErrorCode, compact count; per log dir: ErrorCode, compact length,
        # LogDir, the compact length of no topics, TotalBytes, UsableBytes, [IsCordoned],
        # tagged fields; the answer's tagged fields.
        self.whole = struct.Struct(
            ">ihB" + "".join(f"hB{len(r)}sBqq{cordoned}B" for r in raw) + "B"
        )
        self.stride = 8 if version >= 5 else 7
        self.sizes = tuple(len(r) + 1 for r in raw)
        self.ones = (1,) * len(raw)
        self.zeros = (0,) * len(raw)
        self.raw_names = raw
        self.names = names


# (version, length of the answer) -> the shape last seen with it; at most _MAX_LAYOUTS
_layouts: dict[tuple[int, int], _Layout] = {}
_MAX_LAYOUTS = 64


def _learn_layout(data: bytes, answer: LogDirsResponse) -> None:
    names = tuple(result[1] for result in answer.results)
    if not all(len(name.encode()) < 0x7F for name in names):
        return
    if len(_layouts) >= _MAX_LAYOUTS:
        _layouts.clear()
    _layouts[(answer.version, len(data))] = _Layout(answer.version, names)


def _decode_known(data: bytes, version: int) -> LogDirsResponse | None:
    """A plain answer of a shape seen before, decoded with one ``unpack``; None when the answer
    is not of that shape (its fixed bytes differ): the caller decodes it otherwise.

    Every byte of the answer is accounted for: the lengths (the answer's, the log dirs' count,
    each log dir's, no topics) and the empty tagged fields are checked against the shape, the
    log dirs' names read from where the shape puts them."""
    layout = _layouts.get((version, len(data)))
    if layout is None:
        return None
    values = layout.whole.unpack(data)
    count = len(layout.sizes)
    if values[2] != count + 1 or values[-1] != 0:
        return None
    fields, stride = values[3:-1], layout.stride
    if (
        fields[1::stride] != layout.sizes
        or fields[3::stride] != layout.ones
        or fields[stride - 1 :: stride] != layout.zeros
    ):
        return None
    raw_names = fields[2::stride]
    names = layout.names if raw_names == layout.raw_names else tuple(map(bytes.decode, raw_names))
    results = tuple(
        zip(fields[0::stride], names, fields[4::stride], fields[5::stride], layout.zeros)
    )
    return LogDirsResponse(version, values[0], values[1], results)


_STATUS = struct.Struct(">ih")  # ThrottleTimeMs, ErrorCode
_RESULT_HEAD = struct.Struct(">hB")  # a result's ErrorCode, its LogDir's compact length (< 127)
_RESULT_TAIL = struct.Struct(">Bqq")  # the compact length of no topics, TotalBytes, UsableBytes


def _decode_plain(data: bytes, version: int) -> LogDirsResponse | None:
    """The answers a round gets (v4+, fewer than 127 log dirs with paths shorter than 127
    bytes, no topics, no tagged fields), decoded without the general reader's calls; None when
    the answer is not one of those."""
    try:
        throttle, error = _STATUS.unpack_from(data, 0)
        count = data[6] - 1
        if count < 0 or count >= 0x7F:
            return None
        pos = 7
        cordoned = 1 if version >= 5 else 0
        results: list[LogDirResult] = []
        for _ in range(count):
            code, size = _RESULT_HEAD.unpack_from(data, pos)
            if size == 0 or size & 0x80:
                return None
            start = pos + 3
            end = start + size - 1
            topics, total, usable = _RESULT_TAIL.unpack_from(data, end)
            pos = end + 17 + cordoned
            if topics != 1 or data[pos] != 0:
                return None  # topics listed, or tagged fields: the general reader
            pos += 1
            results.append((code, data[start:end].decode(), total, usable, 0))
        if data[pos] != 0 or pos + 1 != len(data):
            return None
    except (IndexError, struct.error):
        return None  # short: the general reader says where
    return LogDirsResponse(version, throttle, error, tuple(results))


def _decode(data: bytes, version: int) -> LogDirsResponse:
    flexible = version >= FIRST_FLEXIBLE
    reader = _Reader(data)
    throttle = reader.int32()
    error = reader.int16() if version >= 3 else 0
    results: list[LogDirResult] = []
    for _ in range(reader.array_length(flexible)):
        code = reader.int16()
        log_dir = reader.string(flexible)
        topics = _skip_topics(reader, flexible)
        total = usable = -1
        if version >= 4:
            total, usable = _INT64_PAIR.unpack_from(reader.data, reader.pos)
            reader.skip(16)
        if version >= 5:
            reader.skip(1)  # IsCordoned
        if flexible:
            reader.tagged_fields()
        results.append((code, log_dir, total, usable, topics))
    if flexible:
        reader.tagged_fields()
    return LogDirsResponse(version, throttle, error, tuple(results))


class ResponseHeader(NamedTuple):
    """What kafka-python's parser reads of an answer's header (DescribeLogDirs', DescribeCluster's)."""

    correlation_id: int


def skip_header_tags(buffer: Any, what: str) -> None:
    """Read past a flexible answer header's tagged fields, which a round never uses."""
    for _ in range(read_uvarint(buffer, what)):
        read_uvarint(buffer, what)
        buffer.read(read_uvarint(buffer, what))


class LogDirsAnswer:
    """What kafka-python's protocol parser asks of a response class, for one version: the
    header (the correlation id), then the body."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.flexible = version >= FIRST_FLEXIBLE

    def parse_header(self, buffer: Any) -> ResponseHeader:
        if isinstance(buffer, KafkaBytes):  # the parser's buffer (a bytearray): read in place
            pos = buffer.tell()
            if len(buffer) - pos >= 5 and not (self.flexible and buffer[pos + 4]):
                (correlation_id,) = _INT32.unpack_from(buffer, pos)
                buffer.seek(pos + 5 if self.flexible else pos + 4)  # no tagged fields
                return ResponseHeader(correlation_id)
        (correlation_id,) = _INT32.unpack(buffer.read(4))
        if self.flexible:
            skip_header_tags(buffer, "DescribeLogDirs answer")
        return ResponseHeader(correlation_id)

    def decode(self, buffer: Any) -> LogDirsResponse:
        return decode_response(bytes(buffer.read()), self.version)


def read_uvarint(buffer: Any, what: str) -> int:
    """An unsigned varint read from ``buffer`` (a file-like object); ``what``: the answer it is
    of, named in the error of a malformed one."""
    value = shift = 0
    while True:
        byte = buffer.read(1)
        if not byte or shift > 28:
            raise ValueError(f"{what}: a malformed varint")
        value |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return value
        shift += 7


_ANSWERS = {version: LogDirsAnswer(version) for version in range(MIN_VERSION, MAX_VERSION + 1)}


Answer = TypeVar("Answer")


class RequestHeader(Generic[Answer]):
    """The in-flight record kafka-python's parser keeps until the answer comes: kafka-python's
    own header's fields, with the decoder of the answer's version among ``answers``."""

    __slots__ = ("_answers", "api_key", "api_version", "correlation_id")

    def __init__(
        self, api_key: int, correlation_id: int, version: int, answers: dict[int, Answer]
    ) -> None:
        self.api_key = api_key
        self.api_version = version
        self.correlation_id = correlation_id
        self._answers = answers

    def get_response_class(self) -> Answer | None:
        return self._answers.get(self.api_version)


def _body(version: int) -> bytes:
    """An empty topic array: log dirs only, no partitions. Flexible: the header's empty tagged
    fields, the compact length (0 + 1), the body's empty tagged fields."""
    return b"\x00\x01\x00" if version >= FIRST_FLEXIBLE else b"\x00\x00\x00\x00"


class LogDirsRequest:
    """DescribeLogDirs with an empty topic list, as kafka-python's connection sends a request:
    it negotiates ``API_VERSION`` (from ``API_KEY``, ``min_version``/``max_version`` and the
    request's own ``_min_version``/``_max_version``), calls ``with_header`` and ``encode``, and
    keeps ``header`` until the answer, which ``header.get_response_class()`` decodes."""

    API_KEY = API_KEY
    name = "DescribeLogDirsRequest"
    min_version = MIN_VERSION
    max_version = min(MAX_VERSION, DescribeLogDirsRequest.max_version)

    def __init__(self) -> None:
        self.API_VERSION: int | None = None
        self._min_version: int | None = None
        self._max_version: int | None = None
        self._header: RequestHeader[LogDirsAnswer] | None = None
        self._client_id = b""

    @property
    def header(self) -> RequestHeader[LogDirsAnswer] | None:
        return self._header

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        if self.API_VERSION is None:
            raise ValueError("DescribeLogDirs: no version negotiated")
        self._header = RequestHeader(API_KEY, correlation_id, self.API_VERSION, _ANSWERS)
        self._client_id = client_id.encode()

    def encode(self, framed: bool = True, header: bool = True) -> bytes:
        if not (framed and header) or self._header is None:
            raise ValueError("DescribeLogDirs is sent framed, with its header")
        version = self._header.api_version
        rest = _INT16.pack(len(self._client_id)) + self._client_id + _body(version)
        head = _HEADER.pack(8 + len(rest), API_KEY, version, self._header.correlation_id)
        return head + rest

    def __repr__(self) -> str:
        return f"LogDirsRequest(v{self.API_VERSION}, topics=[])"
