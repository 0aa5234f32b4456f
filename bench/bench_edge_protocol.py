"""What the edge's protocol costs per request, in-process, without the network or other
processes' noise: the same keep-alive request (a conditional GET answered 304 by a minimal ASGI
app) fed to uvicorn's own httptools protocol and to the edge's, alternately, on one uvloop
event loop.

Run: .venv/bin/python bench/bench_edge_protocol.py [--requests 20000] [--rounds 7]
Reports µs per request for each and the ratio edge / uvicorn's, min / median / max over rounds."""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
from typing import Any

import uvloop
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.server.edge.http_protocol import ConnectionGuard, EdgeHttpToolsProtocol

REQUEST = b"GET /throttle-factor HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nIf-None-Match: \"d41d8cd98f00\"\r\nAccept: */*\r\n\r\n"


async def not_modified(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 304, "headers": [(b"etag", b'"d41d8cd98f00"')]})
    await send({"type": "http.response.body", "body": b""})


class Transport(asyncio.Transport):
    """Takes what the protocol writes; counts the answers."""

    def __init__(self) -> None:
        super().__init__()
        self.answers = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.answers += bytes(data).count(b"HTTP/1.1 304")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8080)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def per_request(make_protocol: Any, requests: int) -> float:
    transport = Transport()
    protocol = make_protocol()
    protocol.connection_made(transport)
    started = time.perf_counter()
    for _ in range(requests):
        answered = transport.answers
        protocol.data_received(REQUEST)
        while transport.answers == answered:
            await asyncio.sleep(0)
    elapsed = time.perf_counter() - started
    protocol.connection_lost(None)
    return elapsed / requests * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    config = Config(not_modified, http="httptools", ws="none", lifespan="off", access_log=False)
    config.load()
    state = ServerState()
    plain = functools.partial(HttpToolsProtocol, config=config, server_state=state, app_state={})
    edge = functools.partial(EdgeHttpToolsProtocol, config=config, server_state=state, app_state={}, guard=ConnectionGuard(4096, 5.0))
    loop = uvloop.new_event_loop()
    figures: dict[str, list[float]] = {"uvicorn": [], "edge": []}
    loop.run_until_complete(per_request(edge, 2000))  # warm-up
    for round_ in range(args.rounds):
        order = [("uvicorn", plain), ("edge", edge)]
        for name, make in order if round_ % 2 == 0 else reversed(order):
            figures[name].append(loop.run_until_complete(per_request(make, args.requests)))
    ratios = sorted(e / u for e, u in zip(figures["edge"], figures["uvicorn"]))
    print(f"{args.requests} requests x {args.rounds} rounds, one keep-alive connection, 304 from a minimal ASGI app")
    for name, runs in figures.items():
        print(f"{name:<8} {statistics.median(runs):7.2f} µs/request (min {min(runs):.2f}, max {max(runs):.2f})")
    print(f"edge / uvicorn: {ratios[0]:.3f} / {statistics.median(ratios):.3f} / {ratios[-1]:.3f} (min / median / max)")


if __name__ == "__main__":
    main()
