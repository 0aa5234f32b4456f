"""Shadow mode and canary brokers with the shim inside real brokers: a 3-broker KRaft cluster
with the shim as every broker's quota callback, the real service, producers that report each
throttled produce response.

The service runs in shadow mode while a volume is driven into PAUSE: producers keep their rate,
/throttle-factor says PAUSE (not enforced) and every shim logs what it would apply. The API
switches to enforce: producers are throttled within a check interval plus 2 s, no broker
restarted; back to shadow, they are not. With a canary broker only that broker's clients are
throttled.

Numbers: check interval 1 s, shim poll interval 0.5 s and long-poll 10 s, hard limit 24 MiB
available on 64 MiB volumes, no base produce quota (unlimited; the 64 KiB/s floor in a pause),
1 MiB/s offered per partition, one partition led by each broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devcluster import LocalKafkaCluster

from .conftest import MiB, free_port
from .shim_harness import (
    CHECK,
    HARD_LIMIT,
    SERVICE_SETTINGS,
    SHIM_TABLE_LINE,
    LoadProducer,
    VolumeRamp,
    broker_log_count,
    running_shim_cluster,
    shim_lines,
    wait_for_shims,
    wait_until,
)

TOKEN = "shadow-admin-token-0123"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RATE = MiB  # offered per partition
WOULD_PAUSE = "would apply factor 0.0 (PAUSE"
SETTLE = 6.0  # producers reach their rate (and catch up their first queue) on a busy machine
MEASURE = 6.0  # seconds each rate is measured over (long enough to even out a busy machine's hiccups)


class SentLoad(LoadProducer):
    """A LoadProducer that also counts each acknowledged message at the time it was produced
    (its CreateTime), so that a rate is what the producer managed to send in a window: acks that
    a busy machine delays into the next window do not move bytes between windows. A throttled
    broker still shows: its producer's queue fills and produce() refuses the offered load."""

    def __init__(self, *args, **kwargs) -> None:
        self.sent: list[tuple[float, int]] = []
        super().__init__(*args, **kwargs)

    def _delivered(self, err, msg) -> None:
        super()._delivered(err, msg)
        if err is None:
            self.sent.append((msg.timestamp()[1] / 1000, len(msg.value())))

    def sent_rate(self, start: float, end: float) -> float:
        """Bytes per second produced in [start, end) (wall-clock seconds) and acknowledged."""
        return sum(size for at, size in list(self.sent) if start <= at < end) / (end - start)


def window(seconds: float) -> tuple[float, float]:
    """The next ``seconds`` of wall-clock time, waited through, plus time for the last acks."""
    start = time.time()
    time.sleep(seconds + 2)
    return start, start + seconds


@pytest.fixture(scope="module")
def service_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def shim_cluster(shim_jar: Path, service_port: int) -> Iterator[LocalKafkaCluster]:
    with running_shim_cluster(shim_jar, service_port) as cluster:
        yield cluster


def start_in_shadow(shim_cluster, start_service, service_port):
    before = broker_log_count(shim_cluster, SHIM_TABLE_LINE)
    service = start_service(
        http_port=str(service_port),
        kafka_admin_bootstrap_servers=shim_cluster.bootstrap_servers,
        admin_token=TOKEN,
        enforcement="shadow",
        **SERVICE_SETTINGS,
    )
    service.wait_for(lambda d: d["source"] == "observed" and d["state"] == "OPEN", 15, "observed OPEN")
    wait_for_shims(shim_cluster, before)
    return service


def pause_broker_1(shim_cluster, service) -> VolumeRamp:
    """Broker 1's volume below the hard limit at once, held there until freed."""
    ramp = VolumeRamp(shim_cluster.mount_point(1), HARD_LIMIT - 8 * MiB, HARD_LIMIT - 8 * MiB, 0.1)
    service.wait_for(lambda d: d["state"] == "PAUSE", 15, "PAUSE")
    return ramp


def set_enforcement(service, **body) -> float:
    response = service.client.put("/enforcement", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    return time.monotonic()


def test_shadow_mode_leaves_producers_alone_in_a_pause_and_switching_to_enforce_and_back_needs_no_broker_restart(
    shim_cluster, start_service, service_port, record_property
):
    service = start_in_shadow(shim_cluster, start_service, service_port)
    load = SentLoad({"bootstrap.servers": shim_cluster.bootstrap_servers}, rate_per_partition=RATE)
    ramp = None
    try:
        time.sleep(SETTLE)
        healthy = load.sent_rate(*window(MEASURE))
        assert healthy > 0.8 * 3 * RATE, f"the healthy cluster should take the offered load, got {healthy:.0f} B/s"
        would_before = broker_log_count(shim_cluster, WOULD_PAUSE)
        ramp = pause_broker_1(shim_cluster, service)
        decision = service.decision()
        assert (decision["state"], decision["enforced"], decision["breaching"][0]["broker_id"]) == ("PAUSE", False, 1)

        # Shadow: every shim logs the pause it would apply, once, and applies nothing.
        wait_until(
            lambda: all(n > would_before[b] for b, n in broker_log_count(shim_cluster, WOULD_PAUSE).items()),
            CHECK + 5, "every shim logging the pause it would apply", lambda: shim_lines(shim_cluster),
        )
        in_shadow = load.sent_rate(*window(MEASURE))
        assert service.decision()["state"] == "PAUSE"
        assert abs(in_shadow - healthy) <= 0.1 * healthy, f"in shadow {in_shadow:.0f} B/s, healthy {healthy:.0f} B/s"
        assert load.throttled_brokers(0) == {}, "a shim in shadow throttled a producer"
        counts = broker_log_count(shim_cluster, WOULD_PAUSE)
        assert all(counts[b] == would_before[b] + 1 for b in counts), f"logged once per change:\n{shim_lines(shim_cluster)}"

        # Enforce: the long-poll brings the switch to every shim; Kafka throttles at once.
        enforced_at = set_enforcement(service, mode="enforce")
        first = wait_until(
            lambda: len(load.throttled_brokers(enforced_at)) == 3, CHECK + 2 + 5, "produce throttled on all three brokers",
            lambda: f"first throttles {load.throttled_brokers(enforced_at)}\n{shim_lines(shim_cluster)}",
        )
        reaction = {b: round(at - enforced_at, 2) for b, at in load.throttled_brokers(enforced_at).items()}
        assert max(reaction.values()) <= CHECK + 2, f"throttled later than check interval + 2 s: {reaction}"
        time.sleep(4)
        enforced = load.rate(first + 1, first + 4)
        assert enforced < 0.2 * healthy, f"enforced pause {enforced:.0f} B/s vs healthy {healthy:.0f} B/s"
        assert all(broker_log_count(shim_cluster, "Throttle service shim: enforcing on broker")[b] >= 1 for b in shim_cluster.broker_ids)

        # Back to shadow: unthrottled again, once the throttles already served have run out.
        shadow_at = set_enforcement(service, mode="shadow")
        largest = max(t for _, _, t in load.throttles)  # seconds
        recovered = wait_until(
            lambda: load.rate(time.monotonic() - 1, time.monotonic()) > 0.5 * healthy, largest + 15, "throughput back in shadow"
        )
        again = load.sent_rate(*window(MEASURE))
        assert again >= 0.9 * healthy, f"back in shadow {again:.0f} B/s, healthy {healthy:.0f} B/s"
        late = [t for t in load.throttles if t[0] > shadow_at + largest + CHECK + 2]
        assert late == [], f"throttled after the switch back to shadow: {late[:5]}"
        restarts = [b for b in shim_cluster.broker_ids if shim_cluster.server_log(b).read_text(errors="replace").count("Throttle service shim: polling") != 1]
        assert restarts == [], "no broker restarted"
        record_property("enforce_reaction_s", max(reaction.values()))
        record_property("shadow_recovery_s", round(recovered - shadow_at, 2))
        print(
            f"\nhealthy {healthy / MiB:.2f} MiB/s; PAUSE in shadow {in_shadow / MiB:.2f} MiB/s;"
            f" switched to enforce -> throttled per broker {reaction} s, then {enforced / 1024:.0f} KiB/s;"
            f" back to shadow -> {again / MiB:.2f} MiB/s after {recovered - shadow_at:.2f} s (largest throttle {largest:.2f} s)"
        )
    finally:
        load.stop()
        if ramp is not None:
            ramp.free()


def test_with_a_canary_broker_only_its_clients_are_throttled(shim_cluster, start_service, service_port):
    service = start_in_shadow(shim_cluster, start_service, service_port)
    # One producer per partition (one per leader) so each broker's clients are measured alone.
    loads = {broker: SentLoad({"bootstrap.servers": shim_cluster.bootstrap_servers}, partitions=[broker - 1], rate_per_partition=RATE)
             for broker in (1, 2, 3)}
    ramp = None
    try:
        time.sleep(SETTLE)
        start, end = window(MEASURE)
        healthy = {b: load.sent_rate(start, end) for b, load in loads.items()}
        ramp = pause_broker_1(shim_cluster, service)
        refused = service.client.put("/enforcement", json={"mode": "enforce", "canary_brokers": [7]}, headers=AUTH)
        assert refused.status_code == 409 and "broker 7 is not registered" in refused.text
        assert service.decision()["enforced"] is False, "the refused change changed nothing"
        canary_at = set_enforcement(service, mode="enforce", canary_brokers=[2])
        decision = service.decision()
        assert (decision["enforced"], decision["canary_brokers"]) == (True, [2])
        wait_until(lambda: loads[2].throttled_brokers(canary_at), CHECK + 2 + 5, "the canary broker's clients throttled",
                   lambda: shim_lines(shim_cluster))
        time.sleep(2)
        start, end = window(MEASURE)
        rates = {b: load.sent_rate(start, end) for b, load in loads.items()}
        assert rates[2] < 0.2 * healthy[2], f"canary broker 2: {rates[2]:.0f} B/s, healthy {healthy[2]:.0f}"
        for broker in (1, 3):
            # Never throttled is what the brokers report; the rate only guards against gross slowdowns.
            assert loads[broker].throttles == [], f"broker {broker} is not a canary, yet throttled"
            assert rates[broker] >= 0.8 * healthy[broker], f"broker {broker}: {rates[broker]:.0f} B/s, healthy {healthy[broker]:.0f}"
        for broker in (1, 3):
            assert "not a canary broker [2]" in shim_cluster.server_log(broker).read_text(errors="replace")
        print(f"\ncanary broker 2 throttled to {rates[2] / 1024:.0f} KiB/s; brokers 1 and 3 at {rates[1] / MiB:.2f} and {rates[3] / MiB:.2f} MiB/s")
    finally:
        for load in loads.values():
            load.stop()
        if ramp is not None:
            ramp.free()
