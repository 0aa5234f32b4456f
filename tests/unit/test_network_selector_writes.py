"""The admin connection's IO loop answers a task's first wait for writing at once (a connected
socket with room in its buffer is writable), without registering the socket; a task that waits
again on the same socket (its send would block) waits registered, until the socket is writable."""

from __future__ import annotations

import errno
import socket
import time

import pytest

from app.kafka.network_selector import ScalingNetworkSelector

from .io_loop import run_until


@pytest.fixture
def net():
    selector = ScalingNetworkSelector()
    yield selector
    selector.close()


def _registrations(net):
    calls: list[str] = []
    real_register, real_modify = net._selector.register, net._selector.modify
    net._selector.register = lambda *a, **k: (calls.append("register"), real_register(*a, **k))[1]
    net._selector.modify = lambda *a, **k: (calls.append("modify"), real_modify(*a, **k))[1]
    return calls


def test_a_tasks_first_wait_for_writing_is_answered_at_once_and_a_second_one_waits_registered(net, pair):
    ours, _ = pair
    calls = _registrations(net)
    waits: list[str] = []

    async def writer():
        await net.wait_write(ours)
        waits.append("first")
        assert net._selector.get_map() is None or ours.fileno() not in net._selector.get_map()
        await net.wait_write(ours)
        waits.append("second")

    net.call_soon(writer)
    run_until(net, lambda: len(waits) == 2)
    assert waits == ["first", "second"]
    assert calls == ["register"], "the first wait registers nothing, the second registers once"

    async def another_writer():  # a new task (the next request): its first wait is at once again
        await net.wait_write(ours)
        waits.append("third")

    net.call_soon(another_writer)
    run_until(net, lambda: len(waits) == 3)
    assert calls == ["register"]


def test_a_send_that_would_block_waits_for_the_peer_instead_of_spinning(net, pair):
    ours, theirs = pair
    chunk = b"x" * 65536
    sent = bytearray()
    passes = 0

    async def fill_then_write():
        nonlocal passes
        while True:  # fill the socket's buffers until a send would block
            try:
                ours.send(chunk)
            except BlockingIOError:
                break
        while True:
            passes += 1
            await net.wait_write(ours)
            try:
                ours.send(b"last")
                sent.extend(b"last")
                return
            except BlockingIOError:
                continue

    net.call_soon(fill_then_write)
    started = time.monotonic()
    while time.monotonic() < started + 0.3:
        net.poll(timeout_ms=20)
    assert not sent and passes == 2, "one wait answered at once, then a registered wait: no spinning"
    while True:  # the peer reads: the socket becomes writable and the waiting task sends
        try:
            if not theirs.recv(1 << 20):
                break
        except BlockingIOError:
            break
    run_until(net, lambda: bool(sent))
    assert sent == b"last"


def test_a_connect_in_progress_completes_through_the_wait_answered_at_once(net):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.socket()
    client.setblocking(False)
    connected: list[int] = []

    async def connect():
        address = listener.getsockname()
        while True:
            code = client.connect_ex(address)
            if code in (0, errno.EISCONN):
                connected.append(code)
                return
            await net.wait_write(client, timeout_at=time.monotonic() + 2)

    try:
        net.call_soon(connect)
        run_until(net, lambda: bool(connected))
        assert connected
    finally:
        client.close()
        listener.close()
