"""The round's fan-out of DescribeCluster and DescribeLogDirs over kafka-python's manager,
driven by a fake manager that behaves as kafka-python's does where it matters here: a send to
a broker in reconnect backoff returns a future that has already failed, and ``wait_for`` on a
finished future returns at once, delivering nothing else."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kafka.errors as kafka_errors
import pytest
from kafka.future import Future

from app.kafka.volume_source import KafkaVolumeSource


class FakeManager:
    def __init__(self, in_backoff: set[int], answers: dict[int, Any]) -> None:
        self.in_backoff = in_backoff
        self.answers = answers
        self.in_flight: list[tuple[int, Future]] = []
        self.cluster = SimpleNamespace(
            broker_metadata=lambda broker_id: object(),
            brokers=lambda: [SimpleNamespace(node_id=b) for b in sorted(answers)],
        )

    def send(self, request: Any, node_id: int, request_timeout_ms: int) -> Future:
        if node_id in self.in_backoff:
            return Future().failure(kafka_errors.NodeNotReadyError(node_id))
        future = Future()
        self.in_flight.append((node_id, future))
        return future

    def get_connection(self, node_id: int) -> Any:  # DescribeLogDirs goes through the connection
        if node_id in self.in_backoff:
            raise kafka_errors.NodeNotReadyError(node_id)
        return SimpleNamespace(
            broker_version_data=None,
            connected=True,
            initializing=False,
            send_request=lambda request, request_timeout_ms: self.send(request, node_id, request_timeout_ms),
        )

    async def wait_for(self, future: Future, timeout_ms: int) -> Any:
        if not future.is_done:  # the network delivers what is in flight
            for node_id, in_flight in self.in_flight:
                in_flight.success(self.answers[node_id])
        if not future.is_done:
            raise kafka_errors.KafkaTimeoutError()
        if future.failed():
            raise future.exception
        return future.value


@pytest.fixture
def source():
    source = KafkaVolumeSource("127.0.0.1:9", request_timeout_seconds=1.0)
    yield source
    source.close()


@pytest.mark.parametrize("in_backoff", [1, 2, 3])
def test_a_broker_failing_at_send_leaves_the_others_answered(source, in_backoff):
    manager = FakeManager({in_backoff}, {1: "answer 1", 2: "answer 2", 3: "answer 3"})
    answers = asyncio.run(source._describe_log_dirs(manager, (1, 2, 3)))
    assert isinstance(answers[in_backoff], kafka_errors.NodeNotReadyError)
    for broker_id in {1, 2, 3} - {in_backoff}:
        response, _version = answers[broker_id]
        assert response == f"answer {broker_id}", answers


def test_every_broker_failing_at_send_ends_the_fan_out_at_once(source):
    manager = FakeManager({1, 2}, {1: "answer 1", 2: "answer 2"})
    answers = asyncio.run(source._describe_log_dirs(manager, (1, 2)))
    assert all(isinstance(answer, kafka_errors.NodeNotReadyError) for answer in answers.values())


def test_describe_cluster_asks_the_others_when_the_first_fails_at_send(source):
    cluster = SimpleNamespace(error_code=0, brokers=[(b, False) for b in (1, 2, 3)])  # (id, fenced)
    for in_backoff in ({1}, {1, 2}):
        manager = FakeManager(in_backoff, {1: cluster, 2: cluster, 3: cluster})
        assert asyncio.run(source._describe_cluster(manager)) == ((1, 2, 3), ())


def test_describe_cluster_fails_once_every_broker_asked_has_failed(source):
    manager = FakeManager({1, 2, 3}, {1: None, 2: None, 3: None})
    with pytest.raises(kafka_errors.NodeNotReadyError):
        asyncio.run(source._describe_cluster(manager))
