"""The soft-limit ramp inside real brokers: a 3-broker KRaft cluster with the shim on every broker,
the real service with a default produce quota and a soft limit, and a confluent-kafka producer on
broker 2 while a filler file takes broker 1's volume through the soft band
(shim_harness.VolumeRamp; Kafka writes nothing for it, so the factor falls at a known pace).

Numbers: a default produce quota of 4 MiB/s per broker and the floor of 64 KiB/s; hard limit
24 MiB, soft limit 40 MiB available on 64 MiB volumes. Kafka's quota window (the defaults, 11
samples of 1 s) reaches back at most 12 s: the "first quota window" of a phase. A sensor younger
than 10 samples throttles a saturated producer for up to a second at every other sample
boundary, and the ramp starts a few fresh epochs (docs/shim.md): along the ramp,
rates are compared over check intervals of 6 s."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devcluster import LocalKafkaCluster

from .conftest import MiB, free_port
from .shim_harness import (
    FLOOR,
    HARD_LIMIT,
    SERVICE_SETTINGS,
    SHIM_TABLE_LINE,
    FactorTimeline,
    LoadProducer,
    VolumeRamp,
    broker_log_count,
    running_shim_cluster,
    wait_for_shims,
    wait_until,
)

QUOTA = 4 * MiB
SOFT_LIMIT = 40 * MiB
SPAN = 12.0  # Kafka's quota window, samples + 1 of 1 s: how far back a sensor's bytes reach
QUARTER_SPAN = 3.0  # the most a throttle from a sensor's history may last (the shim's epoch rule)
FILLED, LOAD_BROKER, LOAD_PARTITION = 1, 2, 1  # the harness's load topic has partition p on broker p + 1


@pytest.fixture(scope="module")
def service_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def shim_cluster(shim_jar: Path, service_port: int) -> Iterator[LocalKafkaCluster]:
    with running_shim_cluster(shim_jar, service_port) as cluster:
        yield cluster


@pytest.fixture
def ramp_service(shim_cluster, start_service, service_port):
    """The service with the quota and the soft limit, checking every ``check`` seconds, observed
    OPEN and known to every broker's shim."""

    def start(check: str):
        before = broker_log_count(shim_cluster, SHIM_TABLE_LINE)
        service = start_service(
            http_port=str(service_port),
            kafka_admin_bootstrap_servers=shim_cluster.bootstrap_servers,
            **{
                **SERVICE_SETTINGS,
                "storage_check_interval": check,
                "storage_per_volume_soft_limit_min_available_bytes": str(SOFT_LIMIT),
                "produce": str(QUOTA),
            },
        )
        service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 20, "observed OPEN")
        wait_for_shims(shim_cluster, before)
        return service

    return start


@pytest.fixture
def load(shim_cluster):
    producers: list[LoadProducer] = []

    def start(rate: float) -> LoadProducer:
        config = {"bootstrap.servers": shim_cluster.bootstrap_servers, "client.id": "ramp-load"}
        producers.append(LoadProducer(config, partitions=[LOAD_PARTITION], rate_per_partition=rate))
        return producers[-1]

    yield start
    for producer in producers:
        producer.stop()


@pytest.fixture
def volume(shim_cluster):
    ramps: list[VolumeRamp] = []

    def start(start: int, end: int, seconds: float) -> VolumeRamp:
        ramps.append(VolumeRamp(shim_cluster.mount_point(FILLED), start, end, seconds))
        return ramps[-1]

    yield start
    for ramp in ramps:
        if ramp.freed_at is None:
            ramp.free()


def effective(factor: float) -> float:
    return QUOTA if factor >= 1.0 else max(QUOTA * factor, FLOOR)


def band_seconds(seconds: float) -> tuple[int, int, float]:
    """A straight line from 1 MiB above the soft limit to 1 MiB below the hard limit on which the
    band itself takes ``seconds``."""
    start, end = SOFT_LIMIT + MiB, HARD_LIMIT - MiB
    return start, end, seconds * (start - end) / (SOFT_LIMIT - HARD_LIMIT)


def test_along_a_fill_through_the_soft_band_the_producer_slows_in_step_with_the_factor(ramp_service, load, volume, record_property):
    service = ramp_service("PT6S")
    timeline = FactorTimeline(service.base_url)
    producer = load(5 * MiB)  # more than the quota: every interval of the ramp can bite
    try:
        time.sleep(SPAN + 3)  # the producer's sensor past its first window, held to the quota
        ramp = volume(*band_seconds(66))
        wait_until(
            lambda: timeline.first("PAUSE") is not None,
            120,
            "PAUSE",
            lambda: f"usable {ramp.usable()} B, target {ramp.target(time.monotonic())} B, filler alive {ramp.alive()}; "
            f"decisions {timeline.changes[-5:]}, errors {timeline.errors[-3:]}; service now {service.decision()}",
        )
        throttle_from, pause_from = timeline.first("THROTTLE"), timeline.first("PAUSE")
        healthy = producer.rate(throttle_from - 10, throttle_from)
        rows = []
        for lo, hi, factor, _ in timeline.intervals(throttle_from, pause_from):
            rows.append((lo - throttle_from, hi - lo, factor, effective(factor), producer.rate(lo, hi)))
        table = "\n".join(
            f"  {at:5.1f} s +{length:.1f} s  factor {factor:.3f}  quota {quota / MiB:.2f} MiB/s  measured {rate / MiB:.2f} MiB/s"
            for at, length, factor, quota, rate in rows
        )
        print(f"\nhealthy {healthy / MiB:.2f} MiB/s; THROTTLE for {pause_from - throttle_from:.1f} s\n{table}")
        assert len(rows) >= 5, f"the band should take at least five check intervals:\n{table}"
        assert QUOTA * 0.9 <= healthy <= QUOTA * 1.1, f"held to the quota while OPEN: {healthy / MiB:.2f} MiB/s"
        # After the first quota window of THROTTLE, every whole interval whose quota is well
        # above the floor (near it, a fresh epoch's own allowance of 10 x the floor counts).
        checked = [row for row in rows if row[0] >= SPAN and row[1] >= 5.0 and row[3] >= 4 * FLOOR]
        assert len(checked) >= 4, table
        for at, _, factor, quota, rate in checked:
            assert abs(rate - quota) <= 0.25 * quota, f"at {at:.1f} s, factor {factor:.3f}:\n{table}"
        admitted = producer.bytes(throttle_from, pause_from)
        assert admitted <= 0.6 * healthy * (pause_from - throttle_from), f"admitted {admitted / MiB:.1f} MiB:\n{table}"
        record_property("admitted_ratio", round(admitted / (healthy * (pause_from - throttle_from)), 3))
    finally:
        timeline.stop()


def test_a_steady_level_in_the_band_holds_the_producer_to_quota_times_factor_within_seconds_of_the_change(
    ramp_service, load, volume, record_property
):
    service = ramp_service("PT2S")
    timeline = FactorTimeline(service.base_url)
    producer = load(3 * MiB)  # within the quota while OPEN, above it at half
    try:
        time.sleep(SPAN + 3)
        assert producer.throttles == [], "3 MiB/s is within the 4 MiB/s quota"
        level = (SOFT_LIMIT + HARD_LIMIT) // 2
        ramp = volume(level, level, 0.1)  # straight to the middle of the band, and held there
        # A round may catch the filler's one write half done (a loaded machine): the level holds
        # from the first round after the volume is at it (a check interval, and the round's run).
        wait_until(lambda: ramp.usable() <= level + MiB, 20, "the volume at the level")
        held_from = time.monotonic() + 2.5
        wait_until(lambda: timeline.first("THROTTLE") is not None, 20, "THROTTLE")
        changed = timeline.first("THROTTLE")
        held_from = max(held_from, changed)
        time.sleep(max(changed + 32, held_from + 30) - time.monotonic())
        factors = [factor for _, _, factor, _ in timeline.intervals(held_from, held_from + 30)]
        assert all(0.45 <= factor <= 0.55 for factor in factors), f"the level should hold the factor at about 0.5: {timeline.changes}"
        first = producer.throttled_brokers(changed).get(LOAD_BROKER)
        assert first is not None and first - changed <= 2.0, f"first throttle {None if first is None else first - changed} s after the change"
        quota = sum(effective(f) * (hi - lo) for lo, hi, f, _ in timeline.intervals(changed + 2, changed + 32)) / 30
        held = producer.rate(changed + 2, changed + 32)
        print(f"\nfirst throttled response {first - changed:.2f} s after the change; over 30 s {held / MiB:.2f} MiB/s, quota {quota / MiB:.2f}")
        assert abs(held - quota) <= 0.15 * quota, f"{held / MiB:.2f} MiB/s over 30 s against a quota of {quota / MiB:.2f} MiB/s"
        record_property("first_throttle_s", round(first - changed, 2))
    finally:
        timeline.stop()


def test_a_producer_throttled_along_the_ramp_and_paused_is_back_within_seconds_of_the_volume_being_freed(
    ramp_service, load, volume, record_property
):
    service = ramp_service("PT1S")
    timeline = FactorTimeline(service.base_url)
    producer = load(5 * MiB)
    try:
        time.sleep(SPAN + 3)
        ramp = volume(*band_seconds(16))
        paused_at = wait_until(lambda: timeline.first("PAUSE") is not None, 60, "PAUSE")
        healthy = producer.rate(timeline.first("THROTTLE") - 10, timeline.first("THROTTLE"))
        time.sleep(max(0.0, paused_at + 6 - time.monotonic()))
        paused = producer.rate(paused_at + 2, paused_at + 6)
        assert paused <= 3 * FLOOR, f"paused: {paused / 1024:.0f} KiB/s"
        ramp.free()
        freed = ramp.freed_at
        recovered = wait_until(
            lambda: producer.rate(time.monotonic() - 1, time.monotonic()) > 0.5 * healthy, 20, "above half the healthy rate again"
        )
        time.sleep(3)
        outlived = max((at + throttle - freed for at, _, throttle in producer.throttles if at < freed), default=0.0)
        largest = max((throttle for _, _, throttle in producer.throttles), default=0.0)
        print(f"\nrecovered {recovered - freed:.2f} s after the volume was freed; a throttle given before outlived it by {outlived:.2f} s;"
              f" largest throttle {largest:.2f} s")
        assert recovered - freed <= 5.0, f"{recovered - freed:.2f} s"
        # One 64 KiB request at the floor is a second on top of what history may add.
        assert outlived <= QUARTER_SPAN + 1.0, f"a throttle outlived the pause by {outlived:.2f} s"
        record_property("recovery_s", round(recovered - freed, 2))
    finally:
        timeline.stop()
