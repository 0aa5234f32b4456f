"""What the shim's volume reports (PUT /nodes/{id}/volumes) cost a Kafka node: the reporter
thread's CPU time and allocation per report, and the bytes each report takes on the wire, per
report and per hour; measured in the same run against what the shim already costs an idle node,
its quota long-poll (the poller thread, GET /quotas?wait=30 answered 304), as the baseline.

A KRaft cluster of one controller-only node and one broker (devtools.devcluster, metadata logs
on their own tmpfs when run as root), the shim on both, polling a loopback stand-in of the
service (devtools/stand_in_service.py) that takes every report (204) and counts the bytes each
kind of request takes, both ways. The shim reports once per poll interval (``--interval-ms``,
the shim's default 5000); after ``--warm-up`` seconds the bench measures over ``--seconds``.
bench/ShimThreadProbe.java reads each shim thread's CPU time and allocated bytes from the
node's JVM.

    .venv/bin/python bench/bench_node_reports.py --seconds 300
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from devtools.commands import run_command
from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.shim import build_shim, shim_broker_config
from devtools.stand_in_service import QUOTAS, REPORTS, StandInService

ROOT = Path(__file__).resolve().parents[1]

REPORTER = "throttle-service-shim-reporter-"
POLLER = "throttle-service-shim-poller"


def shim_threads(pid: int) -> dict[str, dict[str, int]]:
    """Thread name -> {cpu_ns, allocated_bytes} of the shim's threads in the JVM ``pid``."""
    java = shutil.which("java") or "java"
    result = run_command([java, str(ROOT / "bench" / "ShimThreadProbe.java"), str(pid)], 120)
    if result.returncode != 0:
        raise RuntimeError(f"ShimThreadProbe failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def thread_of(threads: dict[str, dict[str, int]], prefix: str) -> dict[str, int]:
    found = [usage for name, usage in threads.items() if name.startswith(prefix)]
    if len(found) != 1:
        raise RuntimeError(f"expected one thread {prefix}*, found {sorted(threads)}")
    return found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="measured time (default 300)")
    parser.add_argument("--warm-up", type=float, default=30.0, help="seconds before measuring (default 30)")
    parser.add_argument("--interval-ms", type=int, default=5000, help="the shim's poll interval (default 5000, its default)")
    args = parser.parse_args()

    stand_in = StandInService()
    shim = shim_broker_config(
        stand_in.url,
        **{
            "client.quota.callback.service.token": "bench-node-token-0123",
            "client.quota.callback.service.poll.interval.ms": str(args.interval_ms),
            "client.quota.callback.service.long.poll.wait.ms": "30000",  # the shim's default
        },
    )
    root = os.geteuid() == 0
    cluster = LocalKafkaCluster(
        brokers=1,
        controllers=1,
        tmpfs=root,
        metadata_tmpfs_mib=16 if root else None,
        broker_config=shim,
        controller_config=shim,
        extra_classpath=[build_shim()],
    )
    try:
        cluster.start()
        nodes = sorted(cluster.pids())
        time.sleep(args.warm_up)
        start_threads = {node: shim_threads(pid) for node, pid in cluster.pids().items()}
        start_traffic = stand_in.traffic_snapshot()
        started = time.monotonic()
        time.sleep(args.seconds)
        end_threads = {node: shim_threads(pid) for node, pid in cluster.pids().items()}
        end_traffic = stand_in.traffic_snapshot()
        elapsed = time.monotonic() - started
        counts = stand_in.report_counts(started)
    finally:
        cluster.stop()
        stand_in.close()

    def delta(kind: str, field: str) -> int:
        return getattr(end_traffic[kind], field) - getattr(start_traffic[kind], field)

    reports = delta(REPORTS, "requests")
    report_bytes = (delta(REPORTS, "bytes_in") + delta(REPORTS, "bytes_out")) / reports
    quota_bytes_per_hour = (delta(QUOTAS, "bytes_in") + delta(QUOTAS, "bytes_out")) / len(nodes) / elapsed * 3600
    reports_per_hour = 3600 * 1000 / args.interval_ms
    print(f"{len(nodes)} nodes {nodes}, poll interval {args.interval_ms} ms, measured {elapsed:.0f} s")
    print(f"reports: {reports} ({counts}), {delta(REPORTS, 'bytes_in') / reports:.0f} B sent and "
          f"{delta(REPORTS, 'bytes_out') / reports:.0f} B received per report")
    print(f"bytes per node per hour: reports {report_bytes * reports_per_hour / 1024:.0f} KiB, "
          f"quota long-poll {quota_bytes_per_hour / 1024:.1f} KiB "
          f"({delta(QUOTAS, 'requests')} polls): ratio {report_bytes * reports_per_hour / quota_bytes_per_hour:.1f}x")
    for node in nodes:
        reporter = {k: thread_of(end_threads[node], REPORTER)[k] - thread_of(start_threads[node], REPORTER)[k] for k in ("cpu_ns", "allocated_bytes")}
        poller = {k: thread_of(end_threads[node], POLLER)[k] - thread_of(start_threads[node], POLLER)[k] for k in ("cpu_ns", "allocated_bytes")}
        n = counts.get(node, 0)
        print(
            f"node {node}: {n} reports; reporter {reporter['cpu_ns'] / n / 1000:.0f} us CPU and "
            f"{reporter['allocated_bytes'] / n / 1024:.0f} KiB allocated per report, "
            f"{reporter['cpu_ns'] / elapsed * 3600 / 1e9:.2f} CPU s per hour; poller (baseline) "
            f"{poller['cpu_ns'] / elapsed * 3600 / 1e9:.2f} CPU s per hour: ratio {reporter['cpu_ns'] / max(poller['cpu_ns'], 1):.1f}x"
        )


if __name__ == "__main__":
    main()
