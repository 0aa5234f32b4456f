"""PUT /nodes/{node_id}/volumes served straight from its endpoint (app/server/edge/direct_route.py):
every request, plain or not, is answered as the app without the direct route answers it (status,
headers that matter, body), the plain reports are the ones served directly, and the HTTP metrics
count them under the route as before."""

from __future__ import annotations

import json

import pytest

from app.clock import ManualClock
from app.server.edge.direct_route import DirectRoute

from .asgi import run_scenario
from .test_node_reports import NODE, NODE_AUTH, make_app, report

GiB = 1024**3
PLAIN = json.dumps(report(GiB)).encode()
DATA = json.dumps(report(GiB, holds=("data",), roles=("broker",), log_dir="/var/lib/kafka/data-0")).encode()

# (path, body, headers): what a shim sends, and every way a request can leave the plain path.
REQUESTS = [
    ("/nodes/1/volumes", PLAIN, NODE_AUTH),
    ("/nodes/2/volumes", DATA, NODE_AUTH),
    ("/nodes/0/volumes", PLAIN, NODE_AUTH),
    ("/nodes/3/volumes", PLAIN, {**NODE_AUTH, "Content-Type": "application/json; charset=utf-8"}),
    ("/nodes/3/volumes", PLAIN, {**NODE_AUTH, "Content-Type": "text/plain"}),
    ("/nodes/4/volumes", PLAIN, {"Authorization": f"Bearer {NODE}"}),
    ("/nodes/4/volumes", b'{"roles": ["broker"], "roles": ["controller"], "volumes": []}', NODE_AUTH),
    ("/nodes/4/volumes", b'{"roles": ["controller"], "volumes": [', NODE_AUTH),
    ("/nodes/4/volumes", b"", NODE_AUTH),
    ("/nodes/4/volumes", json.dumps(report(20 * GiB, total=GiB)).encode(), NODE_AUTH),
    ("/nodes/4/volumes", json.dumps({**report(GiB), "extra": 1}).encode(), NODE_AUTH),
    ("/nodes/4/volumes", json.dumps(report(GiB, holds=("data",))).encode(), NODE_AUTH),
    ("/nodes/4/volumes", json.dumps(report(1.5)).encode(), NODE_AUTH),
    ("/nodes/5/volumes?x=1", PLAIN, NODE_AUTH),
    ("/nodes/05/volumes", PLAIN, NODE_AUTH),
    ("/nodes/2147483647/volumes", PLAIN, NODE_AUTH),
    ("/nodes/2147483648/volumes", PLAIN, NODE_AUTH),
    ("/nodes/-1/volumes", PLAIN, NODE_AUTH),
    ("/nodes/x/volumes", PLAIN, NODE_AUTH),
    ("/nodes/6/volumes", PLAIN, {"Authorization": "Bearer wrong-token-0123456789", "Content-Type": "application/json"}),
    ("/nodes/7/volumes", b" " * (17 * 1024), NODE_AUTH),
] + [("/nodes/1/volumes", PLAIN, NODE_AUTH)] * 5  # past the burst: 429 with Retry-After

SERVED_DIRECTLY = 9  # nodes 1, 2, 0 and 2147483647, and node 1's five more (three taken, two 429: answered from the endpoint)


def _answers(tmp_path, direct: bool):
    clock = ManualClock()
    app = make_app(tmp_path, clock)
    if not direct:
        app.user_middleware = [m for m in app.user_middleware if m.cls is not DirectRoute]

    async def scenario(client, loop, clock):
        answers = []
        for path, body, headers in REQUESTS:
            answer = await client.put(path, content=body, headers=headers)
            kept = {k: answer.headers.get(k) for k in ("content-type", "retry-after", "www-authenticate", "content-length")}
            answers.append((path, answer.status_code, kept, answer.content))
        metrics = (await client.get("/metrics", headers={"Accept-Encoding": "identity"})).text
        counted = sorted(line for line in metrics.splitlines() if line.startswith("http_requests_total{") and "/nodes/" in line)
        direct_route = _direct_route(app.middleware_stack)
        return answers, counted, direct_route.served if direct_route else 0

    return run_scenario(app, clock, scenario)


def _direct_route(layer):
    while layer is not None:
        if isinstance(layer, DirectRoute):
            return layer
        layer = getattr(layer, "app", None)
    return None


def test_every_report_is_answered_as_the_app_answers_it_and_the_plain_ones_are_served_directly(tmp_path):
    direct, counted, served = _answers(tmp_path / "direct", direct=True)
    through_app, counted_before, served_before = _answers(tmp_path / "app", direct=False)
    for got, expected in zip(direct, through_app):
        assert got == expected
    assert served_before == 0 and served == SERVED_DIRECTLY
    statuses = [status for _, status, _, _ in direct]
    assert statuses.count(204) >= SERVED_DIRECTLY and {401, 413, 422, 429} <= set(statuses)
    assert counted == counted_before
    assert any('handler="/nodes/{node_id}/volumes"' in line and 'status="2xx"' in line for line in counted)


def test_a_route_that_needs_more_than_the_direct_route_gives_it_is_refused_at_the_first_request(tmp_path):
    from fastapi import FastAPI, Header
    from pydantic import BaseModel

    class Body(BaseModel):
        a: int

    app = FastAPI()

    @app.put("/things/{thing_id}")
    async def put_thing(thing_id: int, body: Body, x_extra: str = Header()) -> None:
        return None

    app.add_middleware(DirectRoute, method="PUT", path="/things/{thing_id}")

    async def scenario(client, loop, clock):
        await client.put("/things/1", content=b'{"a": 1}', headers={"Content-Type": "application/json"})

    with pytest.raises(RuntimeError, match="cannot be served directly"):
        run_scenario_plain(app, scenario)


def run_scenario_plain(app, scenario):
    import asyncio

    import httpx

    async def main():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            return await scenario(client, None, None)

    return asyncio.run(main())
