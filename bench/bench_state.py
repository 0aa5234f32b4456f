"""What keeping the decider's state outside the process costs per round, at 1,000 brokers x 12
log dirs.

Run: .venv/bin/python bench/bench_state.py [--brokers 1000] [--dirs 12] [--rounds 12] [--service-rounds 3]

The filling cluster of bench/bench_horizon.py (time to full on, PT30M, check interval PT1M:
every volume's trend full after the warm rounds, the costliest snapshot) is applied round after
round to a service in this process. Per round, CPU time (time.process_time), medians:
- the whole round as the service applies it today (cache, policy, horizon rule, factor,
  metrics, re-encoding the decision): the baseline;
- the snapshot of the decider (app/decision/snapshot.py), taken on the event loop, and its size;
- writing it to the state file (written, fsynced, renamed: the state-writer thread's work);
- mirroring it into another decider (what every other replica does per snapshot).
With ``--service-rounds`` the service process's CPU per round against a simulated cluster of
the same size (decoding the DescribeLogDirs answers and the history included, as
bench_horizon.py measures it) is measured too: it saves its state every round, so the round
without it is that less snapshot + file, and the share the target speaks of (at most 10% more
CPU a round) is snapshot + file over that."""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time

from app.server.runtime.saved_state import StateFile
from bench_horizon import HORIZON, FillingCluster, service, service_round_cpu
from cpu_time import cpu_ms


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--service-rounds", type=int, default=3, help="rounds of the service process measured (0: skip)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warm = 8
    cluster = FillingCluster(args.brokers, args.dirs, time.time(), paused=False)
    loop, mirror = service(HORIZON), service(HORIZON)
    state_file = StateFile(tempfile.mkdtemp(prefix="bench-state-"))
    rounds, snapshots, writes, mirrors, sizes = [], [], [], [], []
    for index in range(warm + args.rounds):
        now = cluster.start + cluster.index * 60.0
        round_ = cluster.round(loop.decider.reading(now).factor)
        round_ms = cpu_ms(lambda: loop.apply_round(round_))
        data: list[bytes] = []
        snapshot_ms = cpu_ms(lambda: data.append(loop.decider.snapshot(round_.finished_at)))
        write_ms = cpu_ms(lambda: state_file._write(data[0]))  # noqa: SLF001 - the writer thread's work, timed alone
        mirror_ms = cpu_ms(lambda: mirror.decider.mirror(data[0], round_.finished_at))
        if index >= warm:
            rounds.append(round_ms), snapshots.append(snapshot_ms), writes.append(write_ms), mirrors.append(mirror_ms)
            sizes.append(len(data[0]))
    state_file.close()
    base = statistics.median(rounds)
    volumes = args.brokers * args.dirs
    trend = statistics.median(len(t.times) for t in loop.decider.horizon._trends.values())  # noqa: SLF001
    print(f"{volumes} volumes ({args.brokers} brokers x {args.dirs} log dirs), horizon {HORIZON}, {trend:.0f} observations a trend; "
          f"median of {args.rounds} rounds, CPU time")
    print(f"{'step':<58}{'ms':>9}{'x round':>9}")
    for name, values in (
        ("whole round in process today (the baseline)", rounds),
        ("snapshot of the decider (on the event loop)", snapshots),
        ("state file written, fsynced, renamed (its thread)", writes),
        ("snapshot + file: what a round adds", [s + w for s, w in zip(snapshots, writes, strict=True)]),
        ("mirror of one snapshot (every other replica)", mirrors),
    ):
        value = statistics.median(values)
        print(f"{name:<58}{value:>9.2f}{value / base:>9.3f}")
    print(f"snapshot size: {statistics.median(sizes) / 1024 / 1024:.2f} MiB a round ({statistics.median(sizes) / volumes:.0f} bytes a volume)")
    if args.service_rounds:
        cpu = service_round_cpu(args.brokers, args.dirs, args.service_rounds)
        today = cpu["horizon"] * 1000
        added = statistics.median([s + w for s, w in zip(snapshots, writes, strict=True)])
        print(f"\nthe service process with the horizon against a simulated cluster of the same size: {today:.1f} ms CPU a round,")
        print(f"its own snapshot and file included; without them {today - added:.1f} ms, and snapshot + file ({added:.1f} ms) "
              f"is {added / (today - added):.3f} of that")


if __name__ == "__main__":
    main()
