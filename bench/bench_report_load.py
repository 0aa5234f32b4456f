"""The service's CPU while ``--nodes`` nodes report at a steady pace, as shims do: every node once
per interval (``--intervals``, seconds; 1 and the shim's default 5), spread evenly over it, each
report a metadata volume and ``--dirs`` data dirs (bench_node_reports_service.py's body), over
HTTP/1.1 keep-alive connections (``--connections``, each carrying its share of the nodes, as a
client that sends a node's report when its time comes and waits for the answer).

For the service of this checkout and of ``--compare REV`` (each a process of its own: observation
off, the node token and metadata limits set), measured from /proc/PID/task/*/schedstat: its CPU
idle, then under each pace for ``--seconds``, the servers all up and taking turns (``--turns``
times); printed as the share of one core and as CPU per report above idle (medians of the
turns). With observation off no state is saved: the snapshot a service that observes writes
within a second of a report is not in these figures. A pace the client could not keep is said
so. The same for a bare FastAPI PUT and a bare ASGI PUT on the same server
(bench_report_cpu.py's): what any PUT costs at that pace, the wake-ups of a server that is idle
between requests included.

    .venv/bin/python bench/bench_report_load.py --compare 5ee0827 --turns 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from bench_node_reports_service import TOKEN, report_body
from bench_report_cpu import BARE, BARE_ASGI, Bare, GiB, cpu_seconds
from service_process import ServiceProcess, source_tree
from service_process import revisions as code_revisions


def requests(nodes: int, dirs: int) -> list[tuple[bytes, bytes]]:
    out = []
    for node in range(1, nodes + 1):
        body = json.dumps(report_body(node, dirs)).encode()
        head = (
            f"PUT /nodes/{node}/volumes HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        out.append((head, body))
    return out


async def _answer(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":", 1)[1]))
    return status


async def paced(
    port: int, wire: list[tuple[bytes, bytes]], connections: int, interval: float, seconds: float, split: bool
) -> tuple[int, int, float]:
    """Send every node's report once per ``interval`` for ``seconds`` (``split``: its head and its
    body in two writes, as HTTP clients that write the head first send them, Java's among them);
    returns (answered 204, other answers, the largest lag behind the schedule in seconds)."""
    nodes = len(wire)
    streams = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    counts = {"ok": 0, "other": 0}
    lag = 0.0
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.2

    async def carry(index: int) -> None:
        nonlocal lag
        reader, writer = streams[index]
        mine = list(range(index, nodes, connections))
        tick = 0
        while True:
            base = start + tick * interval
            if base - start >= seconds:
                return
            for node in mine:
                due = base + node * interval / nodes
                delay = due - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    lag = max(lag, -delay)
                head, body = wire[node]
                if split:
                    writer.write(head)
                    writer.write(body)
                else:
                    writer.write(head + body)
                status = await _answer(reader)
                counts["ok" if status == 204 else "other"] += 1
            tick += 1

    await asyncio.gather(*(carry(i) for i in range(connections)))
    for _, writer in streams:
        writer.close()
    return counts["ok"], counts["other"], lag


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--connections", type=int, default=100)
    parser.add_argument("--intervals", default="1,5", help="seconds between a node's reports, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured per pace")
    parser.add_argument("--compare", metavar="REV", help="also run this git revision, as the baseline")
    parser.add_argument("--split", action="store_true", help="write each request's head and body apart (two segments)")
    parser.add_argument("--turns", type=int, default=1, help="the servers take turns at each pace this many times")
    args = parser.parse_args()
    intervals = [float(i) for i in args.intervals.split(",")]
    wire = requests(args.nodes, args.dirs)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.nodes} nodes over "
          f"{args.connections} connections, {sum(map(len, wire[0]))}-byte requests"
          f"{' (head and body apart)' if args.split else ''}, {args.seconds:g} s per pace", flush=True)
    rows: dict[tuple[str, float], list[tuple[float, float, float, int, int, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-report-load-") as scratch_name, ExitStack() as stack:
        scratch = Path(scratch_name)
        servers: list[tuple[str, int, int]] = []  # (name, pid, port), all up at once
        for name, revision in [(name, revision) for name, revision in code_revisions(args.compare)] + [
            ("bare FastAPI PUT", BARE), ("bare ASGI PUT", BARE_ASGI)
        ]:
            if name.startswith("bare"):
                service = Bare(revision)
            else:
                tree = stack.enter_context(source_tree(revision, scratch))
                service = ServiceProcess(
                    name, tree, scratch, storage_check_interval="PT0S", history_enabled="false", node_token=TOKEN,
                    storage_per_volume_limit_min_available_bytes=str(2 * GiB),
                    metadata_limit_min_available_bytes=str(4 * GiB), metadata_soft_limit_min_available_bytes=str(16 * GiB),
                )
            stack.callback(service.stop)
            asyncio.run(paced(service.port, wire, args.connections, 1.0, 1.0, args.split))  # every node known once
            servers.append((name, service.pid, service.port))
        time.sleep(2.0)
        idle: dict[str, float] = {}
        for name, pid, _ in servers:
            before, at = cpu_seconds(pid), time.monotonic()
            time.sleep(3.0)
            idle[name] = (cpu_seconds(pid) - before) / (time.monotonic() - at)
        # The servers take turns at each pace (all of them up, the others idle), so that a change
        # of the machine's load falls on every one.
        for turn in range(args.turns):
            for interval in intervals:
                for name, pid, port in servers:
                    before, at = cpu_seconds(pid), time.monotonic()
                    ok, other, lag = asyncio.run(paced(port, wire, args.connections, interval, args.seconds, args.split))
                    elapsed = time.monotonic() - at
                    used = (cpu_seconds(pid) - before) / elapsed
                    per_report = (used - idle[name]) * elapsed * 1000 / max(ok, 1)
                    rows.setdefault((name, interval), []).append((used, idle[name], per_report, ok, other, lag))
                    print(f"  turn {turn + 1}, {name}: every {interval:g} s: {used:.3f} of a core (idle {idle[name]:.3f}), "
                          f"{per_report:.3f} ms a report above idle, {ok} answered 204, {other} other, "
                          f"lag at most {lag * 1000:.0f} ms (load average {os.getloadavg()[0]:.1f})", flush=True)
    print()
    first = servers[0][0]
    print("| server | a node's report every | share of a core (median of turns) | idle | CPU ms a report above idle | x current | answered 204 / other | lag at most |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for (name, interval), turns in sorted(rows.items(), key=lambda item: (item[0][1], [s[0] for s in servers].index(item[0][0]))):
        used = statistics.median(t[0] for t in turns)
        per_report = statistics.median(t[2] for t in turns)
        mine = statistics.median(t[2] for t in rows[(first, interval)])
        ok, other = sum(t[3] for t in turns), sum(t[4] for t in turns)
        lag = max(t[5] for t in turns)
        print(f"| {name} | {interval:g} s | {used:.3f} | {turns[0][1]:.3f} | {per_report:.3f} | {per_report / mine:.2f}x | {ok} / {other} | {lag * 1000:.0f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
