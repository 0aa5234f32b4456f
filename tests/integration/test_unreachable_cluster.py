"""Long outages: the service keeps answering and holds no more threads or files after hundreds
of failed rounds than after the first ones, whether the cluster refuses connections, was never
there, or hangs; and it observes again as soon as the cluster is back.

The service runs with a low limit of open files (128), so a leak of a few descriptors per
round would stop it answering within the test."""

from __future__ import annotations

import resource
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.resources import ProcessResources, process_resources

from .conftest import VOLUME_MIB, RunningService, free_port

FILE_LIMIT = 128
FAILED_ROUNDS = 300
FAST = {
    "storage_check_interval": "PT0.1S",
    "kafka_request_timeout": "PT0.05S",
    "throttle_factor_validity_duration": "PT5S",
    "storage_per_volume_limit_min_available_bytes": str(8 * 1024 * 1024),
}
# Rounds in flight open a connection or two at any moment; a leak grows without bound.
THREAD_SLACK = 2
FILE_SLACK = 4


@pytest.fixture(scope="module")
def lone_broker() -> Iterator[LocalKafkaCluster]:
    cluster = LocalKafkaCluster(
        brokers=1,
        log_dir_size_mib=VOLUME_MIB,
        broker_config={"broker.heartbeat.interval.ms": "500"},
        controller_config={"broker.session.timeout.ms": "3000"},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


class Watch:
    """Polls /throttle-factor every 0.1 s on its own thread and keeps every failure."""

    def __init__(self, service: RunningService) -> None:
        self.failures: list[str] = []
        self.answers = 0
        self._client = httpx.Client(base_url=service.base_url, timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                status = self._client.get("/throttle-factor").status_code
                if status == 200:
                    self.answers += 1
                else:
                    self.failures.append(f"HTTP {status}")
            except httpx.HTTPError as exc:
                self.failures.append(repr(exc))
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._client.close()


def rounds(service: RunningService) -> int:
    return service.client.get("/readyz").json()["rounds"]


def wait_for_rounds(service: RunningService, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while rounds(service) < count:
        assert time.monotonic() < deadline, f"fewer than {count} rounds within {timeout} s:\n{service.log()[-2000:]}"
        time.sleep(0.2)


def resting(service: RunningService) -> ProcessResources:
    """The fewest threads and files seen over a second: what the process holds between rounds."""
    samples = []
    for _ in range(10):
        samples.append(process_resources(service.process.pid))
        time.sleep(0.1)
    return ProcessResources(
        min(s.threads for s in samples), min(s.open_files for s in samples), min(s.rss_kib for s in samples), samples[-1].cpu_seconds,
        samples[-1].peak_rss_kib,
    )


def limit_open_files(service: RunningService) -> None:
    resource.prlimit(service.process.pid, resource.RLIMIT_NOFILE, (FILE_LIMIT, FILE_LIMIT))


def assert_flat(before: ProcessResources, after: ProcessResources, what: str) -> None:
    assert after.threads - before.threads <= THREAD_SLACK, f"{what}: threads {before.threads} -> {after.threads}"
    assert after.open_files - before.open_files <= FILE_SLACK, f"{what}: open files {before.open_files} -> {after.open_files}"


def test_hundreds_of_failed_rounds_leak_no_thread_or_file_and_the_service_answers_throughout(lone_broker, start_service):
    cluster = lone_broker
    never_there = start_service(kafka_admin_bootstrap_servers=f"127.0.0.1:{free_port()}", **FAST)
    observing = start_service(kafka_admin_bootstrap_servers=cluster.bootstrap_servers, **FAST)
    for service in (never_there, observing):
        limit_open_files(service)
    watches = [Watch(never_there), Watch(observing)]
    try:
        observing.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 30, "observed")
        wait_for_rounds(never_there, 20, 30)
        never_there_first = resting(never_there)
        start = rounds(never_there)

        # The broker is killed: every round fails on a refused connection.
        cluster.kill_broker(1)
        observing.wait_for(lambda d: d["round"]["error"] is not None, 10, "rounds failing once the broker is gone")
        wait_for_rounds(observing, rounds(observing) + 20, 30)
        killed_first = resting(observing)
        wait_for_rounds(observing, rounds(observing) + FAILED_ROUNDS, FAILED_ROUNDS)
        killed_last = resting(observing)
        assert_flat(killed_first, killed_last, f"{FAILED_ROUNDS} rounds against a killed broker")
        cluster.start_broker(1)
        _, back = observing.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 30, "observed again")
        print(f"\nkilled broker: {killed_first} -> {killed_last}; observed again {back:.1f} s after the restart")

        # The broker is frozen: connections open, nothing answers, every request times out.
        cluster.freeze_broker(1)
        try:
            observing.wait_for(lambda d: d["round"]["error"] is not None, 10, "rounds failing while the broker hangs")
            wait_for_rounds(observing, rounds(observing) + 20, 30)
            frozen_first = resting(observing)
            wait_for_rounds(observing, rounds(observing) + FAILED_ROUNDS, FAILED_ROUNDS)
            frozen_last = resting(observing)
        finally:
            cluster.thaw_broker(1)
        assert_flat(frozen_first, frozen_last, f"{FAILED_ROUNDS} rounds against a frozen broker")
        _, back = observing.wait_for(lambda d: d["source"] == "observed" and d["round"]["complete"], 30, "observed after the thaw")
        print(f"frozen broker: {frozen_first} -> {frozen_last}; observed again {back:.1f} s after the thaw")

        never_there_last = resting(never_there)
        failed = rounds(never_there) - start
        assert failed >= 2 * FAILED_ROUNDS
        assert_flat(never_there_first, never_there_last, f"{failed} rounds against a port nobody listens on")
        print(f"never-there cluster: {never_there_first} -> {never_there_last} over {failed} rounds")
    finally:
        for watch in watches:
            watch.stop()
    for service, watch in zip((never_there, observing), watches):
        assert watch.failures == [], f"{service.base_url} stopped answering: {watch.failures[:3]}\n{service.log()[-2000:]}"
        assert watch.answers > 100


def test_a_silent_listener_that_accepts_and_never_answers_leaks_nothing(start_service):
    """A load balancer or a half-dead host in front of the cluster: TCP connects, Kafka never answers."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    held: list[tuple[float, socket.socket]] = []
    accepted = 0
    stop = threading.Event()

    def accept() -> None:
        nonlocal accepted
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append((time.monotonic(), listener.accept()[0]))
                accepted += 1
            except TimeoutError:
                pass
            # Each connection stays open, silent, for longer than the service waits on it.
            while held and held[0][0] < time.monotonic() - 2:
                held.pop(0)[1].close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        service = start_service(kafka_admin_bootstrap_servers=f"127.0.0.1:{listener.getsockname()[1]}", **FAST)
        limit_open_files(service)
        watch = Watch(service)
        try:
            wait_for_rounds(service, 20, 30)
            first = resting(service)
            wait_for_rounds(service, rounds(service) + FAILED_ROUNDS, FAILED_ROUNDS)
            last = resting(service)
        finally:
            watch.stop()
        assert_flat(first, last, f"{FAILED_ROUNDS} rounds against a silent listener")
        assert watch.failures == [] and watch.answers > 100
        assert service.decision()["round"]["error"].startswith("DescribeCluster failed")
        print(f"\nsilent listener: {first} -> {last}; {accepted} connections accepted")
    finally:
        stop.set()
        thread.join(5)
        for _, connection in held:
            connection.close()
        listener.close()
