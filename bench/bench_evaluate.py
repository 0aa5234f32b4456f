"""One evaluation over a simulated 1,000 brokers x 12 log dirs, and the service's memory.

Run: .venv/bin/python bench/bench_evaluate.py [--brokers 1000] [--dirs 12] [--repeat 20]
Reports CPU time (time.process_time) of: a bare pass over the volumes (baseline), the policy
evaluation alone, and a whole round as the service applies it (cache, policy, factor,
per-volume metrics, re-encoding the published decision); then the resident memory of a fresh
service process holding that cluster view."""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

from app.server.app import create_app
from cpu_time import median_cpu_ms
from devtools.commands import run_command
from app.decision.policy import LimitKind, StoragePolicy, evaluate
from app.settings import load_settings
from app.observation.model import ObservationRound, VolumeObservation

GiB = 1024**3
ROOT = Path(__file__).resolve().parent.parent


def cluster_round(brokers: int, dirs: int, at: float) -> ObservationRound:
    volumes = []
    for broker in range(1, brokers + 1):
        for d in range(dirs):
            usable = (100 + (broker * 7 + d * 13) % 900) * GiB // 10  # 10 .. 100 GiB free of 1 TiB
            if broker == 17 and d == 3:
                usable = 5 * GiB  # one volume ramping
            volumes.append(VolumeObservation(broker, f"/var/lib/kafka/data-{d}", 1024 * GiB, usable, at))
    return ObservationRound(at, at, tuple(range(1, brokers + 1)), tuple(volumes))


def service(brokers: int, dirs: int):
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:9092",
        data_dir=tempfile.mkdtemp(prefix="throttle-bench-"),
        storage_per_volume_limit_min_available_bytes=str(2 * GiB),
        storage_per_volume_soft_limit_min_available_bytes=str(8 * GiB),
    )
    return create_app(settings, observe=False)


def rss_child(brokers: int, dirs: int) -> None:
    app = service(brokers, dirs)
    observer = app.state.service.loop
    for i in range(5):
        now = time.time() + i
        observer.apply_round(cluster_round(brokers, dirs, now))
    gc.collect()
    status = Path("/proc/self/status").read_text()
    rss_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))
    print(rss_kb)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        rss_child(args.brokers, args.dirs)
        return

    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 2 * GiB, 8 * GiB)
    round_ = cluster_round(args.brokers, args.dirs, time.time())
    volumes = list(round_.observations)
    observer = service(args.brokers, args.dirs).state.service.loop
    observer.apply_round(round_)  # warm: series and cache exist, as in steady state

    baseline = median_cpu_ms(lambda: min(v.usable_bytes for v in volumes), args.repeat)
    policy_only = median_cpu_ms(lambda: evaluate(policy, volumes), args.repeat)

    def whole_round() -> None:
        now = time.time()
        observer.apply_round(ObservationRound(now, now, round_.active_brokers, round_.observations))

    full = median_cpu_ms(whole_round, args.repeat)
    rss_kb = int(run_command([sys.executable, __file__, "--rss-child", "--brokers", str(args.brokers), "--dirs", str(args.dirs)],
                             600, check=True, cwd=ROOT).stdout.strip())
    idle_kb = int(run_command([sys.executable, __file__, "--rss-child", "--brokers", "0", "--dirs", "0"], 600, check=True, cwd=ROOT).stdout.strip())
    print(f"{len(volumes)} volumes ({args.brokers} brokers x {args.dirs} log dirs), median of {args.repeat}, CPU time")
    print(f"{'step':<44}{'ms':>9}{'x baseline':>12}")
    for name, ms in (("baseline: bare pass (min usable bytes)", baseline), ("policy evaluation", policy_only), ("whole round as the service applies it", full)):
        print(f"{name:<44}{ms:>9.2f}{ms / baseline:>12.1f}")
    print(f"resident memory: {rss_kb / 1024:.0f} MiB with the view, {idle_kb / 1024:.0f} MiB idle service")


if __name__ == "__main__":
    main()
