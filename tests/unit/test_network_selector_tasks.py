"""The admin IO loop makes a task of a plain function (a request's timeout timer, a lambda)
without kafka-python's inspection, the same task kafka-python makes: run once, at its time,
not at all when cancelled, its exception kept; generator and coroutine functions, partials,
callables and tasks are handed to kafka-python as they are. The kafka-python code this
mirrors is checked."""

from __future__ import annotations

import functools
import inspect
import time

import pytest
from kafka.net.selector import NetworkSelector, Task, _initialize_coro, yield_callback

from app.kafka.network_selector import ScalingNetworkSelector, _as_task

from .io_loop import run_until


@pytest.fixture(params=[ScalingNetworkSelector, NetworkSelector], ids=["ours", "kafka-python"])
def net(request):
    selector = request.param()
    yield selector
    selector.close()


_run = functools.partial(run_until, poll_ms=10)  # this module polls every 10 ms


class Holder:
    def __init__(self, calls):
        self.calls = calls

    def method(self):
        self.calls.append("method")

    async def coroutine_method(self):
        self.calls.append("coroutine method")


def _callbacks(calls):
    def function():
        calls.append("function")

    def generator_function():
        calls.append("generator")
        yield

    async def coroutine_function():
        calls.append("coroutine")

    class Callable:
        def __call__(self):
            calls.append("callable object")

    holder = Holder(calls)
    return {
        "lambda": lambda: calls.append("lambda"),
        "function": function,
        "method": holder.method,
        "generator function": generator_function,
        "coroutine function": coroutine_function,
        "coroutine method": holder.coroutine_method,
        "partial": functools.partial(calls.append, "partial"),
        "callable object": Callable(),
        "builtin": functools.partial(calls.append, "builtin"),
    }


@pytest.mark.parametrize("name", list(_callbacks([])))
def test_each_kind_of_callback_runs_once_as_kafka_python_runs_it(net, name):
    calls: list[str] = []
    callback = _callbacks(calls)[name]
    try:
        Task(callback)
    except TypeError:
        with pytest.raises(TypeError):  # kafka-python refuses it: so do we
            net.call_soon(callback)
        return
    task = net.call_soon(callback)
    assert isinstance(task, Task)
    _run(net, lambda: task.is_done)
    assert task.is_done and len(calls) == 1


def test_a_plain_function_is_wrapped_here_and_the_rest_handed_on():
    calls: list[str] = []
    callbacks = _callbacks(calls)
    for name in ("lambda", "function", "method"):
        task = _as_task(callbacks[name])
        assert isinstance(task, Task) and inspect.isgenerator(task._stack[0]), name
        assert task._stack[0].gi_code is yield_callback.__code__
    for name in ("generator function", "coroutine function", "coroutine method", "partial", "callable object"):
        assert _as_task(callbacks[name]) is callbacks[name], name
    existing = Task(callbacks["lambda"])
    assert _as_task(existing) is existing
    assert calls == [], "nothing is called until the task runs"


def test_a_timer_runs_at_its_time_and_a_cancelled_one_never(net):
    calls: list[str] = []
    due = net.call_at(time.monotonic() + 0.05, lambda: calls.append("due"))
    cancelled = net.call_at(time.monotonic() + 0.05, lambda: calls.append("cancelled"))
    net.cancel(cancelled)
    net.poll(timeout_ms=0)
    assert calls == []
    _run(net, lambda: due.is_done)
    time.sleep(0.06)
    net.poll(timeout_ms=10)
    assert calls == ["due"] and due.is_done and cancelled.is_done


def test_a_failing_callback_keeps_its_exception_in_its_task(net):
    def failing():
        raise ValueError("timer failed")

    task = net.call_soon(failing)
    _run(net, lambda: task.is_done)
    assert isinstance(task.exception, ValueError) and str(task.exception) == "timer failed"


def test_kafka_python_still_makes_its_tasks_as_the_selector_mirrors():
    """``Task(coro)`` keeps ``_initialize_coro(coro)``, which runs generators and coroutines,
    generator and coroutine functions as they are and wraps any other function or method in
    ``yield_callback`` (a generator function calling it once)."""
    assert "self._stack = (_initialize_coro(coro), None)" in inspect.getsource(Task.__init__)
    source = inspect.getsource(_initialize_coro)
    checks = [
        "inspect.isgenerator(maybe_coro) or inspect.iscoroutine(maybe_coro)",
        "inspect.isgeneratorfunction(maybe_coro) or inspect.iscoroutinefunction(maybe_coro)",
        "inspect.isfunction(maybe_coro) or inspect.ismethod(maybe_coro)",
        "return yield_callback(maybe_coro)",
    ]
    positions = [source.index(check) for check in checks]
    assert positions == sorted(positions)
    assert inspect.isgeneratorfunction(yield_callback)
    assert "yield callback()" in inspect.getsource(yield_callback)
    assert str(inspect.signature(NetworkSelector.call_at)) == "(self, when, task)"
    assert str(inspect.signature(NetworkSelector.call_soon)) == "(self, task)"
