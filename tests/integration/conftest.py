"""Fixtures for tests against a real Apache Kafka cluster and the real service over HTTP."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.cluster import _free_ports
from devtools.commands import read_log, start_logged
from devtools.processes import healthz_answers, service_environment, stop_process
from devtools.devcluster.shim import build_shim

MiB = 1024 * 1024
VOLUME_MIB = 64
ROOT = Path(__file__).resolve().parents[2]
SASL_USERS = {"throttle": "throttle-secret", "producer": "producer-secret"}


# Modules whose tests run in one process per parameter, each parameter's on clusters of its own
# (one Kafka version each); every other module runs all its tests in one process.
GROUP_PER_PARAMETER = {"tests/integration/test_kafka_versions.py"}


def group_of(nodeid: str) -> str:
    """The group a test runs in, by its id: its module, or for GROUP_PER_PARAMETER its module
    and parameter."""
    module, _, rest = nodeid.partition("::")
    if module in GROUP_PER_PARAMETER and rest.endswith("]") and "[" in rest:
        return f"{module}[{rest.rsplit('[', 1)[1]}"
    return module


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201 (xdist's types)
    """With several test processes (``pytest -n N --dist loadgroup``, as ``make test`` runs
    them), the tests of a group (``group_of``) run in one process, in order, on the clusters
    their module fixtures start once; groups go to whichever process is free. (pytest-xdist's
    own loadgroup reads ``xdist_group`` marks into the test ids, which pytest 9 no longer lets
    it change, so every test became a group of its own.)"""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)


def pytest_itemcollected(item: pytest.Item) -> None:
    # each test's process in the JUnit XML report (property "worker")
    item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[LocalKafkaCluster]:
    if os.geteuid() != 0:
        pytest.fail("the integration tests mount tmpfs log dirs and must run as root")
    cluster = LocalKafkaCluster(
        brokers=3,
        log_dir_size_mib=VOLUME_MIB,
        # A SASL/PLAIN listener gives principals (admin client auth, excluded principals).
        extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
        broker_config={
            # Brokers that stop are fenced quickly, so DescribeCluster drops them within seconds.
            "broker.heartbeat.interval.ms": "500",
            "log.segment.delete.delay.ms": "500",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                "org.apache.kafka.common.security.plain.PlainLoginModule required "
                + " ".join(f'user_{user}="{password}"' for user, password in SASL_USERS.items())
                + ";"
            ),
        },
        controller_config={"broker.session.timeout.ms": "3000"},
    )
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def free_port() -> int:
    """A free port for a service, from the same pool as the brokers' (below the ephemeral range,
    this test process's own part of it when the tests run in several): a service stopped and
    started again on its port finds it still free."""
    return _free_ports(1)[0]


class RunningService:
    def __init__(self, process: subprocess.Popen, base_url: str, log_path: Path, verify: str | bool = True, env: dict[str, str] | None = None) -> None:
        self.process = process
        self.env = env or {}  # the environment it was started with
        self.base_url = base_url
        self.log_path = log_path
        if isinstance(verify, str):
            verify = ssl.create_default_context(cafile=verify)
        self.client = httpx.Client(base_url=base_url, timeout=10, verify=verify)

    def decision(self) -> dict:
        response = self.client.get("/throttle-factor")
        response.raise_for_status()
        return response.json()

    def wait_for(self, predicate: Callable[[dict], bool], timeout: float, what: str) -> tuple[dict, float]:
        started = time.monotonic()
        decision: dict = {}
        while time.monotonic() - started < timeout:
            decision = self.decision()
            if predicate(decision):
                return decision, time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"not {what} within {timeout}s; last decision: {decision}\nservice log:\n{self.log()[-3000:]}")

    def wait_ready(self, timeout: float = 30) -> None:
        """Until /readyz answers 200 (with the Kafka quota store: its topic read)."""
        deadline = time.monotonic() + timeout
        while self.client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, f"not ready within {timeout} s:\n{self.log()[-3000:]}"
            time.sleep(0.1)

    def log(self) -> str:
        return read_log(self.log_path)

    def stop(self) -> None:
        self.client.close()
        stop_process(self.process)


def wait_until_healthy(service: RunningService, timeout: float = 90) -> RunningService:
    """``service`` once /healthz answers; stopped, and the test failed with its log, when it
    exits (at once) or does not answer in time. The time is a margin, not a claim (the tests of
    start-up time have their own bounds): with the integration tests in several processes on a
    small machine, a service's imports alone took over 30 s."""
    if healthz_answers(service.client, service.process, timeout):
        return service
    exited = service.process.poll() is not None
    service.stop()
    if exited:
        raise AssertionError(f"service exited with {service.process.returncode}:\n{service.log()}")
    raise AssertionError(f"service did not start:\n{service.log()}")


def launch_service(
    work_dir: Path,
    extra_env: dict[str, str] | None = None,
    ready_url: str | None = None,
    ready_verify: str | bool = True,
    preexec_fn: Callable[[], None] | None = None,
    **settings: str,
) -> RunningService:
    """Start ``throttle-service`` (the real console entry point) with settings by field name, its
    data and log under ``work_dir``; returns once /healthz answers. ``preexec_fn`` runs in the
    child before it starts (e.g. to lower its resource limits)."""
    port = int(settings.get("http_port", 0)) or free_port()
    env = service_environment(port, work_dir / f"data-{port}", settings)
    env.update(extra_env or {})
    log_path = work_dir / f"service-{port}.log"
    process = start_logged([sys.executable, "-m", "app"], log_path, cwd=ROOT, env=env, preexec_fn=preexec_fn)
    service = RunningService(process, ready_url or f"http://127.0.0.1:{port}", log_path, verify=ready_verify, env=env)
    return wait_until_healthy(service)


@pytest.fixture
def start_service(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., RunningService]]:
    """Start ``throttle-service`` (the real console entry point) with settings by field name;
    the bootstrap servers default to the session's Kafka cluster."""
    services: list[RunningService] = []

    def start(
        extra_env: dict[str, str] | None = None, ready_url: str | None = None, ready_verify: str | bool = True, **settings: str
    ) -> RunningService:
        if "kafka_admin_bootstrap_servers" not in settings and settings.get("storage_check_interval") != "PT0S":
            settings["kafka_admin_bootstrap_servers"] = request.getfixturevalue("kafka_cluster").bootstrap_servers
        services.append(launch_service(tmp_path, extra_env, ready_url, ready_verify, **settings))
        return services[-1]

    yield start
    for service in services:
        service.stop()


def create_topic_on(cluster: LocalKafkaCluster, topic: str, broker_id: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[broker_id]])])[topic]
    future.result(timeout=30)


def delete_topic(cluster: LocalKafkaCluster, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.delete_topics([topic])[topic].result(timeout=30)


def fill(cluster: LocalKafkaCluster, topic: str, mib: int, client_config: dict | None = None) -> list:
    """Write ``mib`` MiB of incompressible data into ``topic`` and wait for every ack; returns the
    throttle events the brokers reported. ``client_config`` replaces the plaintext bootstrap
    (e.g. a SASL listener and principal)."""
    throttles: list = []
    producer = Producer(
        {
            **(client_config or {"bootstrap.servers": cluster.bootstrap_servers}),
            "acks": "all",
            "linger.ms": 5,
            "compression.type": "none",
            "throttle_cb": throttles.append,
        }
    )
    chunk = 256 * 1024
    errors: list[str] = []
    for _ in range(mib * MiB // chunk):
        while True:
            try:
                producer.produce(topic, os.urandom(chunk), on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(60)
    assert remaining == 0 and not errors, (remaining, errors[:3])
    return [event for event in throttles if event.throttle_time > 0]


@pytest.fixture(scope="session")
def shim_jar() -> Path:
    return build_shim()
