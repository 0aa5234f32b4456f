"""Fixtures shared by the unit tests of the admin client's IO loop."""

from __future__ import annotations

import socket

import pytest


@pytest.fixture
def pair():
    """A connected pair of non-blocking sockets: (ours, theirs)."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    theirs.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()
