"""Every error is an RFC 9457 problem document (app/server/problems.py): a request the stop cuts
off included, and a long list of errors bounded."""

from __future__ import annotations

import asyncio
import json
import logging

from app.clock import ManualClock
from app.server.app import create_app
from app.settings import load_settings


def app_for(tmp_path, **overrides: str):
    settings = load_settings(
        environ={}, kafka_admin_bootstrap_servers="127.0.0.1:1", storage_per_volume_limit_min_available_bytes="100", data_dir=str(tmp_path), **overrides
    )
    return create_app(settings, clock=ManualClock(), observe=False)


def test_a_request_the_stop_cuts_off_is_answered_503_problem_json_with_retry_after_and_no_traceback(tmp_path, caplog):
    """A stop cancels the requests still in progress after its grace second (uvicorn cancels
    their tasks): here a held long-poll's task, cancelled as uvicorn does."""
    app = app_for(tmp_path)
    sent: list[dict] = []

    async def main() -> None:
        async with app.router.lifespan_context(app):
            first: list[dict] = []

            async def collect(into: list[dict]):
                async def send(message: dict) -> None:
                    into.append(message)

                return send

            async def receive() -> dict:
                await asyncio.sleep(3600)  # no disconnect
                return {"type": "http.disconnect"}

            def scope(query: bytes, headers: list[tuple[bytes, bytes]]) -> dict:
                return {
                    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
                    "path": "/throttle-factor", "raw_path": b"/throttle-factor", "query_string": query, "root_path": "",
                    "headers": [(b"host", b"service"), *headers], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8080),
                }  # fmt: skip

            await app(scope(b"", []), receive, await collect(first))
            etag = dict(first[0]["headers"])[b"etag"]
            held = asyncio.create_task(app(scope(b"wait=30s", [(b"if-none-match", etag)]), receive, await collect(sent)))
            await asyncio.sleep(0.2)
            assert not held.done() and sent == []  # held: nothing changed
            held.cancel("Task cancelled, timeout graceful shutdown exceeded")
            await asyncio.wait_for(held, 5)
            assert not held.cancelled()

    caplog.set_level(logging.WARNING)
    asyncio.run(main())
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    assert start["status"] == 503
    assert headers["content-type"] == "application/problem+json"
    assert headers["retry-after"] == "1" and headers["connection"] == "close"
    problem = json.loads(body)
    assert (problem["status"], problem["title"], problem["instance"]) == (503, "Service stopping", "/throttle-factor")
    assert "send it again" in problem["detail"]
    assert "GET /throttle-factor cut off by the stop: answered 503" in caplog.text and "Traceback" not in caplog.text
