"""Time to full inside real brokers: a 3-broker KRaft cluster with the shim on every broker, the
real service with a horizon of 2 minutes and no soft limit, and a producer filling broker 1's
64 MiB tmpfs volume through a topic without retention (so the volume fills at the rate the
producer is let through, and nothing frees it until the test deletes the topic).

The producer offers 1.25 x the default produce quota, and the quota is what fills the volume's
room above the hard limit in the time a case names (3 minutes, an hour), so the quota binds
from the start: the factor scales what is written. A sampler reads statvfs (what Kafka reports
as UsableBytes) and the service's decision twice a second; the time left is the room above the
hard limit over the fill rate measured by statvfs over the last quarter of the horizon (30 s, the window the
service fits on; least squares over the samples: a throttled producer writes in bursts of
seconds, and a 10-20 s window of them read 0.5-0.77 x the horizon about a mean of 1.0). The
three-minute case prints, per round, the rate statvfs measured, the service's fill rate and
the factor (shown with -s, or with the failure's captured output)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.devcluster import LocalKafkaCluster

from .conftest import MiB, free_port
from .shim_harness import (
    HARD_LIMIT,
    SERVICE_SETTINGS,
    SHIM_TABLE_LINE,
    LoadProducer,
    VolumeRamp,
    broker_log_count,
    operator_config,
    running_shim_cluster,
    wait_for_shims,
    wait_until,
)

HORIZON = 120.0
CHECK = 2.0
QUOTA_WINDOW = 11.0  # Kafka's quota window: 11 samples of 1 s (KIP-13)
SETTLE = 2 * CHECK + QUOTA_WINDOW  # the "two check intervals plus the quota window"
FILLED = 1  # the broker whose volume fills
RATE_WINDOW = HORIZON / 4  # the window the service fits its trend on


@pytest.fixture(scope="module")
def service_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def shim_cluster(shim_jar: Path, service_port: int) -> Iterator[LocalKafkaCluster]:
    with running_shim_cluster(shim_jar, service_port) as cluster:
        yield cluster


class Sampler:
    """Twice a second: statvfs of the filled volume and the service's factor and rule."""

    def __init__(self, mount_point: Path, base_url: str) -> None:
        self.mount_point = mount_point
        self.samples: list[tuple[float, int, float, str | None]] = []  # (t, usable, factor, rule)
        self.rates: list[tuple[float, float | None]] = []  # (t, the service's fill rate of the filled volume)
        self._client = httpx.Client(base_url=base_url, timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            stats = os.statvfs(self.mount_point)
            try:
                response = self._client.get("/throttle-factor")
            except httpx.HTTPError:
                continue
            if response.status_code != 200:  # a balancer's 502 while the replica behind it restarts
                continue
            decision = response.json()
            now = time.monotonic()
            self.samples.append((now, stats.f_bavail * stats.f_frsize, decision["factor"], decision.get("rule")))
            ramping = [v.get("fill_rate_bytes_per_second") for v in decision.get("ramping", [])]
            self.rates.append((now, ramping[0] if ramping else None))

    def usable(self) -> int:
        stats = os.statvfs(self.mount_point)
        return stats.f_bavail * stats.f_frsize

    def time_left(self, at: float) -> float:
        """Seconds to the hard limit at the fill rate statvfs measured over the RATE_WINDOW before ``at``."""
        window = [(t, u) for t, u, _, _ in list(self.samples) if at - RATE_WINDOW <= t <= at]
        mean_t = sum(t for t, _ in window) / len(window)
        mean_u = sum(u for _, u in window) / len(window)
        slope = sum((t - mean_t) * (u - mean_u) for t, u in window) / sum((t - mean_t) ** 2 for t, _ in window)
        return (window[-1][1] - HARD_LIMIT) / -slope if slope < 0 else float("inf")

    def rounds(self, origin: float, quota: float) -> str:
        """Each factor the service set from 20 s before ``origin`` (one per round at most; time
        from ``origin``), with the fill rate statvfs measured over the RATE_WINDOW before it,
        the service's fill rate and quota x factor."""
        samples, rates = list(self.samples), list(self.rates)
        out: list[str] = []
        last = None
        for (t, _, factor, _), (_, rate) in zip(samples, rates):
            if t >= origin - 20 and factor != last:
                recent = [(s, u) for s, u, *_ in samples if t - RATE_WINDOW <= s <= t]
                measured = (recent[0][1] - recent[-1][1]) / max(recent[-1][0] - recent[0][0], 1e-9)
                out.append(f"{t - origin:.0f}:{measured / 1024:.0f}/{(rate or 0) / 1024:.0f}/{quota * factor / 1024:.0f}/{factor:.2f}")
                last = factor
        return " ".join(out)

    def longest_flat(self, start: float, end: float) -> float:
        """The longest time in [start, end) over which statvfs read no fill (a throttled producer's silence)."""
        longest, since, last = 0.0, None, None
        for t, usable, _, _ in list(self.samples):
            if start <= t < end:
                if last is None or usable < last:
                    since = t
                longest, last = max(longest, t - since), usable
        return longest

    def first(self, predicate, since: float = 0.0) -> float | None:
        return next((t for t, _, factor, rule in list(self.samples) if t >= since and predicate(factor, rule)), None)

    def factors(self, start: float, end: float) -> list[float]:
        """The factors in force in [start, end), each change once (one per round at most)."""
        out: list[float] = []
        for t, _, factor, _ in list(self.samples):
            if start <= t < end and (not out or out[-1] != factor):
                out.append(factor)
        return out

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._client.close()


@pytest.fixture
def fill(shim_cluster, start_service, service_port, request):
    """Start the service with a produce quota that fills the room above the hard limit in
    ``seconds``, and a producer offering 1.25 x that into a topic without retention on the
    filled broker. Returns (service, producer, sampler, quota)."""
    admin = AdminClient({"bootstrap.servers": shim_cluster.bootstrap_servers})
    topic = f"fill-{len(request.node.name)}-{abs(hash(request.node.name)) % 10**8}"
    started: list = []
    created: list[str] = []

    def start(seconds: float):
        mount_point = shim_cluster.mount_point(FILLED)
        stats = os.statvfs(mount_point)
        quota = (stats.f_bavail * stats.f_frsize - HARD_LIMIT) / seconds
        config = {"segment.bytes": str(MiB), "retention.bytes": "-1", "retention.ms": "-1"}
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[FILLED]], config=config)])[topic].result(timeout=30)
        created.append(topic)
        before = broker_log_count(shim_cluster, SHIM_TABLE_LINE)
        service = start_service(
            http_port=str(service_port),
            kafka_admin_bootstrap_servers=shim_cluster.bootstrap_servers,
            **{**SERVICE_SETTINGS, "storage_check_interval": f"PT{CHECK:g}S", "ramp_horizon": "PT2M", "produce": f"{quota:.0f}"},
        )
        service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 20, "observed OPEN")
        wait_for_shims(shim_cluster, before)
        sampler = Sampler(mount_point, service.base_url)
        producer = LoadProducer(
            {"bootstrap.servers": shim_cluster.bootstrap_servers, "client.id": "filler"},
            topic=topic,
            partitions=[0],
            message_bytes=1024,  # the producer's burst (0.2 s of its rate) must hold one message at an hour's rate
            rate_per_partition=1.25 * quota,
        )
        started.extend([producer, sampler])
        return service, producer, sampler, quota

    yield start
    for item in started:
        item.stop()
    if created:
        admin.delete_topics(created)[topic].result(timeout=30)


def test_a_fill_that_would_take_an_hour_is_never_slowed_by_the_time_rule(fill):
    _, producer, sampler, quota = fill(3600)
    time.sleep(60)
    assert producer.rate(time.monotonic() - 40, time.monotonic()) > 0.5 * quota, "the producer should be writing"
    slowed = [(t, factor, rule) for t, _, factor, rule in sampler.samples if factor < 1.0 or rule is not None]
    assert slowed == [], f"slowed: {slowed[:5]}"


def test_a_fill_that_would_take_three_minutes_is_held_a_horizon_away_and_released_when_it_stops(fill, record_property):
    service, producer, sampler, quota = fill(180)
    throttled = wait_until(
        lambda: sampler.first(lambda factor, rule: rule == "time to full") is not None,
        150,
        "the time rule",
        lambda: f"usable {sampler.usable()} B; service {service.decision()}",
    )
    from_ = sampler.first(lambda factor, rule: rule == "time to full")
    checked_from = from_ + SETTLE
    time.sleep(max(0.0, checked_from + 60 - time.monotonic()))
    checked_to = time.monotonic()
    lefts = [(t - from_, sampler.time_left(t)) for t, *_ in list(sampler.samples) if checked_from <= t <= checked_to]
    factors = sampler.factors(checked_from, checked_to)
    table = " ".join(f"{at:.0f}s:{left:.0f}" for at, left in lefts[::4])
    print(f"\nper round (s after the rule set the factor: statvfs rate over the trend window / the service's rate / quota x factor, KiB/s / factor)\n{sampler.rounds(from_, quota)}")
    print(f"\nthe longest silence of the throttled producer: {sampler.longest_flat(checked_from, checked_to):.1f} s")
    print(f"\nthrottled {throttled:.1f}; time left (s after the rule set the factor : s left) {table}\nfactors {factors}")
    assert len(lefts) >= 100
    assert min(left for _, left in lefts) >= 0.8 * HORIZON, table
    assert len(factors) >= 10 and max(abs(b - a) for a, b in zip(factors, factors[1:])) <= 0.2, factors
    assert max(factors) < 1.0, "the rule should hold the factor below 1 all along"
    record_property("min_time_left_s", round(min(left for _, left in lefts), 1))

    # The fill stops: the throttle is released within a check interval and the quota window.
    producer.stop()
    stopped = time.monotonic()
    released = wait_until(lambda: sampler.first(lambda factor, rule: factor == 1.0, since=stopped) is not None, 60, "release")
    release = sampler.first(lambda factor, rule: factor == 1.0, since=stopped) - stopped
    print(f"released {release:.1f} s after the fill stopped ({released:.1f})")
    record_property("release_s", round(release, 1))
    assert release <= CHECK + QUOTA_WINDOW


FOLLOWER, LEADER = 1, 2


def test_a_follower_filling_by_replication_that_the_factor_does_not_slow_is_never_let_go(shim_cluster, start_service, service_port):
    """Broker 1 holds only a follower of a partition that broker 2 leads, and its volume is 20
    MiB above the hard limit. Two producers write to the leader: an excluded principal (an
    operator moving data; the factor never slows it) at 192 KiB/s, and a producer held by the
    produce quota (192 KiB/s; it offers 1.25 x). Broker 1's volume fills by replication alone,
    and at least at the operator's rate whatever the factor. Horizon PT1M, check PT1S. From the
    rule's first cut until the hard limit (24 MiB available: the disk is far from full), while
    the follower's volume keeps filling, the published factor never returns to 1 and never
    rises by more than 0.05; it falls below 0.001 first, where the simulated cluster of the
    issue showed OPEN every other round."""
    admin = AdminClient({"bootstrap.servers": shim_cluster.bootstrap_servers})
    topic = "replicated-to-a-follower"
    config = {"segment.bytes": str(MiB), "retention.bytes": "-1", "retention.ms": "-1"}
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[LEADER, FOLLOWER]], config=config)])[topic].result(timeout=30)
    mount_point = shim_cluster.mount_point(FOLLOWER)
    stats = os.statvfs(mount_point)
    near = VolumeRamp(mount_point, stats.f_bavail * stats.f_frsize, HARD_LIMIT + 20 * MiB, 1.0)  # a volume near its limit
    quota = 192 * 1024
    started: list = []
    try:
        before = broker_log_count(shim_cluster, SHIM_TABLE_LINE)
        service = start_service(
            http_port=str(service_port),
            kafka_admin_bootstrap_servers=shim_cluster.bootstrap_servers,
            **{**SERVICE_SETTINGS, "storage_check_interval": "PT1S", "ramp_horizon": "PT1M", "produce": str(quota)},
        )
        service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 20, "observed OPEN")
        wait_for_shims(shim_cluster, before)
        sampler = Sampler(mount_point, service.base_url)
        started.append(sampler)
        operator = LoadProducer({**operator_config(shim_cluster), "client.id": "mover"}, topic, [0], 1024, quota)
        started.append(operator)
        throttled = LoadProducer({"bootstrap.servers": shim_cluster.bootstrap_servers, "client.id": "filler"}, topic, [0], 1024, 1.25 * quota)
        started.append(throttled)
        wait_until(lambda: sampler.first(lambda factor, rule: rule == "time to full") is not None, 60, "the time rule", service.decision)
        cut = sampler.first(lambda factor, rule: rule == "time to full")
        wait_until(lambda: sampler.first(lambda factor, rule: rule == "hard limit", since=cut) is not None, 180, "the hard limit", service.decision)
        limit = sampler.first(lambda factor, rule: rule == "hard limit", since=cut)
        operator.stop(), throttled.stop()
        filling = [(t, usable) for t, usable, _, _ in list(sampler.samples) if cut <= t < limit]
        factors = sampler.factors(cut, limit)
        print(f"\nfrom the first cut ({cut - sampler.samples[0][0]:.0f} s in) to the hard limit ({limit - cut:.0f} s later): factors {[round(f, 5) for f in factors]}")
        print(f"rounds: {sampler.rounds(cut, quota)}")
        assert filling[0][1] - filling[-1][1] >= 10 * MiB, "the follower's volume should have kept filling"
        assert operator.rate(cut, limit) > 0.8 * quota, "the excluded principal should not have been slowed"
        assert max(factors) < 1.0, factors
        assert len(factors) >= 10 and max(b - a for a, b in zip(factors, factors[1:])) <= 0.05, factors
        assert min(factors) < 0.001, "a fill the factor does not slow is throttled down to PAUSE before the hard limit"
    finally:
        for item in reversed(started):
            item.stop()
        admin.delete_topics([topic])[topic].result(timeout=30)
        near.free()


def test_two_replicas_hand_over_a_ramp_in_progress_without_a_flip(shim_cluster, start_service, service_port):
    """The follower fill above, decided by two replicas (Kafka store) behind a balancer that
    sends each request to the other one, every shim polling through it; the decider is killed
    (-9) while the ramp is in progress. The other replica mirrored its trends: it serves the
    same factor until it takes over, then goes on from the same trends. Through the balancer the
    factor never returns to 1 and never rises by more than 0.05 until the hard limit."""
    from .round_robin import RoundRobin
    from .test_replicas import deciders

    admin = AdminClient({"bootstrap.servers": shim_cluster.bootstrap_servers})
    topic = "replicated-to-a-follower-2"
    config = {"segment.bytes": str(MiB), "retention.bytes": "-1", "retention.ms": "-1"}
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[LEADER, FOLLOWER]], config=config)])[topic].result(timeout=30)
    mount_point = shim_cluster.mount_point(FOLLOWER)
    stats = os.statvfs(mount_point)
    near = VolumeRamp(mount_point, stats.f_bavail * stats.f_frsize, HARD_LIMIT + 20 * MiB, 1.0)
    quota = 192 * 1024
    ports = [free_port(), free_port()]
    settings = {
        **SERVICE_SETTINGS,
        "kafka_admin_bootstrap_servers": shim_cluster.bootstrap_servers,
        "storage_check_interval": "PT1S",
        "ramp_horizon": "PT1M",
        "produce": str(quota),
        "quota_store": "kafka",
        "quota_store_topic": f"ramp-quotas-{os.getpid()}-{int(time.time())}",
    }
    started: list = []
    balancer = RoundRobin(service_port, ports)
    try:
        before = broker_log_count(shim_cluster, SHIM_TABLE_LINE)
        replicas = [start_service(http_port=str(port), **settings) for port in ports]
        for replica in replicas:
            replica.wait_ready()
        replicas[0].wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 20, "observed OPEN")
        wait_for_shims(shim_cluster, before)
        sampler = Sampler(mount_point, f"http://127.0.0.1:{service_port}")
        started.append(sampler)
        operator = LoadProducer({**operator_config(shim_cluster), "client.id": "mover"}, topic, [0], 1024, quota)
        started.append(operator)
        throttled = LoadProducer({"bootstrap.servers": shim_cluster.bootstrap_servers, "client.id": "filler"}, topic, [0], 1024, 1.25 * quota)
        started.append(throttled)
        wait_until(lambda: sampler.first(lambda factor, rule: rule == "time to full") is not None, 60, "the time rule", replicas[0].decision)
        cut = sampler.first(lambda factor, rule: rule == "time to full")
        time.sleep(10)  # the ramp in progress
        leading = deciders(replicas)
        assert len(leading) == 1, [r.log()[-1500:] for r in replicas]
        leading[0].process.kill()
        leading[0].process.wait(5)
        killed = time.monotonic()
        survivor = next(r for r in replicas if r is not leading[0])
        wait_until(lambda: deciders([survivor]) == [survivor], 30, "the other replica taking over", survivor.decision)
        took_over = time.monotonic() - killed
        wait_until(lambda: sampler.first(lambda factor, rule: rule == "hard limit", since=cut) is not None, 180, "the hard limit", survivor.decision)
        limit = sampler.first(lambda factor, rule: rule == "hard limit", since=cut)
        operator.stop(), throttled.stop()
        factors = sampler.factors(cut, limit)
        print(f"\ntwo replicas, the decider killed {killed - cut:.0f} s into the ramp, the other deciding {took_over:.1f} s later;"
              f" factors through the balancer to the hard limit {[round(f, 4) for f in factors]}")
        assert max(factors) < 1.0, factors
        assert len(factors) >= 10 and max(b - a for a, b in zip(factors, factors[1:])) <= 0.05, factors
    finally:
        for item in reversed(started):
            item.stop()
        balancer.close()
        admin.delete_topics([topic])[topic].result(timeout=30)
        near.free()
