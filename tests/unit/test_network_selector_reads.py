"""The admin connection's IO loop leaves a socket's read interest registered between a
reader's waits (no epoll_ctl pair per answer), drops it when the socket is readable with
nobody waiting (no busy loop, the data waits for the next reader), and drops the key of a
socket closed while it lingered when another socket takes its descriptor's number."""

from __future__ import annotations

import socket
import time

import pytest

from app.kafka.network_selector import ScalingNetworkSelector

from .io_loop import run_until


class CountingEpoll:
    """The selector's epoll object, its control calls counted."""

    def __init__(self, epoll):
        self._epoll = epoll
        self.calls: list[str] = []

    def register(self, *args):
        self.calls.append("add")
        return self._epoll.register(*args)

    def modify(self, *args):
        self.calls.append("mod")
        return self._epoll.modify(*args)

    def unregister(self, *args):
        self.calls.append("del")
        return self._epoll.unregister(*args)

    def __getattr__(self, name):
        return getattr(self._epoll, name)


@pytest.fixture
def net():
    selector = ScalingNetworkSelector()
    selector._selector._selector = CountingEpoll(selector._selector._selector)
    yield selector
    selector.close()


def _calls(net) -> list[str]:
    return net._selector._selector.calls


def test_a_reader_waiting_after_every_answer_registers_its_socket_once(net, pair):
    ours, theirs = pair
    received: list[bytes] = []

    async def reader():  # as kafka-python's transport reads: wait, read what is there, again
        while len(received) < 10:
            await net.wait_read(ours)
            received.append(ours.recv(4096))

    net.call_soon(reader)
    for i in range(10):
        theirs.send(b"answer %d" % i)
        run_until(net, lambda: len(received) > i)
    assert received == [b"answer %d" % i for i in range(10)]
    assert _calls(net) == ["add"], "one registration for ten answers, nothing removed between them"


def test_a_socket_readable_with_nobody_waiting_is_dropped_and_its_data_kept_for_the_next_reader(net, pair):
    ours, theirs = pair
    received: list[bytes] = []

    async def read_once():
        await net.wait_read(ours)
        received.append(ours.recv(4096))

    net.call_soon(read_once)
    theirs.send(b"first")
    run_until(net, lambda: received)
    assert _calls(net) == ["add"]  # the read interest lingers
    theirs.send(b"unasked")  # readable, nobody waiting: dropped at the next pass, not spun on
    started, passes = time.monotonic(), 0
    while time.monotonic() - started < 0.2:
        net.poll(timeout_ms=20)
        passes += 1
    assert _calls(net) == ["add", "del"]
    assert passes < 20, "each pass waited its timeout: the loop did not spin on a readable socket"
    net.call_soon(read_once)
    run_until(net, lambda: len(received) == 2)
    assert received == [b"first", b"unasked"]


def test_a_socket_closed_while_its_read_interest_lingers_leaves_nothing_that_stops_its_successor(net):
    first, first_peer = socket.socketpair()
    first.setblocking(False)
    received: list[bytes] = []

    async def read_once(sock):
        await net.wait_read(sock)
        received.append(sock.recv(4096))

    net.call_soon(lambda: read_once(first))
    first_peer.send(b"old")
    run_until(net, lambda: received)
    number = first.fileno()
    first.close()
    first_peer.close()
    second, second_peer = socket.socketpair()  # takes the lowest free numbers: the closed one's
    try:
        second.setblocking(False)
        assert number in (second.fileno(), second_peer.fileno())
        ours, theirs = (second, second_peer) if second.fileno() == number else (second_peer, second)
        ours.setblocking(False)
        net.call_soon(lambda: read_once(ours))
        theirs.send(b"new")
        run_until(net, lambda: len(received) == 2)
        assert received == [b"old", b"new"]
    finally:
        second.close()
        second_peer.close()


def test_a_write_wait_beside_a_lingering_read_interest_is_answered_and_does_not_spin(net, pair):
    ours, theirs = pair
    received: list[bytes] = []
    writes: list[str] = []

    async def read_once():
        await net.wait_read(ours)
        received.append(ours.recv(4096))

    async def write_twice():  # the second wait is registered (the first is answered at once)
        await net.wait_write(ours)
        await net.wait_write(ours)
        ours.send(b"request")
        writes.append("sent")

    net.call_soon(read_once)
    theirs.send(b"answer")
    run_until(net, lambda: received)
    theirs.send(b"more")  # readable again, nobody reading, while a writer waits
    net.call_soon(write_twice)
    run_until(net, lambda: writes)
    assert writes == ["sent"] and theirs.recv(4096) == b"request"
    net.call_soon(read_once)
    run_until(net, lambda: len(received) == 2)
    assert received == [b"answer", b"more"]
