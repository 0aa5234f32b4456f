"""History bytes per day and the history writer's CPU per round: format 1 (a full row per volume
per round, plain files: before) against format 2 (rows in proportion to what happened, closed
hours compressed: after), measured in the same run on the same rounds.

Run: .venv/bin/python bench/bench_history.py [--sizes 100x4,1000x12] [--intervals 60,10] [--hours 1]

A simulated cluster of brokers x log dirs, judged round after round by the service's own
decider (bytes limits: hard 5%, soft 10% of each volume), written by the service's own row
code. The mix: every volume fills at its own rate (0.1-3% of its total an hour) and Kafka's
retention check (every 5 minutes) frees what the oldest segments held, a saw-tooth around a
level that drifts over the day (+-10% of the volume, a day's period); besides, one volume in
a thousand ramps into its soft limit and one breaches its hard limit during the hours measured
(a few a day, as the mix of a healthy cluster has: each such volume writes a row every round
while it is not ok, so this overstates them). ``--hours`` of rounds are simulated from 00:00
(two hour files, so each hour's keyframe is in), then scaled to a day.

Per size and check interval: rows and bytes per day before (format 1, plain), format 1
gzipped (for reference), after (format 2, closed hours gzip or bzip2); 30 days after against the default
history.retention.bytes (1 GiB); CPU per round (time.process_time, median) of building and
encoding a round's lines: before (``round_lines``) and after (``Compactor.rows`` + encoding,
plus the hour's compression, level 9 as the service's, spread over its rounds)."""

from __future__ import annotations

import argparse
import bz2
import zlib
import logging
import math
import random
import statistics
import time
from datetime import UTC, datetime

from app.decision.decider import ThrottleDecider
from app.decision.policy import LimitKind, StoragePolicy
from app.history.compact import Compaction, Compactor
from app.history.rows import ROW_ENCODER, round_lines
from app.observation.model import ObservationRound, VolumeObservation

TOTAL = 2 * 1024**4  # 2 TiB volumes
DAY = 86400.0
GIB = 1024**3
START = datetime(2026, 11, 29, 0, 0, tzinfo=UTC).timestamp()


class Cluster:
    def __init__(self, brokers: int, dirs: int, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.keys = [(b, f"/var/lib/kafka/data-{d}") for b in range(1, brokers + 1) for d in range(dirs)]
        self.rate = {k: rng.uniform(0.001, 0.03) * TOTAL / 3600 for k in self.keys}  # bytes/s filled
        self.phase = {k: rng.uniform(0, 2 * math.pi) for k in self.keys}
        self.level = {k: rng.uniform(0.35, 0.7) for k in self.keys}
        self.retention_offset = {k: rng.uniform(0, 300) for k in self.keys}
        volumes = len(self.keys)
        self.ramping = set(rng.sample(self.keys, max(1, volumes // 1000)))
        self.breaching = set(rng.sample([k for k in self.keys if k not in self.ramping], max(1, volumes // 1000)))

    def usable(self, key, t: float, hours: float) -> int:
        elapsed = t - START
        if key in self.ramping and hours * 3600 * 0.25 <= elapsed < hours * 3600 * 0.75:
            return int(0.08 * TOTAL)  # between the hard (5%) and soft (10%) limits
        if key in self.breaching and hours * 3600 * 0.4 <= elapsed < hours * 3600 * 0.6:
            return int(0.03 * TOTAL)
        return self._healthy(key, elapsed)

    def usable_all(self, t: float, hours: float) -> list[int]:
        """Every volume's usable bytes at ``t``, in the order of ``keys``."""
        return [self.usable(key, t, hours) for key in self.keys]

    def _healthy(self, key, elapsed: float) -> int:
        level = self.level[key] + 0.1 * math.sin(2 * math.pi * elapsed / DAY + self.phase[key])
        since_retention = (elapsed + self.retention_offset[key]) % 300  # retention frees every 5 minutes
        return int(level * TOTAL - self.rate[key] * since_retention)


def rounds(cluster: Cluster, interval: float, hours: float, first: int = 0):
    """The rounds ``first`` (0: the one at START) up to ``hours``, each with its decision."""
    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 0.05 * TOTAL, 0.10 * TOTAL)
    decider = ThrottleDecider(policy, 300.0, 1.0, started_at=START - 1)
    brokers = tuple(sorted({b for b, _ in cluster.keys}))
    for i in range(first, int(hours * 3600 / interval)):
        at = START + i * interval
        observed = at - 0.2
        observations = tuple(VolumeObservation(b, d, TOTAL, usable, observed) for (b, d), usable in zip(cluster.keys, cluster.usable_all(at, hours)))
        round_ = ObservationRound(at - 0.5, at, brokers, observations)
        decider.apply_round(round_)
        yield round_, decider.decision(at).frozen()


def cpu(fn) -> tuple[object, float]:
    start = time.process_time()
    result = fn()
    return result, (time.process_time() - start) * 1000


class _Hourly:
    """Bytes written in plain and compressed (level 9, as the service compresses a closed hour:
    gzip, or bzip2 with ``bzip2``), one stream per hour, fed as the rounds come (nothing kept in
    memory)."""

    def __init__(self, bzip2: bool = False) -> None:
        self.plain = self.compressed = 0
        self.gzip_ms = 0.0
        self._hour: int | None = None
        self._stream = None
        self._bzip2 = bzip2

    def add(self, hour: int, data: bytes) -> None:
        if hour != self._hour:
            self.close()
            self._hour = hour
            self._stream = bz2.BZ2Compressor(9) if self._bzip2 else zlib.compressobj(9, zlib.DEFLATED, 31)
        self.plain += len(data)
        start = time.process_time()
        self.compressed += len(self._stream.compress(data))
        self.gzip_ms += (time.process_time() - start) * 1000

    def close(self) -> None:
        if self._stream is not None:
            self.compressed += len(self._stream.flush())
            self._stream = None


def measure(brokers: int, dirs: int, interval: float, hours: float, keyframe: float = 300.0) -> dict:
    cluster = Cluster(brokers, dirs)
    compactor = Compactor(Compaction(keyframe_seconds=keyframe))
    full, compact, compact_bzip2 = _Hourly(), _Hourly(), _Hourly(bzip2=True)
    before_ms, after_ms = [], []
    full_rows = compact_rows = rounds_done = 0
    for round_, decision in rounds(cluster, interval, hours):
        hour = int(round_.finished_at // 3600)
        lines, ms = cpu(lambda: round_lines(round_, decision, interval).encode())
        before_ms.append(ms)
        encoded, ms = cpu(lambda: [ROW_ENCODER.encode(row) for row in compactor.rows(round_, decision, interval)])
        after_ms.append(ms)
        full.add(hour, lines)
        compact.add(hour, ("\n".join(encoded) + "\n").encode())
        compact_bzip2.add(hour, ("\n".join(encoded) + "\n").encode())
        full_rows += lines.count(b"\n")
        compact_rows += len(encoded)
        rounds_done += 1
    full.close()
    compact.close()
    compact_bzip2.close()
    per_day = 24 / hours
    return {
        "size": f"{brokers} x {dirs}",
        "interval": interval,
        "rows_before": full_rows * per_day,
        "rows_after": compact_rows * per_day,
        "before": full.plain * per_day,
        "before_gzip": full.compressed * per_day,
        "after_plain": compact.plain * per_day,
        "after": compact.compressed * per_day,
        "after_bzip2": compact_bzip2.compressed * per_day,
        "cpu_before": statistics.median(before_ms),
        "cpu_after": statistics.median(after_ms) + compact.gzip_ms / rounds_done,
        "cpu_after_bzip2": statistics.median(after_ms) + compact_bzip2.gzip_ms / rounds_done,
    }


def mib(n: float) -> str:
    return f"{n / 1024**2:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100x4,1000x12")
    parser.add_argument("--intervals", default="60,10", help="check intervals, seconds")
    parser.add_argument("--hours", type=float, default=1.0, help="hours of rounds simulated per size and interval")
    parser.add_argument("--keyframe", type=float, default=300.0, help="history.keyframe.interval, seconds (default PT5M)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(
        f"history bytes per day, format 1 (before) vs format 2 + gzip or bzip2 (after), keyframe PT{args.keyframe:g}S; "
        f"{args.hours:g} h simulated, x{24 / args.hours:g} a day"
    )
    print(
        "| cluster | interval | rows/day before | rows/day after | MiB/day before | before gzipped | after plain "
        "| MiB/day after gzip | after bzip2 | after/before (bzip2) | 30 days gzip | 30 days bzip2 | CPU/round before ms | after gzip ms | after bzip2 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        brokers, dirs = map(int, size.split("x"))
        for interval in map(float, args.intervals.split(",")):
            r = measure(brokers, dirs, interval, args.hours, args.keyframe)
            fits = [f"{month / GIB:.2f} GiB ({'fits' if month <= GIB else 'over'} 1 GiB)" for month in (r["after"] * 30, r["after_bzip2"] * 30)]
            print(
                f"| {r['size']} | PT{interval:g}S | {r['rows_before']:,.0f} | {r['rows_after']:,.0f} | {mib(r['before'])} | {mib(r['before_gzip'])} "
                f"| {mib(r['after_plain'])} | {mib(r['after'])} | {mib(r['after_bzip2'])} | {r['after_bzip2'] / r['before']:.4f} | {fits[0]} | {fits[1]} "
                f"| {r['cpu_before']:.1f} | {r['cpu_after']:.1f} | {r['cpu_after_bzip2']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
