"""What taking a node's report costs the decider now that its data dirs feed the data decision
(app/decision/merge.py), against the metadata-only path it replaced, measured in the same run.

Run: .venv/bin/python bench/bench_report_merge.py [--brokers 1000] [--dirs 12] [--repeat 15]

In-process CPU time (time.process_time), medians of ``--repeat`` passes, each pass every
broker reporting once (a metadata volume and ``--dirs`` data dirs), after a round over
``--brokers`` x ``--dirs`` data volumes:
- baseline: what the node intake did per report before (the metadata side read before and after,
  the report recorded by the metadata watch);
- now: the intake's path today (the cluster factor and the metadata side read before and after,
  the report recorded by the metadata watch and the data overlay), in a healthy cluster and in an
  incident (``--breaching`` volumes breaching, each reported by its node);
- the round: apply_round over the same volumes with every report's data dirs in the view, against
  the same round with none."""

from __future__ import annotations

import argparse
import sys

from cpu_time import median_cpu_ms

from app.decision.decider import ThrottleDecider
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import ObservationRound, VolumeObservation
from app.observation.node_reports import NodeReport, NodeVolume
from app.server.runtime.node_intake import _what_shims_act_on

GiB = 1024**3
POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 2 * GiB, 8 * GiB)
METADATA = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 4 * GiB, 16 * GiB)
VALIDITY = 300.0


def usable(broker: int, d: int, breaching: int) -> int:
    if broker <= breaching and d == 0:
        return GiB  # below the hard limit
    return (100 + (broker * 7 + d * 13) % 900) * GiB // 10


def cluster_round(brokers: int, dirs: int, at: float, breaching: int) -> ObservationRound:
    volumes = tuple(
        VolumeObservation(b, f"/var/lib/kafka/data-{d}", 1024 * GiB, usable(b, d, breaching), at)
        for b in range(1, brokers + 1)
        for d in range(dirs)
    )
    return ObservationRound(at, at, tuple(range(1, brokers + 1)), volumes)


def report(node: int, dirs: int, at: float, breaching: int) -> NodeReport:
    volumes = [NodeVolume("/var/lib/kafka/metadata", 64 * GiB, (40 + node % 20) * GiB, frozenset({"metadata"}))]
    volumes += [
        NodeVolume(f"/var/lib/kafka/data-{d}", 1024 * GiB, usable(node, d, breaching) + 1, frozenset({"data"}))
        for d in range(dirs)
    ]
    return NodeReport(node, frozenset({"broker"}), tuple(volumes), at)


def decider_after_round(brokers: int, dirs: int, breaching: int) -> ThrottleDecider:
    decider = ThrottleDecider(POLICY, VALIDITY, 0.0, started_at=0.0, metadata_policy=METADATA)
    decider.apply_round(cluster_round(brokers, dirs, 1.0, breaching))
    return decider


def per_report_ms(brokers: int, dirs: int, repeat: int, breaching: int, baseline: bool) -> float:
    decider = decider_after_round(brokers, dirs, breaching)
    at = [2.0]

    def baseline_pass() -> None:
        at[0] += 1.0
        for node in range(1, brokers + 1):
            now = at[0] + node * 1e-6
            r = report(node, dirs, now, breaching)
            before = decider.metadata.at(now)
            decider.metadata.record(r)
            after = decider.metadata.at(now)
            _ = (before.mutation_factor, after.mutation_factor, before.listed, after.listed)

    def now_pass() -> None:
        at[0] += 1.0
        for node in range(1, brokers + 1):
            now = at[0] + node * 1e-6
            r = report(node, dirs, now, breaching)
            before = _what_shims_act_on(decider, now)
            decider.record_node_report(r)
            _ = before != _what_shims_act_on(decider, now)

    # the reports themselves are built in both passes: measured apart and taken off
    def build_only() -> None:
        for node in range(1, brokers + 1):
            report(node, dirs, at[0], breaching)

    (now_pass if not baseline else baseline_pass)()  # warm: every node known once
    building = median_cpu_ms(build_only, repeat)
    total = median_cpu_ms(now_pass if not baseline else baseline_pass, repeat)
    return (total - building) / brokers


def round_ms(brokers: int, dirs: int, repeat: int, with_reports: bool) -> float:
    decider = decider_after_round(brokers, dirs, 0)
    if with_reports:
        for node in range(1, brokers + 1):
            decider.record_node_report(report(node, dirs, 1.5, 0))
    # the rounds are built beforehand: only applying them is measured
    rounds = [cluster_round(brokers, dirs, 2.0 + i * 0.01, 0) for i in range(repeat)]
    pending = iter(rounds)

    def one_round() -> None:
        decider.apply_round(next(pending))

    return median_cpu_ms(one_round, repeat)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--breaching", type=int, default=5)
    args = parser.parse_args()
    b, d, n = args.brokers, args.dirs, args.repeat
    base = per_report_ms(b, d, n, 0, baseline=True)
    healthy = per_report_ms(b, d, n, 0, baseline=False)
    incident = per_report_ms(b, d, n, args.breaching, baseline=False)
    round_without = round_ms(b, d, max(3, n // 3), with_reports=False)
    round_with = round_ms(b, d, max(3, n // 3), with_reports=True)
    print(f"decider, {b} brokers x {d} data dirs, each broker reporting (a metadata volume and its {d} data dirs)")
    print(f"{'what':<72}{'CPU ms':>10}{'x':>8}")
    print(f"{'per report, metadata only (the path before): baseline':<72}{base:>10.4f}{1.0:>8.2f}")
    print(f"{'per report, data dirs merged, healthy cluster':<72}{healthy:>10.4f}{healthy / base:>8.2f}")
    print(f"{f'per report, data dirs merged, {args.breaching} volumes breaching (reported)':<72}{incident:>10.4f}{incident / base:>8.2f}")
    print(f"{'round, no report in the view: baseline':<72}{round_without:>10.2f}{1.0:>8.2f}")
    print(f"{'round, every broker reports its data dirs':<72}{round_with:>10.2f}{round_with / round_without:>8.2f}")


if __name__ == "__main__":
    sys.exit(main())
