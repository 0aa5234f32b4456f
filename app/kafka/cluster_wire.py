"""DescribeCluster, its answer decoded here for the few fields a round reads.

A round asks up to three brokers (``DESCRIBE_CLUSTER_FANOUT``) for the cluster's brokers and
reads, of each answer, the error code and message and each broker's id and whether it is
fenced. kafka-python decodes every field of every broker into objects (host, port, rack, tagged
fields): at 1,000 brokers, three answers a round, about a third of the round's Kafka-side
decoding. ``ClusterRequest`` is kafka-python's ``DescribeClusterRequest`` as its connection
sends it (the version negotiated and the bytes encoded by kafka-python itself, unchanged); only
its answer is decoded by ``ClusterAnswer``, straight from the buffer with ``struct``.

Wire format (Kafka's DescribeClusterResponse.json, versions 0-2, all flexible): the response
header (correlation id, tagged fields), ThrottleTimeMs, ErrorCode, ErrorMessage (compact
nullable string), EndpointType (int8, v1+), ClusterId (compact string), ControllerId (int32),
Brokers (compact array; each: BrokerId int32, Host compact string, Port int32, Rack compact
nullable string, IsFenced bool v2+, tagged fields), ClusterAuthorizedOperations (int32), tagged
fields."""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kafka.protocol.admin import DescribeClusterRequest

from app.kafka.log_dirs_wire import RequestHeader, ResponseHeader, skip_header_tags

API_KEY = 60

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_STATUS = struct.Struct(">ih")  # ThrottleTimeMs, ErrorCode


class ClusterResponse(NamedTuple):
    version: int
    throttle_time_ms: int
    error_code: int
    error_message: str | None
    # (BrokerId, IsFenced) of each broker listed, in the answer's order; IsFenced False below v2
    brokers: tuple[tuple[int, bool], ...]


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: its value and the position after it."""
    value = shift = 0
    while True:
        if shift > 28:
            raise ValueError("DescribeCluster answer: a malformed varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _skip_tagged_fields(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)  # the tag
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


def decode_response(data: bytes, version: int) -> ClusterResponse:
    """The body of a DescribeCluster answer of ``version`` (after the response header). A short
    or malformed answer raises ValueError (kafka-python's parser makes it a protocol error)."""
    try:
        answer, end = _decode(data, version)
    except (IndexError, struct.error) as exc:
        raise ValueError(f"DescribeCluster answer shorter than its fields: {exc}") from None
    if end != len(data):
        raise ValueError(f"DescribeCluster answer: {len(data) - end} bytes after its fields")
    return answer


def _decode(data: bytes, version: int) -> tuple[ClusterResponse, int]:
    throttle, error = _STATUS.unpack_from(data, 0)
    size, pos = _uvarint(data, 6)
    message = None
    if size:  # 0: a null message
        message = bytes(data[pos : pos + size - 1]).decode()
        pos += size - 1
    if version >= 1:
        pos += 1  # EndpointType
    size, pos = _uvarint(data, pos)  # ClusterId
    pos += max(size - 1, 0) + 4  # and ControllerId
    count, pos = _uvarint(data, pos)
    fenced_at = 2 if version >= 2 else 0
    brokers = []
    unpack_int32 = _INT32.unpack_from
    for _ in range(count - 1):
        (broker_id,) = unpack_int32(data, pos)
        pos += 4
        size = data[pos]  # Host: its compact length, one byte below 128
        if size & 0x80:
            size, pos = _uvarint(data, pos)
        else:
            pos += 1
        pos += max(size - 1, 0) + 4  # the host and Port
        size = data[pos]  # Rack: 0 (null) or its compact length
        if size & 0x80:
            size, pos = _uvarint(data, pos)
        else:
            pos += 1
        pos += max(size - 1, 0)
        fenced = False
        if fenced_at:
            fenced = data[pos] != 0
            pos += 1
        if data[pos]:
            pos = _skip_tagged_fields(data, pos)
        else:
            pos += 1
        brokers.append((broker_id, fenced))
    _INT32.unpack_from(data, pos)  # ClusterAuthorizedOperations
    pos = _skip_tagged_fields(data, pos + 4)
    if pos > len(data):
        raise ValueError("DescribeCluster answer shorter than its fields")
    return ClusterResponse(version, throttle, error, message, tuple(brokers)), pos


class ClusterAnswer:
    """What kafka-python's protocol parser asks of a response class, for one version: the
    header (the correlation id, then tagged fields: all versions are flexible), then the body."""

    def __init__(self, version: int) -> None:
        self.version = version

    def parse_header(self, buffer: Any) -> ResponseHeader:
        (correlation_id,) = _INT32.unpack(buffer.read(4))
        skip_header_tags(buffer, "DescribeCluster answer")
        return ResponseHeader(correlation_id)

    def decode(self, buffer: Any) -> ClusterResponse:
        return decode_response(buffer.read(), self.version)


_ANSWERS = {
    version: ClusterAnswer(version)
    for version in range(DescribeClusterRequest.min_version, DescribeClusterRequest.max_version + 1)
}


class ClusterRequest:
    """kafka-python's ``DescribeClusterRequest(include_cluster_authorized_operations=False,
    include_fenced_brokers=True)``, as its connection sends a request: it negotiates
    ``API_VERSION`` (from ``API_KEY``, ``min_version``/``max_version`` and the request's own
    ``_min_version``/``_max_version``), calls ``with_header`` and ``encode`` (kafka-python's,
    on the request inside), and keeps ``header`` until the answer, which
    ``header.get_response_class()`` decodes here."""

    API_KEY = API_KEY
    name = "DescribeClusterRequest"
    min_version = DescribeClusterRequest.min_version
    max_version = DescribeClusterRequest.max_version

    def __init__(self) -> None:
        self._request = DescribeClusterRequest(
            include_cluster_authorized_operations=False, include_fenced_brokers=True
        )
        self._min_version: int | None = None
        self._max_version: int | None = None
        self._header: RequestHeader[ClusterAnswer] | None = None

    @property
    def API_VERSION(self) -> int | None:
        return self._request.API_VERSION  # None until negotiated

    @API_VERSION.setter
    def API_VERSION(self, version: int) -> None:
        self._request.API_VERSION = version

    @property
    def header(self) -> RequestHeader[ClusterAnswer] | None:
        return self._header

    def expect_response(self) -> bool:
        return True

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        version = self.API_VERSION
        if version is None:
            raise ValueError("DescribeCluster: no version negotiated")
        self._request.with_header(correlation_id=correlation_id, client_id=client_id)
        self._header = RequestHeader(API_KEY, correlation_id, version, _ANSWERS)

    def encode(self, framed: bool = True, header: bool = True) -> bytes:
        if not (framed and header) or self._header is None:
            raise ValueError("DescribeCluster is sent framed, with its header")
        return bytes(self._request.encode(framed=True, header=True))

    def __repr__(self) -> str:
        return f"ClusterRequest(v{self.API_VERSION}, include_fenced_brokers=True)"
