"""kafka-python's network selector without two costs that grow with the number of brokers.

A round sends one request to every broker; kafka-python 3.0 arms a timeout timer per request
and cancels it when the answer comes. Cancelling removes the timer from the middle of the
timer heap and re-heapifies it, O(timers): with a thousand brokers a round spent a fifth of
its CPU there (measured with bench/bench_rounds.py and py-spy). Here a cancelled timer stays
in the heap and is dropped when it comes due, as asyncio does: O(log timers) per timer, and a
cancelled one lingers at most one request timeout (and may wake the loop once, at its
time, to be dropped).

Every wait for a socket to become readable or writable first looks the socket up in the
selector; when it is not registered (the common case: kafka-python unregisters it after each
wait), the standard library raises a KeyError whose message formats the socket twice (its
addresses, family and type: system calls and enum conversions), only for kafka-python to
catch it. ``QuietSelector`` raises the KeyError without formatting anything.

A transport that has bytes to send first waits for its socket to be writable, and only then
sends: two epoll_ctl calls (the write interest added, then removed) and a pass of the IO loop
per request, though a connected socket with room in its buffer (a round's small requests, one
per broker) is writable nearly always. ``ScalingNetworkSelector`` answers the first wait for
writing of each task at once, without registering anything: the task tries its send (or its
connect, or its TLS handshake step) and, when the socket was not ready after all, waits again,
for real this time, as it does after any wait (the socket is registered as before).

A connection's reader waits for its socket to be readable again after every answer, and
kafka-python registers the socket for each wait and unregisters it after: two more
``epoll_ctl`` calls per answer (2,000 a round at 1,000 brokers). ``ScalingNetworkSelector``
leaves a socket's read interest registered, without a reader, when a wait for reading ends (the
reader's next wait takes it up again without a system call), and unregisters it for real only
when the kernel reports it readable with nobody waiting (the reader paused or gone: the data
waits in the socket, as before), or when the socket is closed. A key left behind by a socket
closed while it lingered is dropped when its descriptor's number is registered by another one.

Every request also arms a timeout timer, a task made of a lambda: kafka-python's ``Task``
inspects each callback with five ``inspect`` calls before it wraps a plain function in
``yield_callback``. ``ScalingNetworkSelector``'s ``call_at`` and ``call_soon`` wrap a plain
function or bound method themselves, from its code's flags, and hand anything else on as it is.

Both are handed to kafka-python through its own hooks (the ``selector`` setting, the ``net``
argument of ``KafkaNetClient``); no code of kafka-python is patched, but both subclasses
override private members of the classes they extend, and so depend on their internals:

- ``ScalingNetworkSelector`` overrides ``NetworkSelector._unschedule(task)`` (called by
  ``cancel`` and ``reschedule``), ``NetworkSelector._schedule_tasks()``,
  ``NetworkSelector.register_event(fileobj, event, task)``,
  ``NetworkSelector.unregister_event(fileobj, event)`` (keys' data ``(reader task, writer
  task)``), ``NetworkSelector._process_events(event_list)`` (reads ``_wakeup_r``) and
  ``NetworkSelector._wait_write(fileobj, timeout_at)`` (the handler of ``wait_write``'s kernel
  event, run with the waiting task as ``NetworkSelector._current``), reads the timer heap
  ``NetworkSelector._scheduled`` (entries ``(when, task)``, pushed by ``call_at``) and each
  task's ``scheduled_at`` and ``state`` (``TaskState.UNSCHEDULED``), and calls
  ``NetworkSelector._add_ready_task(task)``; it overrides the public ``call_at(when, task)`` and
  ``call_soon(task)`` and makes tasks as ``Task.__init__`` and ``_initialize_coro`` of
  ``kafka.net.selector`` do (``yield_callback`` for a function that is neither a generator nor
  a coroutine function);
- ``QuietSelector`` overrides ``get_key(fileobj)`` of the standard library's
  ``selectors.DefaultSelector`` with a copy that reads its private ``_map``, ``_fd_to_key`` and
  ``_fileobj_lookup``.

Verified with kafka-python 3.0.12 (pyproject.toml allows 3.0.x only) and CPython 3.11;
tests/unit/test_framework_internals.py fails when one of these members changes its name or
parameters."""

from __future__ import annotations

import heapq
import inspect
import selectors
import time
import weakref
from collections.abc import Callable
from types import FunctionType, MethodType
from typing import Any

from kafka.net.selector import NetworkSelector, Task, TaskState, yield_callback

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE
_new_tuple = tuple.__new__


class QuietSelector(selectors.DefaultSelector):
    # The standard library's private members this copy of get_key reads (typeshed has none).
    _map: Any
    _fd_to_key: dict[int, selectors.SelectorKey]
    _fileobj_lookup: Callable[[Any], int]

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        if self._map is None:
            raise RuntimeError("Selector is closed")
        try:
            return self._fd_to_key[self._fileobj_lookup(fileobj)]
        except KeyError:
            raise KeyError(fileobj) from None  # formatted only if someone prints it

    def replace_data(self, key: selectors.SelectorKey, data: Any) -> None:
        """``modify(key.fileobj, key.events, data)`` for a registered key whose events stay the
        same: the standard library's ``modify`` builds the new key with ``namedtuple._replace``
        (a few Python calls), twice an answer for a socket whose read interest lingers."""
        self._fd_to_key[key.fd] = _new_tuple(
            selectors.SelectorKey, (key.fileobj, key.fd, key.events, data)
        )


class ScalingNetworkSelector(NetworkSelector):
    def __init__(self, **config: Any) -> None:
        super().__init__(**{**config, "selector": QuietSelector})
        # The task whose wait for writing each socket (by descriptor) was last answered at once.
        self._assumed_writable: weakref.WeakValueDictionary[int, Any] = (
            weakref.WeakValueDictionary()
        )

    def _wait_write(self, fileobj: Any, timeout_at: Any = None) -> None:
        task = self._current
        try:
            descriptor = fileobj.fileno()
        except (AttributeError, OSError, ValueError):
            descriptor = -1
        if descriptor >= 0 and self._assumed_writable.get(descriptor) is not task:
            # The first wait of this task on this socket: try the operation at once.
            self._assumed_writable[descriptor] = task
            self._add_ready_task(task)
            return
        super()._wait_write(fileobj, timeout_at)

    def call_at(self, when: float, task: Any) -> Any:
        return super().call_at(when, _as_task(task))

    def call_soon(self, task: Any) -> Any:
        return super().call_soon(_as_task(task))

    def _unschedule(self, task: Any) -> None:
        # The heap entry stays; _schedule_tasks drops it when it comes due.
        task.scheduled_at = None
        task.state = TaskState.UNSCHEDULED

    def _schedule_tasks(self) -> None:
        now = time.monotonic()
        scheduled = self._scheduled
        while scheduled and scheduled[0][0] <= now:
            when, task = heapq.heappop(scheduled)
            if task.scheduled_at != when:
                continue  # cancelled, or rescheduled to another time, since this entry was pushed
            task.scheduled_at = None  # a duplicate entry for the same instant is dropped too
            self._add_ready_task(task)

    def register_event(self, fileobj: Any, event: int, task: Any) -> None:
        # NetworkSelector.register_event, plus the key a closed socket left behind.
        if not isinstance(task, Task):
            task = Task(task)
        selector = self._selector
        try:
            key = selector.get_key(fileobj)
        except KeyError:
            key = None
        if key is not None and key.fileobj is not fileobj:
            # Its descriptor's number is this socket's now: the kernel watches nothing for it.
            selector.unregister(key.fileobj)
            key = None
        if key is None:
            selector.register(fileobj, event, (task, None) if event == _READ else (None, task))
            return
        reader, writer = key.data
        if event == _READ and reader:
            raise RuntimeError(
                f"EVENT_READ already registered for fileobj {fileobj} by {reader} (new: {task})"
            )
        if event == _WRITE and writer:
            raise RuntimeError(
                f"EVENT_WRITE already registered for fileobj {fileobj} by {writer} (new: {task})"
            )
        data = (task, writer) if event == _READ else (reader, task)
        if key.events & event:
            # A lingering read interest taken up again: the events are the same, no system call.
            selector.replace_data(key, data)  # (always a QuietSelector: set in __init__)
            return
        selector.modify(fileobj, key.events | event, data)

    def unregister_event(self, fileobj: Any, event: int) -> None:
        if event == _READ:
            try:
                key = self._selector.get_key(fileobj)
            except (KeyError, ValueError):
                return  # never registered, or closed and gone: as NetworkSelector's
            if key.events == _READ and key.fileobj is fileobj and _open(fileobj):
                self._selector.replace_data(key, (None, None))  # lingers, no system call
                return
        super().unregister_event(fileobj, event)

    def _process_events(self, event_list: list[Any]) -> None:
        ready = []
        for key, reported in event_list:
            events = reported
            if events & _READ and key.data[0] is None and key.fileobj is not self._wakeup_r:
                # Readable with nobody waiting: no longer watched, until someone waits.
                NetworkSelector.unregister_event(self, key.fileobj, _READ)
                events &= ~_READ
                if not events:
                    continue
            ready.append((key, events))
        super()._process_events(ready)


def _open(fileobj: Any) -> bool:
    try:
        return bool(fileobj.fileno() >= 0)
    except (AttributeError, OSError, ValueError):
        return False


# Code flags of the functions kafka-python's Task runs as they are (called when the task first
# runs): generator and coroutine functions. Any other function it wraps in yield_callback.
_RUN_AS_THEY_ARE = inspect.CO_GENERATOR | inspect.CO_COROUTINE


def _as_task(callback: Any) -> Any:
    """``callback`` as kafka-python's ``Task(callback)`` would take it, its inspection done
    here in two attribute reads for a plain function or bound method (a request's timeout timer,
    a lambda, 1,000 a round): ``Task`` tests a callback with five ``inspect`` calls before it
    wraps a plain one in ``yield_callback``. Anything else is handed on as it is."""
    kind = type(callback)
    if kind is FunctionType:
        function = callback
    elif kind is MethodType and type(callback.__func__) is FunctionType:
        function = callback.__func__
    else:
        return callback
    if function.__code__.co_flags & _RUN_AS_THEY_ARE or hasattr(function, "_is_coroutine_marker"):
        return callback  # marked with inspect.markcoroutinefunction (3.12+): Task decides
    return Task(yield_callback(callback))
