"""kafka-python's plain TCP transport, reading a readable socket until a short read instead of
until the kernel says it is empty.

kafka-python's transport answers every "readable" event by calling ``recv(4096)`` until it
raises ``BlockingIOError``: for an answer that fits in one read (a round's DescribeLogDirs
answers are a few hundred bytes) that is a second ``recvfrom`` system call per answer, which
only fails, and an exception raised and caught, 1,000 of each a round at 1,000 brokers. Here
a read that returns fewer bytes than asked for ends the batch: the socket is most likely empty,
and if more has arrived meanwhile the selector (level-triggered epoll) reports the socket
readable again at once and the transport's reader, which waits again after every batch, reads
it then. The bytes, their order, the end of the stream (an empty read) and errors are handled
as kafka-python handles them, with one difference: when an answer and the end of the stream are
ready together, kafka-python reads both in one batch and drops the answer with the batch (the
request fails with the connection); here the answer's short read delivers it first, and the end
of the stream closes the connection at the next event, with the same error.

TLS transports are left as they are: a TLS socket can hold decrypted bytes that the kernel does
not report as readable.

The transport is kafka-python's own object, its class switched to the subclass below as the
connection manager builds it (``KafkaConnectionManager._build_transport``); the subclass
overrides ``KafkaTCPTransport._sock_recv()`` and reads its ``_sock``, as
tests/unit/test_short_reads.py checks against kafka-python."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kafka.errors as kafka_errors
from kafka.net.transport import KafkaTCPTransport

# kafka-python's transport logger: its lines stay where they were
log = logging.getLogger("kafka.net.transport")

READ_SIZE = 4096  # kafka-python's


class ShortReadTCPTransport(KafkaTCPTransport):
    _sock: Any

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


def with_short_reads(
    build_transport: Callable[..., Awaitable[Any]],
) -> Callable[..., Awaitable[Any]]:
    """``KafkaConnectionManager._build_transport``, its plain TCP transports reading until a
    short read."""

    async def build(node: Any, timeout_at: Any = None) -> Any:
        transport = await build_transport(node, timeout_at=timeout_at)
        if type(transport) is KafkaTCPTransport:
            transport.__class__ = ShortReadTCPTransport
        return transport

    build.short_reads = True  # type: ignore[attr-defined]
    return build
