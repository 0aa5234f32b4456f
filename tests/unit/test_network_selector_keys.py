"""A socket's lingering read interest is taken up and set down again by replacing its key's
data in place (no ``namedtuple._replace`` per answer); the key is the one the standard
library's ``modify`` would have made, and the kernel's events still reach the waiting reader."""

from __future__ import annotations

import selectors

import pytest

from app.kafka.network_selector import QuietSelector, ScalingNetworkSelector

from .io_loop import run_until


@pytest.fixture
def net():
    selector = ScalingNetworkSelector()
    yield selector
    selector.close()


def test_replace_data_makes_the_key_modify_would_make(pair):
    ours, _ = pair
    by_replace, by_modify = QuietSelector(), QuietSelector()
    try:
        for selector in (by_replace, by_modify):
            selector.register(ours, selectors.EVENT_READ, ("reader", None))
        by_replace.replace_data(by_replace.get_key(ours), (None, "writer"))
        by_modify.modify(ours, selectors.EVENT_READ, (None, "writer"))
        replaced, modified = by_replace.get_key(ours), by_modify.get_key(ours)
        assert replaced == modified
        assert type(replaced) is selectors.SelectorKey
        assert replaced.data == (None, "writer") and replaced.events == selectors.EVENT_READ
        assert by_replace.get_map()[ours] == replaced
    finally:
        by_replace.close()
        by_modify.close()


def test_a_reader_waiting_after_every_answer_replaces_no_key_through_namedtuple(net, pair, monkeypatch):
    ours, theirs = pair
    replaced: list[object] = []
    original = selectors.SelectorKey._replace

    def counting_replace(self, **changes):
        replaced.append(changes)
        return original(self, **changes)

    monkeypatch.setattr(selectors.SelectorKey, "_replace", counting_replace)
    received: list[bytes] = []

    async def reader():
        while len(received) < 10:
            await net.wait_read(ours)
            received.append(ours.recv(4096))

    net.call_soon(reader)
    for i in range(10):
        theirs.send(b"answer %d" % i)
        run_until(net, lambda: len(received) > i)
    assert received == [b"answer %d" % i for i in range(10)]
    assert replaced == []
    key = net._selector.get_key(ours)
    assert key.events == selectors.EVENT_READ and key.data == (None, None), "the interest lingers, nobody waiting"


def test_a_write_wait_beside_a_lingering_read_still_changes_the_events(net, pair):
    ours, theirs = pair
    got: list[bytes] = []

    async def read_once():
        await net.wait_read(ours)
        got.append(ours.recv(4096))

    net.call_soon(read_once)
    theirs.send(b"x")
    run_until(net, lambda: got)
    assert net._selector.get_key(ours).events == selectors.EVENT_READ
    wrote: list[bool] = []

    async def write_twice():
        await net.wait_write(ours)  # answered at once, without registering (the first wait)
        await net.wait_write(ours)  # registered for real: the events grow to read and write
        wrote.append(True)

    net.call_soon(write_twice)
    run_until(net, lambda: wrote)
    assert wrote == [True]
