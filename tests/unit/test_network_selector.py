"""The admin connection's IO loop: kafka-python's network selector with O(log n) timer
cancellation and unregistered sockets looked up without formatting them."""

from __future__ import annotations

import selectors
import socket
import time

import pytest

from app.kafka.network_selector import QuietSelector, ScalingNetworkSelector


@pytest.fixture
def net():
    selector = ScalingNetworkSelector()
    yield selector
    selector.close()


def test_cancelling_a_timer_per_request_stays_cheap_with_thousands_in_flight(net):
    # One timeout timer per request in flight, each cancelled when its answer comes: kafka-python's
    # own cancellation re-heapifies all of them each time (minutes for 20,000; seconds for 2,000).
    timers = [net.call_later(60, lambda: None) for _ in range(20_000)]
    started = time.process_time()
    for timer in timers:
        net.cancel(timer)
    assert time.process_time() - started < 2.0


def test_a_cancelled_timer_never_fires_and_the_others_fire_in_order(net):
    fired: list[str] = []
    now = time.monotonic()
    net.call_at(now + 0.02, lambda: fired.append("second"))
    cancelled = net.call_at(now + 0.01, lambda: fired.append("cancelled"))
    net.call_at(now + 0.005, lambda: fired.append("first"))
    net.cancel(cancelled)
    while time.monotonic() < now + 0.1:  # a cancelled timer may still wake the loop once, at its time
        net.poll(timeout_ms=20)
    assert fired == ["first", "second"]


def test_a_timer_rescheduled_fires_once_at_its_new_time(net):
    fired: list[float] = []
    now = time.monotonic()
    timer = net.call_at(now + 0.01, lambda: fired.append(time.monotonic()))
    net.reschedule(now + 0.05, timer)
    net.reschedule(now + 0.05, timer)  # to the same instant again: still one run
    while time.monotonic() < now + 0.15:
        net.poll(timeout_ms=20)
    assert len(fired) == 1 and fired[0] >= now + 0.05


class Unprintable:
    """A file object that fails the test if anything formats it."""

    def __init__(self) -> None:
        self._socket = socket.socket()

    def fileno(self) -> int:
        return self._socket.fileno()

    def __repr__(self) -> str:
        raise AssertionError("formatted an unregistered socket")


def test_looking_up_an_unregistered_socket_formats_nothing():
    selector = QuietSelector()
    fileobj = Unprintable()
    try:
        with pytest.raises(KeyError):
            selector.get_key(fileobj)
        selector.register(fileobj, selectors.EVENT_READ)
        assert selector.get_key(fileobj).fileobj is fileobj
    finally:
        selector.close()
        fileobj._socket.close()
