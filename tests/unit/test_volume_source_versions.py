"""DescribeLogDirs' version, negotiated by kafka-python on a broker's connection, is reused in
later rounds while that connection is up with the same broker versions, and negotiated afresh
otherwise (a reconnection, a connection still starting, a broker asked again after a pause);
a send goes where kafka-python's manager sends it, with the same failures. The connection here
negotiates as kafka-python's does (``KafkaConnection._send_request``: only a request without
a version, from its ``broker_version_data``), and counts it."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import kafka.errors as kafka_errors
import pytest
from kafka.future import Future
from kafka.net.connection import KafkaConnection
from kafka.net.manager import KafkaConnectionManager
from kafka.protocol.broker_version_data import BrokerVersionData

from app.kafka.log_dirs_wire import LogDirsRequest
from app.kafka.volume_source import KafkaVolumeSource


def _versions(high: int) -> BrokerVersionData:
    return BrokerVersionData(api_versions={18: (0, 3), 35: (1, high)})


class Connection:
    def __init__(self, versions: BrokerVersionData | None) -> None:
        self.broker_version_data = versions
        self.connected = True
        self.initializing = False
        self.negotiations = 0
        self.sent: list[int | None] = []

    def send_request(self, request: Any, request_timeout_ms: int | None = None) -> Future:
        future = Future()
        if self.initializing:
            self.sent.append(None)  # buffered: negotiated when the connection is ready
            return future
        if not self.connected:
            return future.failure(kafka_errors.KafkaConnectionError("Node not connected"))
        if request.API_VERSION is None:
            self.negotiations += 1
            request.API_VERSION = self.broker_version_data.api_version(request)
        self.sent.append(request.API_VERSION)
        return future


class Manager:
    def __init__(self, connections: dict[int, Connection]) -> None:
        self.connections = connections
        self.in_backoff: set[int] = set()

    def get_connection(self, node_id: int) -> Connection:
        if node_id in self.in_backoff:
            raise kafka_errors.NodeNotReadyError(node_id)
        if node_id not in self.connections:
            raise kafka_errors.UnknownBrokerIdError(node_id)
        return self.connections[node_id]


@pytest.fixture
def source():
    source = KafkaVolumeSource("127.0.0.1:9", request_timeout_seconds=1.0)
    yield source
    source.close()


def _send(source, manager, broker_id) -> tuple[LogDirsRequest, Future]:
    request = LogDirsRequest()
    return request, source._send_log_dirs(manager, broker_id, request)


def test_the_version_negotiated_once_is_reused_on_the_same_connection(source):
    connection = Connection(_versions(4))
    manager = Manager({1: connection})
    for _ in range(5):
        request, _ = _send(source, manager, 1)
        assert request.API_VERSION == 4
    assert connection.negotiations == 1 and connection.sent == [4] * 5


def test_a_reconnection_with_other_broker_versions_negotiates_afresh(source):
    manager = Manager({1: Connection(_versions(4))})
    _send(source, manager, 1)
    downgraded = Connection(_versions(3))  # the broker came back an older release
    manager.connections[1] = downgraded
    for _ in range(3):
        request, _ = _send(source, manager, 1)
        assert request.API_VERSION == 3
    assert downgraded.negotiations == 1
    upgraded = Connection(_versions(5))
    manager.connections[1] = upgraded
    assert _send(source, manager, 1)[0].API_VERSION == 5 and upgraded.negotiations == 1


def test_a_connection_still_starting_is_left_to_negotiate_when_ready(source):
    connection = Connection(_versions(4))
    manager = Manager({1: connection})
    _send(source, manager, 1)
    connection.initializing = True
    request, _ = _send(source, manager, 1)
    assert request.API_VERSION is None and connection.sent[-1] is None
    fresh = Connection(None)  # no broker versions known yet
    manager.connections[1] = fresh
    fresh.initializing = True
    request, _ = _send(source, manager, 1)
    assert request.API_VERSION is None


def test_a_send_on_a_closed_connection_fails_as_kafka_pythons_and_remembers_nothing(source):
    connection = Connection(_versions(4))
    connection.connected = False
    manager = Manager({1: connection})
    request, future = _send(source, manager, 1)
    assert future.failed() and isinstance(future.exception, kafka_errors.KafkaConnectionError)
    assert source._negotiated == {}


def test_a_broker_in_backoff_gives_a_failed_future_and_an_unknown_one_raises_as_the_manager_does(source):
    manager = Manager({})
    manager.in_backoff.add(1)
    _, future = _send(source, manager, 1)
    assert future.failed() and isinstance(future.exception, kafka_errors.NodeNotReadyError)
    with pytest.raises(kafka_errors.UnknownBrokerIdError):
        _send(source, manager, 2)


def test_a_broker_not_asked_in_a_round_is_forgotten(source):
    connections = {1: Connection(_versions(4)), 2: Connection(_versions(4))}
    manager = Manager(connections)
    manager.cluster = type("Cluster", (), {"broker_metadata": staticmethod(lambda b: object())})()

    async def wait_for(future, timeout_ms):
        raise kafka_errors.KafkaTimeoutError()

    manager.wait_for = wait_for
    asyncio.run(source._describe_log_dirs(manager, (1, 2)))
    assert set(source._negotiated) == {1, 2}
    asyncio.run(source._describe_log_dirs(manager, (1,)))
    assert set(source._negotiated) == {1}
    asyncio.run(source._describe_log_dirs(manager, (1, 2)))
    assert connections[2].negotiations == 2 and connections[1].negotiations == 1


def test_kafka_python_still_sends_and_negotiates_as_the_source_relies_on():
    """``KafkaConnectionManager.send`` is ``get_connection`` (NodeNotReadyError: a failed
    future) then ``send_request``; a connection negotiates only a request without a version,
    from its ``broker_version_data``, and buffers requests while ``initializing``."""
    send = inspect.getsource(KafkaConnectionManager.send)
    assert "conn = self.get_connection(node_id)" in send
    assert "except Errors.NodeNotReadyError as e:" in send and "return Future().failure(e)" in send
    assert "return conn.send_request(request, request_timeout_ms=request_timeout_ms)" in send
    assert str(inspect.signature(KafkaConnection.send_request)) == "(self, request, request_timeout_ms=None)"
    negotiation = inspect.getsource(KafkaConnection._send_request)
    assert "if request.API_VERSION is None:" in negotiation
    assert "request.API_VERSION = self.broker_version_data.api_version(request)" in negotiation
    assert "if self.initializing" in inspect.getsource(KafkaConnection.send_request)
    for name in ("broker_version_data", "connected", "initializing"):
        assert f"self.{name} = " in inspect.getsource(KafkaConnection), name
