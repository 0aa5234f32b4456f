"""What the nodes' volume reports (PUT /nodes/{node_id}/volumes) cost the service (what they cost
a node: bench/bench_node_reports.py).

Run: .venv/bin/python bench/bench_node_reports_service.py [--nodes 1000] [--brokers 1000] [--dirs 12] [--repeat 20]

The service, in one process, CPU time (time.process_time), medians:
- one report through the whole app (ASGI: the token, the body limit, the strict body, the rate
  limit, the decider) for each of ``--nodes`` nodes, per report; the decider's part alone;
- a decision round over ``--brokers`` x ``--dirs`` data volumes as today (no node reports, no
  metadata limits: the baseline), and the same round with metadata limits and every node's
  report in the view; their ratio.
And the body's bytes of such a node's report, and what they come to in an hour at the shim's
default poll interval (5 s) with the HTTP exchange."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from app.clock import ManualClock
from app.observation.model import ObservationRound, VolumeObservation
from app.server.app import create_app
from app.settings import load_settings
from cpu_time import median_cpu_ms

GiB = 1024**3
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "bench-node-token-0123456"
POLL_SECONDS = 5.0  # client.quota.callback.service.poll.interval.ms default


def report_body(node: int, dirs: int) -> dict:
    """What a broker of ``dirs`` data dirs and its own metadata volume reports."""
    volumes = [{"log_dir": "/var/lib/kafka/metadata", "total_bytes": 64 * GiB, "usable_bytes": (40 + node % 20) * GiB, "holds": ["metadata"]}]
    volumes += [
        {"log_dir": f"/var/lib/kafka/data-{d}", "total_bytes": 1024 * GiB, "usable_bytes": (100 + (node * 7 + d * 13) % 900) * GiB // 10, "holds": ["data"]}
        for d in range(dirs)
    ]
    return {"roles": ["broker"], "volumes": volumes}


def cluster_round(brokers: int, dirs: int, at: float) -> ObservationRound:
    volumes = tuple(
        VolumeObservation(b, f"/var/lib/kafka/data-{d}", 1024 * GiB, (100 + (b * 7 + d * 13) % 900) * GiB // 10, at)
        for b in range(1, brokers + 1)
        for d in range(dirs)
    )
    return ObservationRound(at, at, tuple(range(1, brokers + 1)), volumes)


def make_app(clock: ManualClock, metadata: bool):
    limits = {"metadata_limit_min_available_bytes": str(4 * GiB), "metadata_soft_limit_min_available_bytes": str(16 * GiB)} if metadata else {}
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:9092",
        data_dir=tempfile.mkdtemp(prefix="throttle-bench-"),
        storage_per_volume_limit_min_available_bytes=str(2 * GiB),
        storage_per_volume_soft_limit_min_available_bytes=str(8 * GiB),
        history_enabled="false",
        node_token=TOKEN,
        **limits,
    )
    return create_app(settings, clock=clock, observe=False)


def reports_over_http(nodes: int, dirs: int, rounds: int) -> tuple[float, float, int]:
    """A real service process (``python -m app``, observation off so only reports cost it):
    ``nodes`` nodes each report ``rounds`` times over HTTP/1.1 keep-alive. Returns the service's
    CPU ms per report (from /proc: HTTP, token, body, schema, rate limit, decider), the same for
    a GET /healthz as the HTTP floor, and the body bytes."""
    from service_process import ROOT as TREE
    from service_process import ServiceProcess

    bodies = [json.dumps(report_body(n, dirs)).encode() for n in range(1, nodes + 1)]
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with tempfile.TemporaryDirectory(prefix="node-reports-") as scratch:
        service = ServiceProcess(
            "reports", TREE, Path(scratch), storage_check_interval="PT0S", history_enabled="false", node_token=TOKEN,
            storage_per_volume_limit_min_available_bytes=str(2 * GiB),
            metadata_limit_min_available_bytes=str(4 * GiB), metadata_soft_limit_min_available_bytes=str(16 * GiB),
        )
        try:
            with httpx.Client(base_url=service.base_url, timeout=30) as client:
                for node, body in enumerate(bodies, start=1):  # warm: every node known once
                    assert client.put(f"/nodes/{node}/volumes", content=body, headers=headers).status_code == 204
                per_report = []
                for _ in range(rounds):
                    time.sleep(1.05)  # one report per node per second is taken
                    before = service.resources().cpu_seconds
                    for node, body in enumerate(bodies, start=1):
                        answer = client.put(f"/nodes/{node}/volumes", content=body, headers=headers)
                        assert answer.status_code == 204, answer.text
                    per_report.append((service.resources().cpu_seconds - before) * 1000 / nodes)
                before = service.resources().cpu_seconds
                for _ in range(nodes * rounds):
                    client.get("/healthz")
                floor = (service.resources().cpu_seconds - before) * 1000 / (nodes * rounds)
        finally:
            service.stop()
    return statistics.median(per_report), floor, len(bodies[0])


def decider_ms_per_report(nodes: int, dirs: int, repeat: int) -> float:
    """The decider's part of a report alone (judge and keep it), parsed beforehand, in-process."""
    from app.server.api.schemas.nodes import NodeVolumesBody

    clock = ManualClock()
    decider = make_app(clock, metadata=True).state.service.decider
    parsed = [NodeVolumesBody.model_validate(report_body(node, dirs)) for node in range(1, nodes + 1)]

    def record_all() -> None:
        clock.advance(POLL_SECONDS)
        for node, body in enumerate(parsed, start=1):
            decider.record_node_report(body.report(node, clock()))

    return median_cpu_ms(record_all, repeat) / nodes


def round_cost(brokers: int, dirs: int, nodes: int, repeat: int, metadata: bool) -> float:
    """CPU ms of one decision round as the service applies it, with ``nodes`` reports in the view
    (and metadata limits) or without either (today)."""
    clock = ManualClock()
    app = make_app(clock, metadata=metadata)
    loop = app.state.service.loop
    if metadata:
        from app.server.api.schemas.nodes import NodeVolumesBody

        for node in range(1, nodes + 1):
            loop.decider.record_node_report(NodeVolumesBody.model_validate(report_body(node, dirs)).report(node, clock()))
    observations = cluster_round(brokers, dirs, clock())
    loop.apply_round(observations)  # warm

    def one_round() -> None:
        clock.advance(0.01)
        now = clock()
        loop.apply_round(ObservationRound(now, now, observations.active_brokers, observations.observations))

    return median_cpu_ms(one_round, repeat)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    per_report_ms, http_floor_ms, body_bytes = reports_over_http(args.nodes, args.dirs, max(3, args.repeat // 4))
    decider_ms = decider_ms_per_report(args.nodes, args.dirs, args.repeat)
    today = round_cost(args.brokers, args.dirs, 0, args.repeat, metadata=False)
    with_reports = round_cost(args.brokers, args.dirs, args.nodes, args.repeat, metadata=True)
    head_bytes = len(
        f"PUT /nodes/1000/volumes HTTP/1.1\r\nHost: throttle-service:8080\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {body_bytes}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        "Upgrade: h2c\r\nUser-Agent: Java-http-client/17\r\n\r\n"
    ) + len("HTTP/1.1 204 No Content\r\ndate: Thu, 26 Nov 2026 07:00:00 GMT\r\nserver: uvicorn\r\n\r\n")
    reports_per_hour = 3600 / POLL_SECONDS

    print(f"service: {args.nodes} nodes, each a metadata volume and {args.dirs} data dirs; rounds over {args.brokers} brokers x {args.dirs} log dirs")
    print(f"{'what':<66}{'CPU ms':>10}{'x':>8}")
    print(f"{'one report, service process over HTTP (all of it)':<66}{per_report_ms:>10.3f}")
    print(f"{'  a GET /healthz over HTTP, for the floor':<66}{http_floor_ms:>10.3f}")
    print(f"{'  the decider alone (judge and keep the report), in-process':<66}{decider_ms:>10.3f}")
    print(f"{'all nodes reporting once (one poll interval), over HTTP':<66}{per_report_ms * args.nodes:>10.1f}{per_report_ms * args.nodes / today:>8.2f}")
    print(f"{'decision round today (no reports, no metadata limits): baseline':<66}{today:>10.2f}{1.0:>8.2f}")
    print(f"{'decision round with metadata limits and every report in view':<66}{with_reports:>10.2f}{with_reports / today:>8.2f}")
    print(f"node: body {body_bytes} bytes, {body_bytes + head_bytes} with the HTTP exchange; "
          f"{(body_bytes + head_bytes) * reports_per_hour / 1e6:.2f} MB per hour at one report per {POLL_SECONDS:g} s")


if __name__ == "__main__":
    sys.exit(main())
