"""kafka-python's plain TCP transport, with two system-call-and-task costs per request removed.

**Reads until a short read.** kafka-python's transport answers every "readable" event by
calling ``recv(4096)`` until it raises ``BlockingIOError``: for an answer that fits in one read
(a round's DescribeLogDirs answers are a few hundred bytes) that is a second ``recvfrom`` system
call per answer, which only fails, and an exception raised and caught, 1,000 of each a round at
1,000 brokers. Here a read that returns fewer bytes than asked for ends the batch: the socket is
most likely empty, and if more has arrived meanwhile the selector (level-triggered epoll)
reports the socket readable again at once and the transport's reader, which waits again after
every batch, reads it then. The bytes, their order, the end of the stream (an empty read) and
errors are handled as kafka-python handles them, with one difference: when an answer and the
end of the stream are ready together, kafka-python reads both in one batch and drops the answer
with the batch (the request fails with the connection); here the answer's short read delivers
it first, and the end of the stream closes the connection at the next event, with the same
error.

**Sends at once.** kafka-python's ``write`` queues the bytes and starts a task that waits for
the socket to be writable and then sends them, at the IO loop's next pass: per request a task
built (its coroutine inspected), run, and a wait for writing, though a connected socket with
room in its buffer takes a round's small requests at once. Here ``write``, when nothing is
queued and no send is under way, sends the bytes itself; what the socket does not take (a full
buffer) and every failure go the way kafka-python's do, queued for its task, which sends the
rest when the socket is writable, or meets the failure again and closes the connection with it.

TLS transports are left as they are: a TLS socket can hold decrypted bytes that the kernel does
not report as readable, and its sends can need reads.

The transport is kafka-python's own object, its class switched to the subclass below as the
connection manager builds it (``KafkaConnectionManager._build_transport``); the subclass
overrides ``KafkaTCPTransport._sock_recv()`` and ``KafkaTCPTransport.write(data)`` and reads
``_sock``, ``_write``, ``_closed``, ``_writing``, ``_write_buffer``, ``_protocol`` and
``last_write``, as tests/unit/test_tcp_transport.py checks against kafka-python."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kafka.errors as kafka_errors
from kafka.net.transport import KafkaTCPTransport

# kafka-python's transport logger: its lines stay where they were
log = logging.getLogger("kafka.net.transport")

READ_SIZE = 4096  # kafka-python's


class PlainTCPTransport(KafkaTCPTransport):
    _sock: Any
    _write: bool
    _closed: bool
    _writing: bool
    _write_buffer: Any
    _protocol: Any
    last_write: float

    def write(self, data: bytes) -> None:
        if (
            self._writing
            or self._write_buffer
            or not self._write
            or self._closed
            or not data
            or self._sock is None
        ):
            super().write(data)  # queued behind a send under way, or kafka-python's error
            return
        try:
            sent = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except Exception:  # noqa: BLE001 - kafka-python's task meets it again and closes the connection
            super().write(data)
            return
        if sent:
            log.debug("%s: sent %d bytes", self, sent)
            self.last_write = time.monotonic()
            sensors = self._protocol and self._protocol._sensors  # noqa: SLF001 - as kafka-python's
            if sensors:
                sensors.bytes_sent.record(sent)
        if sent < len(data):
            super().write(memoryview(data)[sent:])  # the rest when the socket is writable

    def _sock_recv(self) -> tuple[bytes, Exception | None]:
        received = []
        err = None
        while True:
            try:
                data = self._sock.recv(READ_SIZE)
                if not data:
                    log.error("%s: socket disconnected", self)
                    err = kafka_errors.KafkaConnectionError("socket disconnected")
                    break
                received.append(data)
                if len(data) < READ_SIZE:
                    break  # most likely empty; anything more is reported readable again
            except (BlockingIOError, InterruptedError):
                break
            except BaseException as e:  # as kafka-python's: the connection's error
                log.exception("%s: Error receiving network data closing socket", self)
                err = kafka_errors.KafkaConnectionError(e)
                break
        return b"".join(received), err


def with_plain_transport(
    build_transport: Callable[..., Awaitable[Any]],
) -> Callable[..., Awaitable[Any]]:
    """``KafkaConnectionManager._build_transport``, its plain TCP transports those of this
    module."""

    async def build(node: Any, timeout_at: Any = None) -> Any:
        transport = await build_transport(node, timeout_at=timeout_at)
        if type(transport) is KafkaTCPTransport:
            transport.__class__ = PlainTCPTransport
        return transport

    build.plain_transport = True  # type: ignore[attr-defined]
    return build
