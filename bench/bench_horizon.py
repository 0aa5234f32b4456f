"""The per-round cost of the horizon rule (time to full) at 1,000 brokers x 12 log dirs.

Run: .venv/bin/python bench/bench_horizon.py [--brokers 1000] [--dirs 12] [--rounds 20] [--service-rounds 4]
     [--rule-from OTHER_HORIZON_PY]  (only the rule, another version of it against today's)
Two services in this process, the same settings but for throttle.service.ramp.horizon (PT30M,
check interval PT1M), apply the same rounds of a filling cluster: every volume fills at its own
rate (most would take days, one in a hundred hours, a handful less than the horizon) and one in
fifty loses space to retention now and then. Two cases: steady (the horizon rule slows the
five fast volumes) and paused (one volume below the hard limit while the others keep filling,
as they would not: the costliest case, where the factor in force, 0, bounds no demand and
every filling volume is fitted). After 8 warm rounds (every trend full), the CPU
time (time.process_time) of each whole round as the service applies it (cache, policy, the
horizon rule, factor, metrics, re-encoding the decision) is measured, rounds interleaved;
medians. The rule alone (HorizonRule.record: every volume's fill rate, and the time factor of
those that could ask for one) is timed on the same observations as well.

Today's round CPU, the target's baseline, measured in the same run (``--service-rounds``, 0 to
skip): the service process, without a horizon and then with one, observing a simulated cluster
of the same size (devtools.simcluster, as bench/bench_rounds.py does, check interval 10 s): its
CPU per round from /proc, decoding the DescribeLogDirs answers and writing the history included.
The rule's cost is given as a share of it."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import statistics
import tempfile
import time
from pathlib import Path

from app.decision.horizon import AppliedFactor, HorizonRule
from app.decision.policy import LimitKind, StoragePolicy
from app.observation.model import ObservationRound, VolumeObservation
from app.server.app import create_app
from app.settings import load_settings
from cpu_time import cpu_ms

GiB = 1024**3
MiB = 1024**2
CHECK = 60.0
HORIZON = "PT30M"
TOTAL = 1024 * GiB


def fill_rate(broker: int, d: int) -> float:
    """Bytes a second: most volumes fill in days, one in a hundred in hours, five within the horizon."""
    if broker % 200 == 0 and d == 0:
        return 40 * MiB  # 80 GiB of room: about 34 minutes
    if (broker * 12 + d) % 100 == 0:
        return 5 * MiB
    return (broker * 7 + d * 13) % 50 * 1024.0


class FillingCluster:
    """Every volume fills at its own rate times the factor in force (the loop closed, as brokers
    close it); one in fifty loses 2 GiB to retention every 5 rounds."""

    def __init__(self, brokers: int, dirs: int, start: float, paused: bool) -> None:
        self.start = start
        self.volumes = []
        for broker in range(1, brokers + 1):
            for d in range(dirs):
                usable = (100 + (broker * 7 + d * 13) % 900) * GiB / 10
                if broker % 200 == 0 and d == 0:
                    usable = 82 * GiB  # within the horizon (30 min) after a few rounds
                if paused and broker == 1 and d == 1:
                    usable = GiB  # below the hard limit: the cluster is paused (the costliest case, below)
                self.volumes.append([broker, f"/var/lib/kafka/data-{d}", usable, fill_rate(broker, d), (broker + d) % 50 == 0])
        self.index = 0

    def round(self, factor: float) -> ObservationRound:
        """The next round, after CHECK seconds of filling at ``factor`` (paused: the fill goes on
        at full rate, as it would not, so that every filling volume stays a candidate)."""
        self.index += 1
        at = self.start + self.index * CHECK
        observations = []
        for volume in self.volumes:
            broker, log_dir, usable, rate, retention = volume
            usable -= rate * (factor if factor > 0 else 1.0) * CHECK
            if retention and self.index % 5 == 0:
                usable += 2 * GiB
            volume[2] = usable
            observations.append(VolumeObservation(broker, log_dir, TOTAL, int(max(usable, 0)), at))
        return ObservationRound(at, at, tuple(sorted({v[0] for v in self.volumes})), tuple(observations))


def service(horizon: str | None):
    extra = {"ramp_horizon": horizon} if horizon else {}
    settings = load_settings(
        environ={},
        kafka_admin_bootstrap_servers="127.0.0.1:9092",
        data_dir=tempfile.mkdtemp(prefix="throttle-bench-"),
        storage_per_volume_limit_min_available_bytes=str(2 * GiB),
        storage_check_interval="PT1M",
        **extra,
    )
    return create_app(settings, observe=False).state.service.loop


def measure(brokers: int, dirs: int, count: int, paused: bool) -> tuple[float, float, float, str]:
    """Medians (ms) of: a whole round today, a whole round with the horizon, the rule alone."""
    start = time.time()
    warm = 8
    today, horizon = FillingCluster(brokers, dirs, start, paused), FillingCluster(brokers, dirs, start, paused)
    alone = FillingCluster(brokers, dirs, start, paused)
    without, with_horizon = service(None), service(HORIZON)
    rule = HorizonRule(StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 2 * GiB), 1800.0)
    rule_factor = 1.0
    plain, timed, rule_only = [], [], []
    for index in range(warm + count):
        now = today.start + today.index * CHECK
        rounds = (
            today.round(without.decider.reading(now).factor),
            horizon.round(with_horizon.decider.reading(now).factor),
            alone.round(rule_factor),
        )
        costs = (
            cpu_ms(lambda: without.apply_round(rounds[0])),
            cpu_ms(lambda: with_horizon.apply_round(rounds[1])),
            cpu_ms(lambda: rule.record(rounds[2].observations, AppliedFactor(rule_factor))),
        )
        rule_factor = 0.0 if paused else with_horizon.decider.reading(rounds[1].finished_at).factor
        if index >= warm:
            plain.append(costs[0]), timed.append(costs[1]), rule_only.append(costs[2])
    decision = with_horizon.decider.decision(with_horizon.decider.latest_round.finished_at)
    shown = f"factor {decision.factor:.3f}, rule {decision.rule}, {len(decision.listed)} volume(s) listed"
    return statistics.median(plain), statistics.median(timed), statistics.median(rule_only), shown


def service_round_cpu(brokers: int, dirs: int, rounds: int) -> dict[str, float]:
    """CPU seconds per round of the service process observing a simulated cluster: today's
    (no horizon) and with the horizon, one after the other on the same cluster."""
    from bench_rounds import measure as measure_rounds
    from devtools.simcluster import SimulatedClusterProcess
    from service_process import ROOT, ServiceProcess

    settings = {"storage_check_interval": "PT10S", "storage_per_volume_limit_min_available_ratio": "0.05"}
    cpu = {}
    with tempfile.TemporaryDirectory(prefix="bench-horizon-") as scratch_name, SimulatedClusterProcess(
        brokers, dirs, total_bytes=1024 * 1024 * MiB
    ) as cluster:
        for name, extra in (("today", {}), ("horizon", {"ramp_horizon": HORIZON})):
            service = ServiceProcess(name, ROOT, Path(scratch_name), kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **settings, **extra)
            try:
                cpu[name] = measure_rounds(service, cluster, rounds, 10.0).cpu_seconds
            finally:
                service.stop()
    return cpu


def compare_rules(path: Path, brokers: int, dirs: int, count: int) -> None:
    """The rule of ``path`` (another version of app/decision/horizon.py, e.g. from ``git show
    REV:app/decision/horizon.py``) against today's, on the same observations in this process,
    rounds interleaved (which goes first alternates), medians after 8 warm rounds."""
    spec = importlib.util.spec_from_file_location("horizon_before", path)
    assert spec is not None and spec.loader is not None
    before = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(before)
    policy = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 2 * GiB)
    # Versions before the factor applied took the factor in force as a number.
    applied = getattr(before, "AppliedFactor", lambda factor: factor)
    for case, paused in (("steady", False), ("paused", True)):
        cluster = FillingCluster(brokers, dirs, time.time(), paused)
        rules = {"before": (before.HorizonRule(policy, 1800.0), applied), "today": (HorizonRule(policy, 1800.0), AppliedFactor)}
        costs: dict[str, list[float]] = {name: [] for name in rules}
        factor = 1.0
        for index in range(8 + count):
            observations = cluster.round(factor).observations
            in_force = 0.0 if paused else factor
            order = list(rules) if index % 2 else list(reversed(rules))
            for name in order:
                rule, wrap = rules[name]
                cost = cpu_ms(lambda rule=rule, wrap=wrap: rule.record(observations, wrap(in_force)))
                if index >= 8:
                    costs[name].append(cost)
            if not paused:
                factor = min([e.factor for e in rules["today"][0].at_risk.values()] or [1.0])
        medians = "  ".join(f"{name} {statistics.median(values):.2f} ms" for name, values in costs.items())
        print(f"{case:<9}the horizon rule alone, {path} against today's: {medians}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--service-rounds", type=int, default=4, help="rounds of the service process measured (0: skip)")
    parser.add_argument("--rule-from", type=Path, help="only time this file's HorizonRule against today's, interleaved")
    args = parser.parse_args()
    if args.rule_from:
        compare_rules(args.rule_from, args.brokers, args.dirs, args.rounds)
        return
    logging.disable(logging.WARNING)  # the state-change lines of the paused case
    print(f"{args.brokers * args.dirs} volumes ({args.brokers} brokers x {args.dirs} log dirs), median of {args.rounds} rounds, CPU time")
    print(f"{'case':<9}{'step':<48}{'ms':>9}{'x today':>9}")
    rule_costs = {}
    for case, paused in (("steady", False), ("paused", True)):
        base, withh, rule_ms, shown = measure(args.brokers, args.dirs, args.rounds, paused)
        rule_costs[case] = rule_ms
        print(f"{case:<9}{'whole round in process, today (no horizon)':<48}{base:>9.2f}{1.0:>9.2f}")
        print(f"{case:<9}{'whole round in process with the horizon rule':<48}{withh:>9.2f}{withh / base:>9.2f}")
        print(f"{case:<9}{'the horizon rule alone (HorizonRule.record)':<48}{rule_ms:>9.2f}{rule_ms / base:>9.2f}")
        print(f"{case:<9}decision with the horizon: {shown}", flush=True)
    if args.service_rounds:
        cpu = service_round_cpu(args.brokers, args.dirs, args.service_rounds)
        today = cpu["today"] * 1000
        print(f"\nthe service process against a simulated cluster of the same size, CPU per round over {args.service_rounds} rounds:")
        print(f"{'today (no horizon)':<57}{today:>9.1f}{1.0:>9.2f}")
        print(f"{'with the horizon (PT30M; the volumes do not fill)':<57}{cpu['horizon'] * 1000:>9.1f}{cpu['horizon'] * 1000 / today:>9.2f}")
        for case, rule_ms in rule_costs.items():
            print(f"{'the horizon rule alone, ' + case + ' (above) / today':<57}{rule_ms:>9.2f}{rule_ms / today:>9.3f}")


if __name__ == "__main__":
    main()
