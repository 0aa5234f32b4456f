"""The soft-limit ramp on real brokers: does a producer slow down in step with the factor while
a volume fills through the soft band, and does it recover at once when the volume is freed?

Run: .venv/bin/python bench/bench_ramp.py [--check-interval PT2S] [--ramp-seconds 40]
[--quota-mib 4] [--rate-mib 3] [--pause-seconds 6] [--probe] [--shim-jar JAR] (root: the
devcluster mounts tmpfs log dirs).

Three brokers with the shim (the shim harness of the integration tests), the service checking
every --check-interval with a hard limit of 24 MiB and a soft limit of 40 MiB available on
64 MiB volumes and a default produce quota of --quota-mib per broker. One producer (4 KiB
messages, --rate-mib offered) writes to a partition on broker 2. A filler file on broker 1's
tmpfs takes that volume through the soft band in a straight line in --ramp-seconds, holds it
below the hard limit for --pause-seconds of PAUSE, and is deleted. Kafka sees no writes for the
fill, so the producer is measured against a factor that falls at a known pace.

Printed: one row per factor the service published during THROTTLE (the factor, the effective
quota max(quota x factor, floor), the producer's acknowledged bytes per second while it was in
force, and their ratio); the baseline (the same producer's rate in the 10 s before THROTTLE, same
run) and the bytes admitted during THROTTLE against it; the largest throttle time a broker gave;
the recovery (volume freed -> the producer above half its baseline) and how long a throttle
given before the volume was freed outlived it. With --probe, each row also shows Kafka's own
reading of the producer's quota sensor on broker 2 at the end of the interval (its byte-rate,
read over JMX by bench/QuotaSensorProbe.java) and the sensor's throttle-epoch tag."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from devtools.devcluster.shim import build_shim  # noqa: E402
from app.settings.durations import parse_duration  # noqa: E402
from tests.integration.conftest import MiB, free_port, launch_service  # noqa: E402
from tests.integration.shim_harness import (  # noqa: E402
    FLOOR,
    HARD_LIMIT,
    SERVICE_SETTINGS,
    FactorTimeline,
    LoadProducer,
    VolumeRamp,
    running_shim_cluster,
    wait_for_shims,
    broker_log_count,
    SHIM_TABLE_LINE,
    wait_until,
)

SOFT_LIMIT = 40 * MiB
LOAD_BROKER = 2
LOAD_PARTITION = 1  # the harness's load topic has partition p on broker p + 1
FILLED_BROKER = 1
WARM_UP = 15.0  # longer than Kafka's quota window, so the producer's sensor is in its steady state
RECOVERY_WAIT = 120.0


class SensorProbe:
    """bench/QuotaSensorProbe.java attached to one broker; keeps (monotonic time, sensors)."""

    def __init__(self, pid: int) -> None:
        java = shutil.which("java") or "java"
        self.readings: list[tuple[float, list[dict]]] = []
        self.process = subprocess.Popen(
            [java, str(ROOT / "bench" / "QuotaSensorProbe.java"), str(pid), "200"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._offset = time.time() - time.monotonic()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            self.readings.append((data["wall_ms"] / 1000 - self._offset, data["sensors"]))

    def at(self, moment: float) -> tuple[str, float | None]:
        """(epoch tag, byte-rate) of the live sensor (the highest epoch) last read before ``moment``."""
        before = [sensors for at, sensors in list(self.readings) if at <= moment]
        if not before:
            return "?", None
        live = [s for s in before[-1] if s["byte_rate"] is not None]
        if not live:
            return "?", None
        sensor = max(live, key=lambda s: int(s["epoch"]) if s["epoch"] not in (None, "null") else -1)
        return sensor["epoch"], sensor["byte_rate"]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def effective_quota(quota: float, factor: float) -> float:
    return quota if factor >= 1.0 else max(quota * factor, min(FLOOR, quota))


def run(args: argparse.Namespace, work_dir: Path) -> dict:
    check = parse_duration(args.check_interval).total_seconds()
    quota = args.quota_mib * MiB
    rate = args.rate_mib * MiB
    port = free_port()
    with running_shim_cluster(args.shim_jar or build_shim(), port) as cluster:
        before = broker_log_count(cluster, SHIM_TABLE_LINE)
        settings = {
            **SERVICE_SETTINGS,
            "storage_check_interval": args.check_interval,
            "storage_per_volume_soft_limit_min_available_bytes": str(SOFT_LIMIT),
            "produce": str(quota),
        }
        service = launch_service(work_dir, http_port=str(port), kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **settings)
        timeline = load = probe = ramp = None
        try:
            service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 30, "observed OPEN")
            wait_for_shims(cluster, before)
            timeline = FactorTimeline(service.base_url)
            probe = SensorProbe(cluster.pids()[LOAD_BROKER]) if args.probe else None
            load = LoadProducer(
                {"bootstrap.servers": cluster.bootstrap_servers, "client.id": "ramp-load"}, partitions=[LOAD_PARTITION], rate_per_partition=rate
            )
            time.sleep(WARM_UP)
            # Margins of 1 MiB on both sides of the band; the band itself takes --ramp-seconds.
            start, end = SOFT_LIMIT + MiB, HARD_LIMIT - MiB
            ramp = VolumeRamp(cluster.mount_point(FILLED_BROKER), start, end, args.ramp_seconds * (start - end) / (SOFT_LIMIT - HARD_LIMIT))
            load_at_start = os.getloadavg()
            paused_at = wait_until(lambda: timeline.first("PAUSE") is not None, args.ramp_seconds * 2 + 30, "PAUSE")
            throttle_from = timeline.first("THROTTLE")
            pause_from = timeline.first("PAUSE")
            time.sleep(max(0.0, paused_at + args.pause_seconds - time.monotonic()))
            ramp.free()
            freed = ramp.freed_at
            baseline = load.rate(throttle_from - 10, throttle_from)
            recovered_at = None
            while recovered_at is None and time.monotonic() - freed < RECOVERY_WAIT:
                if load.rate(time.monotonic() - 1, time.monotonic()) > 0.5 * baseline:
                    recovered_at = time.monotonic()
                time.sleep(0.05)
            time.sleep(3)
            load_at_end = os.getloadavg()
        finally:
            for part in (ramp, load, probe, timeline):
                if part is not None:
                    if part is ramp:
                        if ramp.freed_at is None:
                            ramp.free()
                    else:
                        part.stop()
            service.stop()

    rows = []
    for lo, hi, factor, state in timeline.intervals(throttle_from, pause_from):
        limit = effective_quota(quota, factor)
        measured = load.rate(lo, hi)
        row = {"from_s": round(lo - throttle_from, 2), "seconds": round(hi - lo, 2), "factor": factor, "quota": limit, "rate": measured}
        if probe is not None:
            row["epoch"], row["kafka_rate"] = probe.at(hi)
        rows.append(row)
    admitted = sum(size for at, size in load.acked if throttle_from <= at < pause_from)
    throttles_before_free = [(at, t) for at, _, t in load.throttles if at < freed]  # throttle_cb gives seconds
    outlived = max([at + t - freed for at, t in throttles_before_free], default=0.0)
    trace = []
    if args.trace:
        at = throttle_from
        while at < pause_from:
            throttled = [round(t, 2) for when, _, t in load.throttles if at <= when < at + 0.25]
            epoch = probe.at(at + 0.25)[0] if probe is not None else ""
            trace.append(f"{at - throttle_from:6.2f} s  {load.rate(at, at + 0.25) / MiB:5.2f} MiB/s  epoch {epoch}  throttles {throttled}")
            at += 0.25
    return {
        "trace": trace,
        "rows": rows,
        "baseline": baseline,
        "throttle_seconds": pause_from - throttle_from,
        "admitted_ratio": admitted / (baseline * (pause_from - throttle_from)),
        "largest_throttle_s": max([t for _, _, t in load.throttles], default=0.0),
        "largest_throttle_in_throttle_s": max([t for at, _, t in load.throttles if throttle_from <= at < pause_from], default=0.0),
        "recovery_s": None if recovered_at is None else recovered_at - freed,
        "outlived_s": max(0.0, outlived),
        "load_average": (load_at_start, load_at_end),
        "check_interval_s": check,
    }


def report(result: dict, args: argparse.Namespace) -> None:
    if result["trace"]:
        print("\n".join(["", "acknowledged per 0.25 s during THROTTLE:", *result["trace"]]))
    probe = args.probe
    extra = " Kafka byte-rate (MiB/s) | epoch |" if probe else ""
    print(f"\n| from THROTTLE (s) | factor | effective quota (MiB/s) | measured (MiB/s) | measured / quota |{extra}")
    print(f"|---:|---:|---:|---:|---:|{'---:|---:|' if probe else ''}")
    for row in result["rows"]:
        line = (
            f"| {row['from_s']:.1f} | {row['factor']:.3f} | {row['quota'] / MiB:.2f} | {row['rate'] / MiB:.2f} | {row['rate'] / row['quota']:.2f} |"
        )
        if probe:
            kafka = row.get("kafka_rate")
            line += f" {'?' if kafka is None else f'{kafka / MiB:.2f}'} | {row.get('epoch')} |"
        print(line)
    la0, la1 = result["load_average"]
    recovery = f"{result['recovery_s']:.2f} s" if result["recovery_s"] is not None else f"not within {RECOVERY_WAIT:.0f} s"
    print(
        f"\nbaseline {result['baseline'] / MiB:.2f} MiB/s; THROTTLE {result['throttle_seconds']:.1f} s, admitted "
        f"{result['admitted_ratio']:.2f} x baseline; largest throttle {result['largest_throttle_in_throttle_s']:.2f} s during THROTTLE, "
        f"{result['largest_throttle_s']:.2f} s in all; recovery "
        f"{recovery} after the volume was freed; a throttle given before it outlived it by {result['outlived_s']:.2f} s; "
        f"load average {la0[0]:.1f} at the ramp, {la1[0]:.1f} at the end"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-interval", default="PT2S")
    parser.add_argument("--ramp-seconds", type=float, default=40.0, help="time the volume takes to cross the soft band")
    parser.add_argument("--quota-mib", type=float, default=4.0, help="default produce quota per broker")
    parser.add_argument("--rate-mib", type=float, default=3.0, help="the producer's offered load")
    parser.add_argument("--pause-seconds", type=float, default=6.0)
    parser.add_argument("--probe", action="store_true", help="read Kafka's own quota sensor on the producer's broker over JMX")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--trace", action="store_true", help="also print the producer's acknowledged bytes and throttles per 0.25 s")
    parser.add_argument("--shim-jar", type=Path, help="a shim jar to measure instead of this checkout's (e.g. another commit's build)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_ramp: run as root (the devcluster mounts tmpfs log dirs)")
    for n in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="bench-ramp-") as work:
            result = run(args, Path(work))
        print(f"\nrun {n + 1}:", end="")
        report(result, args)


if __name__ == "__main__":
    main()
