"""Kafka's framing on a TCP stream, both ways, with kafka-python's own protocol classes.

A request is a 4-byte big-endian size, then the request header (api key, api version,
correlation id, client id; tagged fields when the API's version is flexible) and the body. A
response is a size, the response header (the correlation id; tagged fields when flexible, but
never for ApiVersions) and the body. kafka-python's message classes know each version's
layout; this module only adds the framing and the dispatch on the api key, for the simulated
brokers (``decode_request``, ``encode_response``) and for tests that speak to a broker raw
(``RawConnection``)."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kafka.protocol.admin import DescribeClusterRequest, DescribeLogDirsRequest
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

# The requests the simulated brokers answer, by api key.
REQUESTS: dict[int, Any] = {
    request.API_KEY: request
    for request in (ApiVersionsRequest, MetadataRequest, DescribeClusterRequest, DescribeLogDirsRequest)
}

MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
_SIZE = struct.Struct(">i")
_KEY_VERSION_AND_CORRELATION = struct.Struct(">hhi")


class UnsupportedRequest(Exception):
    """A request the simulated broker has no answer for (an api key or version it does not
    serve): Kafka closes the connection on such a request, and so does the simulation."""


def frame_size(prefix: bytes) -> int:
    (size,) = _SIZE.unpack(prefix)
    if not 0 <= size <= MAX_FRAME_BYTES:
        raise UnsupportedRequest(f"frame of {size} bytes")
    return size


def peek_api(payload: bytes) -> tuple[int, int, int]:
    """The api key, version and correlation id of a request, read without decoding it."""
    return _KEY_VERSION_AND_CORRELATION.unpack_from(payload)


def decode_request(payload: bytes) -> tuple[RequestHeader, Any]:
    """The header and the body of one request (the frame's payload, without its size)."""
    api_key, version, _ = peek_api(payload)
    request_class = REQUESTS.get(api_key)
    if request_class is None:
        raise UnsupportedRequest(f"api key {api_key}")
    if not 0 <= version <= request_class.max_version:
        raise UnsupportedRequest(f"{request_class.name} v{version}")
    stream = io.BytesIO(payload)
    header = RequestHeader.decode(stream, flexible=request_class.flexible_version_q(version))
    return header, request_class.decode(payload[stream.tell() :], version=version)


def encode_response(response: Any, correlation_id: int) -> bytes:
    """The framed response, header included (``response`` has its version set)."""
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))


class RawConnection:
    """One blocking connection that sends requests of a chosen version and decodes the answers,
    with no client logic in between: what a broker answers, exactly."""

    def __init__(self, host: str, port: int, timeout: float = 10.0, client_id: str = "raw-probe") -> None:
        self._socket = socket.create_connection((host, port), timeout=timeout)
        self._client_id = client_id
        self._correlation_id = 0

    def send(self, request: Any) -> Any:
        """Send ``request`` (built with its version, e.g. ``DescribeLogDirsRequest[4](topics=[])``)
        and return the decoded response of the same version."""
        self._correlation_id += 1
        request.with_header(correlation_id=self._correlation_id, client_id=self._client_id)
        self._socket.sendall(request.encode(header=True, framed=True))
        payload = self._receive(frame_size(self._receive(4)))
        response_class = request.header.get_response_class()
        response = response_class.decode(payload, header=True)
        if response.header.correlation_id != self._correlation_id:
            raise AssertionError(f"correlation id {response.header.correlation_id}, expected {self._correlation_id}")
        return response

    def _receive(self, size: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < size:
            chunk = self._socket.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
