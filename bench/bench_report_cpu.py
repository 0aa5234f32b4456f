"""The service's CPU per node report (PUT /nodes/{node_id}/volumes), against a baseline revision and
a bare FastAPI PUT in the same run, and where a report's CPU goes.

Over HTTP/1.1 keep-alive, as a shim sends: ``--nodes`` nodes, each a metadata volume and
``--dirs`` data dirs (the body of bench_node_reports_service.py), each reporting once per pass,
``--passes`` passes per turn, the servers taking turns ``--turns`` times (ABC...) so a change of
load falls on all. Servers (each a process of its own, measured from /proc/PID/task/*/schedstat,
in nanoseconds):

- the service of this checkout and of ``--compare REV`` (``python -m app``, observation off, the
  node token set, metadata limits set);
- a bare FastAPI app on uvicorn's httptools protocol: ``PUT /nodes/{node_id}/volumes`` with a
  pydantic body model of the same shape, answered 204 (the floor of a FastAPI PUT);
- a bare ASGI app on the same protocol that reads the body and answers 204 (the server's floor:
  uvicorn, the event loop and the sockets, below which no PUT here goes).

Then, in this process, the split of one report of this checkout: the report lane's work (the
body's parse and the service taking it: a plain report's cost above the server's floor), the
route's own work (the node intake and the decider: ``offer_node_report``), the body's parse
alone, and a report off the lane (the whole app over ASGI, no HTTP server).

    .venv/bin/python bench/bench_report_cpu.py --compare fb3ba0d
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

from bench_node_reports_service import TOKEN, cluster_round, make_app, report_body
from service_process import ServiceProcess, free_port, source_tree
from service_process import revisions as code_revisions

GiB = 1024**3
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

BARE = """
import sys
from typing import Literal
import uvicorn
from fastapi import FastAPI, Response
from pydantic import BaseModel, ConfigDict

class Volume(BaseModel):
    model_config = ConfigDict(extra="forbid")
    log_dir: str
    total_bytes: int
    usable_bytes: int
    holds: list[Literal["data", "metadata"]]

class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roles: list[Literal["broker", "controller"]]
    volumes: list[Volume]

app = FastAPI()

@app.put("/nodes/{node_id}/volumes", status_code=204)
async def put_volumes(node_id: int, body: Body) -> Response:
    return Response(status_code=204)

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False, http="httptools")
"""


# The floor of any PUT on this server: an ASGI app on uvicorn's httptools protocol that reads
# the body and answers 204, nothing else.
BARE_ASGI = """
import sys
import uvicorn

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                await send({"type": "lifespan.shutdown.complete"})
                return
    status = 204 if scope["method"] == "PUT" else 200
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": b""})

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False, http="httptools")
"""


def cpu_seconds(pid: int) -> float:
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


class Bare:
    def __init__(self, script: str = BARE) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-c", script, str(self.port)])
        self.pid = self.process.pid
        self.base_url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(self.base_url + "/", timeout=1)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError("the bare FastAPI app did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def ms_per_report(pid: int, base_url: str, bodies: list[bytes], passes: int) -> float:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for node, body in enumerate(bodies, start=1):  # warm: every node known once
            answer = client.put(f"/nodes/{node}/volumes", content=body, headers=HEADERS)
            assert answer.status_code == 204, answer.text
        time.sleep(1.05)
        before = cpu_seconds(pid)
        for _ in range(passes):
            for node, body in enumerate(bodies, start=1):
                answer = client.put(f"/nodes/{node}/volumes", content=body, headers=HEADERS)
                assert answer.status_code == 204, answer.text
        return (cpu_seconds(pid) - before) * 1000 / (passes * len(bodies))


def split(nodes: int, dirs: int, repeat: int) -> dict[str, float]:
    """Per report, in this process (CPU ms, medians): the whole app over ASGI (what a report off
    the lane costs), the lane's work (the body's parse and the service taking it: what a report
    costs beyond the server's floor), the route's own work (offer_node_report), the body's read
    (the lane's: straight into the report's volumes). The collector tuned as the service tunes it."""
    from app.clock import ManualClock
    from app.observation.node_reports import node_report
    from app.server.api.schemas.nodes import plain_report
    from app.server.runtime.garbage_collector import tune_garbage_collector

    clock = ManualClock(1_800_000_000.0)
    app = make_app(clock, metadata=True)
    bodies = [json.dumps(report_body(n, dirs)).encode() for n in range(1, nodes + 1)]
    base = [(b"host", b"service"), (b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]

    async def one(node: int, body: bytes) -> int:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "PUT", "scheme": "http",
            "path": f"/nodes/{node}/volumes", "raw_path": f"/nodes/{node}/volumes".encode(), "query_string": b"",
            "root_path": "", "headers": [*base, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8080), "state": {},
        }
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        await app(scope, receive, send)
        return sent[0]["status"]

    async def main() -> dict[str, float]:
        async with app.router.lifespan_context(app):
            service = app.state.service
            service.loop.apply_round(cluster_round(nodes, dirs, clock()))
            tune_garbage_collector()
            whole, lane_work, route, parse = [], [], [], []
            lane = app.state.report_lane
            for _ in range(repeat):
                clock.advance(1.0)
                start = time.process_time()
                for node, body in enumerate(bodies, start=1):
                    assert await one(node, body) == 204
                whole.append((time.process_time() - start) * 1000 / nodes)
                clock.advance(1.0)
                start = time.process_time()
                for node, body in enumerate(bodies, start=1):
                    assert lane.take(node, body)
                lane_work.append((time.process_time() - start) * 1000 / nodes)
                start = time.process_time()
                read = [plain_report(body) for body in bodies]
                parse.append((time.process_time() - start) * 1000 / nodes)
                clock.advance(1.0)
                start = time.process_time()
                for node, plain in enumerate(read, start=1):
                    assert plain is not None
                    roles, volumes = plain
                    service.offer_node_report(node, lambda now, n=node, r=roles, v=volumes: node_report(n, r, v, now))
                route.append((time.process_time() - start) * 1000 / nodes)
            return {
                "whole": statistics.median(whole), "lane": statistics.median(lane_work),
                "route": statistics.median(route), "parse": statistics.median(parse),
            }

    return asyncio.run(main())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--passes", type=int, default=3, help="passes over every node per turn")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    args = parser.parse_args()
    bodies = [json.dumps(report_body(n, args.dirs)).encode() for n in range(1, args.nodes + 1)]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start; {args.nodes} nodes, body "
          f"{len(bodies[0])} bytes, {args.turns} turns of {args.passes} passes", flush=True)
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-cpu-") as scratch_name, ExitStack() as stack:
        scratch = Path(scratch_name)
        revisions = code_revisions(args.compare)
        trees = {name: stack.enter_context(source_tree(revision, scratch)) for name, revision in revisions}
        servers: dict[str, tuple[int, str]] = {}
        for name, _ in revisions:
            service = ServiceProcess(
                name, trees[name], scratch, storage_check_interval="PT0S", history_enabled="false", node_token=TOKEN,
                storage_per_volume_limit_min_available_bytes=str(2 * GiB),
                metadata_limit_min_available_bytes=str(4 * GiB), metadata_soft_limit_min_available_bytes=str(16 * GiB),
            )
            stack.callback(service.stop)
            servers[name] = (service.pid, service.base_url)
        bare = Bare()
        stack.callback(bare.stop)
        servers["bare FastAPI PUT"] = (bare.pid, bare.base_url)
        floor = Bare(BARE_ASGI)
        stack.callback(floor.stop)
        servers["bare ASGI PUT (the server's floor)"] = (floor.pid, floor.base_url)
        for turn in range(args.turns):
            for name, (pid, url) in servers.items():
                figures.setdefault(name, []).append(ms_per_report(pid, url, bodies, args.passes))
            print(f"  turn {turn + 1}: " + ", ".join(f"{n} {v[-1]:.3f} ms" for n, v in figures.items())
                  + f" (load average {os.getloadavg()[0]:.1f})", flush=True)
    bare_ms = statistics.median(figures["bare FastAPI PUT"])
    baseline_ms = statistics.median(figures[revisions[-1][0]]) if args.compare else None
    print()
    print("| server | CPU ms per report (median of turns) | x bare FastAPI PUT | x baseline |")
    print("|---|---:|---:|---:|")
    for name, values in figures.items():
        ms = statistics.median(values)
        against = f"{ms / baseline_ms:.2f}x" if baseline_ms and name in dict(revisions) else "-"
        print(f"| {name} | {ms:.3f} | {ms / bare_ms:.2f}x | {against} |")
    parts = split(args.nodes, args.dirs, repeat=5)
    print()
    print(f"in-process, this checkout, per report (CPU ms, medians of 5): the report lane's work (parse and take) "
          f"{parts['lane']:.3f}, of it the route's own work (node intake and decider) {parts['route']:.3f} and the "
          f"body's read alone {parts['parse']:.3f}; a report off the lane, the whole app over ASGI {parts['whole']:.3f}")
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
