"""The admin connection's plain TCP transports end a batch of reads at a short read (one
``recv`` per small answer instead of a second one that fails) and send a request at once, and
deliver the same bytes, in the same order, with the same end of stream and errors as
kafka-python's transport: answers and requests of every size (below, at and above a read's size,
larger than the socket's buffer), bytes arriving after a short read, a peer that closes, a send
that fails. TLS transports are not switched. The kafka-python members this relies on are
checked."""

from __future__ import annotations

import asyncio
import inspect
import re
import time

import kafka.errors as kafka_errors
import pytest
from kafka.net.manager import KafkaConnectionManager
from kafka.net.transport import KafkaSSLTransport, KafkaTCPTransport

from app.kafka.admin_connection import AdminConnection
from app.kafka.network_selector import ScalingNetworkSelector
from app.kafka.tcp_transport import READ_SIZE, PlainTCPTransport, with_plain_transport

from .io_loop import run_until


class CountingSocket:
    """A socket whose ``recv`` calls are counted (a socket object's own methods cannot be)."""

    def __init__(self, sock):
        self.sock = sock
        self.recvs = 0

    def recv(self, size):
        self.recvs += 1
        return self.sock.recv(size)

    def fileno(self):
        return self.sock.fileno()


class Collecting:
    _sensors = None

    def __init__(self):
        self.data = bytearray()
        self.lost = []

    def data_received(self, data):
        self.data += data


@pytest.fixture
def net():
    selector = ScalingNetworkSelector()
    yield selector
    selector.close()


def _reading(net, transport_class, sock):
    transport = transport_class(net, sock, host="localhost")
    protocol = Collecting()
    transport.set_protocol(protocol)
    errors = []
    transport.abort = lambda error=None: errors.append(error)  # the connection's error, recorded
    transport.resume_reading()
    return protocol, errors


@pytest.mark.parametrize(
    "size", [1, 300, READ_SIZE - 1, READ_SIZE, READ_SIZE + 1, 3 * READ_SIZE + 17, 100_000]
)
@pytest.mark.parametrize("transport_class", [PlainTCPTransport, KafkaTCPTransport])
def test_an_answer_of_any_size_arrives_whole_and_in_order(net, pair, size, transport_class):
    ours, theirs = pair
    sock = CountingSocket(ours)
    protocol, errors = _reading(net, transport_class, sock)
    answer = bytes(i % 251 for i in range(size))
    sent = 0
    while sent < size:
        try:
            sent += theirs.send(answer[sent:])
        except BlockingIOError:
            net.poll(timeout_ms=5)
        run_until(net, lambda: len(protocol.data) >= sent, seconds=0.05)
    run_until(net, lambda: len(protocol.data) >= size)
    assert bytes(protocol.data) == answer and errors == []


def test_a_small_answer_takes_one_recv_where_kafka_python_takes_two(net, pair):
    counts = {}
    for transport_class in (PlainTCPTransport, KafkaTCPTransport):
        ours, theirs = pair
        sock = CountingSocket(ours)
        protocol, errors = _reading(net, transport_class, sock)
        for i in range(10):
            theirs.send(b"answer %03d " % i + b"x" * 500)
            run_until(net, lambda: len(protocol.data) >= (i + 1) * 511)
        assert bytes(protocol.data) == b"".join(b"answer %03d " % i + b"x" * 500 for i in range(10))
        counts[transport_class] = sock.recvs
        net.close()
        net = ScalingNetworkSelector()
        ours.close()
        theirs.close()
        pair = __import__("socket").socketpair()
        pair[0].setblocking(False)
        pair[1].setblocking(False)
    net.close()
    assert counts == {PlainTCPTransport: 10, KafkaTCPTransport: 20}


def test_bytes_arriving_after_a_short_read_are_read_at_the_next_event(net, pair):
    ours, theirs = pair
    sock = CountingSocket(ours)
    protocol, _ = _reading(net, PlainTCPTransport, sock)
    theirs.send(b"first half ")
    run_until(net, lambda: protocol.data)
    theirs.send(b"second half")
    run_until(net, lambda: len(protocol.data) == 22)
    assert bytes(protocol.data) == b"first half second half" and sock.recvs == 2


def test_a_peer_that_closes_ends_the_stream_with_kafka_pythons_error(net, pair):
    ours, theirs = pair
    protocol, errors = _reading(net, PlainTCPTransport, ours)
    theirs.send(b"an answer")
    run_until(net, lambda: protocol.data)
    theirs.close()
    run_until(net, lambda: errors)
    assert bytes(protocol.data) == b"an answer"
    assert len(errors) == 1 and isinstance(errors[0], kafka_errors.KafkaConnectionError)
    assert str(errors[0]) == str(kafka_errors.KafkaConnectionError("socket disconnected"))


def test_bytes_and_the_end_of_the_stream_ready_together_the_bytes_are_delivered_first(net, pair):
    """The one difference from kafka-python's transport: it reads the bytes and then the end of
    the stream in one batch and drops the bytes with the batch; here the short read delivers
    them, and the end of the stream comes at the next event, with the same error."""
    delivered = {}
    for transport_class in (PlainTCPTransport, KafkaTCPTransport):
        ours, theirs = __import__("socket").socketpair()
        ours.setblocking(False)
        protocol, errors = _reading(net, transport_class, ours)
        theirs.send(b"last answer")
        theirs.close()
        run_until(net, lambda: errors)
        assert len(errors) == 1 and str(errors[0]) == str(
            kafka_errors.KafkaConnectionError("socket disconnected")
        )
        delivered[transport_class] = bytes(protocol.data)
        ours.close()
    assert delivered == {PlainTCPTransport: b"last answer", KafkaTCPTransport: b""}


def test_a_failing_recv_is_the_connections_error_as_in_kafka_python(net):
    class Failing:
        def recv(self, size):
            raise ConnectionResetError(104, "Connection reset by peer")

        def getpeername(self):
            raise OSError("not connected")

    for transport_class in (PlainTCPTransport, KafkaTCPTransport):
        transport = transport_class(net, Failing(), host="localhost")
        data, err = transport._sock_recv()
        assert data == b"" and isinstance(err, kafka_errors.KafkaConnectionError)
        assert isinstance(err.args[0], ConnectionResetError)


def test_only_plain_tcp_transports_are_switched():
    built = []

    async def build_transport(node, timeout_at=None):
        built.append((node, timeout_at))
        return transports.pop(0)

    plain = KafkaTCPTransport.__new__(KafkaTCPTransport)
    tls = KafkaSSLTransport.__new__(KafkaSSLTransport)
    transports = [plain, tls]
    build = with_plain_transport(build_transport)
    assert (
        asyncio.run(build("node", timeout_at=5.0)) is plain and type(plain) is PlainTCPTransport
    )
    assert asyncio.run(build("node 2")) is tls and type(tls) is KafkaSSLTransport
    assert built == [("node", 5.0), ("node 2", None)]


def test_the_admin_connection_builds_its_transports_with_plain_transport():
    connection = AdminConnection("127.0.0.1:9", 1000, {})
    try:
        connection._client = connection._build()
        assert connection._client._manager._build_transport.plain_transport
    finally:
        connection.close()


def _parameters(member) -> str:
    signature = inspect.signature(member)
    return str(
        signature.replace(
            parameters=[
                p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()
            ],
            return_annotation=inspect.Signature.empty,
        )
    )


def test_kafka_python_still_builds_and_reads_its_transports_as_the_short_reads_rely_on():
    """``KafkaConnectionManager._build_transport(node, timeout_at=None)`` builds the transport,
    which keeps its socket in ``_sock`` and reads it only through ``_sock_recv()`` (returning
    the bytes and an error), the plain class ``KafkaTCPTransport`` and TLS a subclass of it."""
    assert _parameters(KafkaConnectionManager._build_transport) == "(self, node, timeout_at=None)"
    assert inspect.iscoroutinefunction(KafkaConnectionManager._build_transport)
    source = inspect.getsource(KafkaConnectionManager._build_transport)
    assert "KafkaTCPTransport(" in source and "KafkaSSLTransport(" in source
    assert _parameters(KafkaTCPTransport._sock_recv) == "(self)"
    assert re.search(r"self\._sock\s*=\s*sock", inspect.getsource(KafkaTCPTransport.__init__))
    reader = inspect.getsource(KafkaTCPTransport._read_from_sock)
    assert (
        "recvd_data, err = self._sock_recv()" in reader
        and "await self._net.wait_read(self._sock)" in reader
    )
    assert issubclass(KafkaSSLTransport, KafkaTCPTransport) and "_sock_recv" in vars(
        KafkaSSLTransport
    )


def _sending(net, transport_class, sock):
    transport = transport_class(net, sock, host="localhost")
    transport.set_protocol(Collecting())
    errors = []
    transport.abort = lambda error=None: errors.append(error)
    return transport, errors


def _drain(theirs, into: bytearray):
    while True:
        try:
            chunk = theirs.recv(1 << 16)
        except BlockingIOError:
            return
        if not chunk:
            return
        into += chunk


def test_a_request_is_sent_by_write_itself_without_a_pass_of_the_loop(net, pair):
    ours, theirs = pair
    transport, errors = _sending(net, PlainTCPTransport, ours)
    before = transport.last_write
    time.sleep(0.002)
    transport.write(b"a request")
    assert theirs.recv(100) == b"a request", "sent before the loop ran"
    assert not transport._writing and not transport._write_buffer and transport._write_task is None
    assert transport.last_write > before and errors == []


@pytest.mark.parametrize("transport_class", [PlainTCPTransport, KafkaTCPTransport])
def test_requests_larger_than_the_sockets_buffer_arrive_whole_and_in_order(net, pair, transport_class):
    ours, theirs = pair
    transport, errors = _sending(net, transport_class, ours)
    requests = [bytes([i]) * size for i, size in enumerate([10, 3_000_000, 7, 1_000_000, 5])]
    for request in requests:
        transport.write(request)
    received = bytearray()
    expected = b"".join(requests)
    deadline = time.monotonic() + 10
    while len(received) < len(expected) and time.monotonic() < deadline:
        net.poll(timeout_ms=5)
        _drain(theirs, received)
    assert bytes(received) == expected and errors == []


@pytest.mark.parametrize("transport_class", [PlainTCPTransport, KafkaTCPTransport])
def test_a_failing_send_closes_the_connection_with_kafka_pythons_error(net, pair, transport_class):
    ours, _ = pair
    transport, errors = _sending(net, transport_class, ours)
    ours.shutdown(__import__("socket").SHUT_WR)  # every send fails: EPIPE
    transport.write(b"a request")
    run_until(net, lambda: errors)
    assert len(errors) == 1 and isinstance(errors[0], kafka_errors.KafkaConnectionError)
    assert isinstance(errors[0].args[0], BrokenPipeError)


@pytest.mark.parametrize("transport_class", [PlainTCPTransport, KafkaTCPTransport])
def test_writes_refused_as_kafka_python_refuses_them(net, pair, transport_class):
    ours, _ = pair
    transport, _ = _sending(net, transport_class, ours)
    with pytest.raises(ValueError):
        transport.write(b"")
    transport._closed = True
    with pytest.raises(RuntimeError):
        transport.write(b"late")


def test_kafka_python_still_writes_as_the_direct_send_relies_on():
    """``write(data)`` queues into ``_write_buffer`` and starts ``_write_to_sock`` unless
    ``_writing``; the task sends memoryviews; ``last_write`` is set after each send."""
    assert _parameters(KafkaTCPTransport.write) == "(self, data)"
    init = inspect.getsource(KafkaTCPTransport.__init__)
    for name in ("_write_buffer", "_writing", "_write", "_closed", "_protocol", "last_write", "_write_task"):
        assert re.search(rf"self\.{name}\s*=", init), name
    write = inspect.getsource(KafkaTCPTransport.write)
    assert "self._write_buffer.append(data)" in write and "if not self._writing:" in write
    assert "self.last_write = time.monotonic()" in inspect.getsource(KafkaTCPTransport._write_to_sock)
    assert "memoryview" in inspect.getsource(KafkaTCPTransport._sock_send)
