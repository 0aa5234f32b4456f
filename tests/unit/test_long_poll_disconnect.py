"""A long-poll ends when its client goes, in the request's own task: the client's going is
the answer's end, an outer cancellation (the service stopping) is not swallowed, and nothing is
left behind (no watcher of the connection, no pending cancellation of the request's task)."""

from __future__ import annotations

import asyncio

import pytest
from starlette.requests import Request

from app.server.api.conditional import _until_disconnected

UNCHANGED, CHANGED = object(), object()


def long_poll(receive) -> Request:
    return Request({"type": "http", "method": "GET", "path": "/quotas", "headers": []}, receive)


def request_whose_client_goes_after(seconds: float | None) -> Request:
    async def receive() -> dict:
        if seconds is None:
            await asyncio.Event().wait()  # never goes
        await asyncio.sleep(seconds)
        return {"type": "http.disconnect"}

    return long_poll(receive)


async def answer_after(seconds: float):
    await asyncio.sleep(seconds)
    return CHANGED


def test_a_client_that_goes_ends_the_wait_at_once_with_the_unchanged_answer():
    async def scenario():
        started = asyncio.get_running_loop().time()
        answer = await _until_disconnected(request_whose_client_goes_after(0.05), answer_after(30), UNCHANGED)
        task = asyncio.current_task()
        return answer, asyncio.get_running_loop().time() - started, task.cancelling(), len(asyncio.all_tasks())

    answer, took, cancelling, tasks = asyncio.run(scenario())
    assert answer is UNCHANGED and took < 5
    assert cancelling == 0  # the request's task goes on to send its answer
    assert tasks == 1  # the watcher is gone with it


def test_a_change_before_the_client_goes_is_the_answer_and_the_watcher_is_cancelled():
    async def scenario():
        answer = await _until_disconnected(request_whose_client_goes_after(None), answer_after(0.02), UNCHANGED)
        await asyncio.sleep(0)  # the watcher's cancellation is delivered
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        return answer, asyncio.current_task().cancelling(), others

    answer, cancelling, others = asyncio.run(scenario())
    assert answer is CHANGED and cancelling == 0 and others == []


def test_a_client_going_in_the_pass_that_answers_does_not_cancel_the_answer_being_sent():
    """The client goes in the very loop pass in which the answer came: the watcher ends first,
    its callback runs a pass later, when the request's task is already sending the answer."""

    async def scenario():
        moment = asyncio.Event()

        async def receive() -> dict:
            await moment.wait()
            return {"type": "http.disconnect"}

        async def answer():
            for _ in range(3):
                await asyncio.sleep(0)  # the watcher waits for the moment before the answer does
            await moment.wait()
            return CHANGED

        asyncio.get_running_loop().call_later(0.02, moment.set)
        got = await _until_disconnected(long_poll(receive), answer(), UNCHANGED)
        await asyncio.sleep(0.05)  # sending the answer: not cancelled
        return got, asyncio.current_task().cancelling()

    answer, cancelling = asyncio.run(scenario())
    assert answer is CHANGED and cancelling == 0


def test_the_service_stopping_cancels_the_wait_as_before():
    async def scenario():
        waiting = asyncio.ensure_future(_until_disconnected(request_whose_client_goes_after(None), answer_after(30), UNCHANGED))
        await asyncio.sleep(0.02)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.sleep(0)
        return [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]

    assert asyncio.run(scenario()) == []
