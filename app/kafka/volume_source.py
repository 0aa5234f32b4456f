"""Volume observations from a Kafka cluster through kafka-python's admin client.

One round: DescribeCluster for the active (unfenced) brokers, then DescribeLogDirs with an
empty topic list to every active broker at once. An empty topic list makes the broker
answer with each log dir's TotalBytes/UsableBytes (v4+, KIP-827) but no partitions, so the
answer stays small on brokers with thousands of partitions.

kafka-python's public ``describe_log_dirs`` asks the brokers one after another and has no
per-request timeout, so the requests are issued here through the admin client's connection
manager, concurrently, each bounded by the request timeout: a round costs about as much as
the slowest broker, and one slow or dead broker only marks the round incomplete. This runs on
a worker thread (kafka-python blocks); the HTTP side never waits on it. The DescribeLogDirs
request and its answer are encoded and decoded by app/kafka/log_dirs_wire.py, for the fields a
round reads (TotalBytes and UsableBytes are -1 below v4, as the brokers before Kafka 3.3 send
none), and DescribeCluster's answer by app/kafka/cluster_wire.py (the broker ids and fences).
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from typing import Any

import kafka.errors as kafka_errors
from kafka.future import Future

from app.clock import Clock, system_clock
from app.kafka.admin_connection import AdminConnection
from app.kafka.cluster_wire import ClusterRequest, ClusterResponse
from app.kafka.log_dirs_wire import LogDirsRequest, LogDirsResponse
from app.kafka.tls import TlsFiles, TlsMaterialError
from app.observation.model import ObservationRound, VolumeObservation, admin_observation

log = logging.getLogger(__name__)

# DescribeCluster goes to this many brokers at once; the first answer wins.
DESCRIBE_CLUSTER_FANOUT = 3


class _ClientErrors(logging.Handler):
    """Keeps the recent errors kafka-python logged, so a failed round can say why.

    kafka-python logs a connection or authentication failure on every attempt; the service
    silences that logger (one line per change of state is ours to write) and puts the
    cause into the round's error instead: a security failure if there was one, as that is
    what an operator has to fix, else the latest error."""

    _SECURITY = ("Authentication", "Authorization", "Sasl", "SASL", "SSL", "certificate")

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self._recent: deque[tuple[float, str]] = deque(maxlen=32)

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Bootstrap failed"):
            return  # the summary the round reports anyway
        self._recent.append((record.created, message.split("Connection lost: ", 1)[-1]))

    def since(self, moment: float) -> str | None:
        messages = [message for created, message in list(self._recent) if created >= moment]
        security = [m for m in messages if any(word in m for word in self._SECURITY)]
        chosen = security or messages
        return chosen[-1] if chosen else None


CLIENT_ERRORS = _ClientErrors()
logging.getLogger("kafka").addHandler(CLIENT_ERRORS)


def _error_name(code: int) -> str:
    error = kafka_errors.for_code(code)
    return getattr(error, "message", error.__name__)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class KafkaVolumeSource:
    def __init__(
        self,
        bootstrap_servers: str,
        request_timeout_seconds: float,
        admin_config: dict[str, Any] | None = None,
        clock: Clock = system_clock,
        client_id: str = "kafka-throttle-service",
        tls: TlsFiles | None = None,
        interval_seconds: float = 1.0,
    ) -> None:
        self._timeout_ms = max(1, int(request_timeout_seconds * 1000))
        self._clock = clock
        self._connection = AdminConnection(
            bootstrap_servers,
            self._timeout_ms,
            {"client_id": client_id, **(admin_config or {})},
            tls=tls,
            round_interval_ms=int(interval_seconds * 1000),
        )
        self._tls = tls
        # DescribeLogDirs version used per broker in the latest round (for diagnostics/tests).
        self.log_dirs_versions: dict[int, int] = {}
        # Partitions listed in the latest round's answers: 0 as long as the empty topic list works.
        self.topics_listed = 0
        # Per broker, the DescribeLogDirs version kafka-python negotiated on its connection, and
        # what it negotiated from: the connection's BrokerVersionData (see _send_log_dirs).
        self._negotiated: dict[int, tuple[Any, int]] = {}

    @property
    def connection(self) -> AdminConnection:
        return self._connection

    def _reload_tls_if_changed(self) -> None:
        """Rebuild the connection when a certificate, key or trust store changed on disk: open
        connections keep the old material for as long as they live otherwise."""
        changed = self._connection.tls_changed()
        if changed:
            log.info(
                "admin client TLS files changed (%s): reconnecting with the new material",
                ", ".join(changed),
            )
            self._connection.rebuild()

    def close(self) -> None:
        self._connection.close()

    def observe(self) -> ObservationRound:
        started = self._clock()
        wall_started = time.time()
        self._reload_tls_if_changed()
        try:
            registered = self._connection.run(self._describe_cluster)
        except TlsMaterialError as exc:
            return ObservationRound(
                started, self._clock(), error=f"admin client TLS material unusable: {exc}"
            )
        except Exception as exc:  # noqa: BLE001 - any failure is a failed round, reported as such
            self._connection.rebootstrap()  # ask the bootstrap servers afresh next round
            error = f"DescribeCluster failed: {_describe(exc)}"
            cause = CLIENT_ERRORS.since(wall_started)
            if cause and cause not in error:
                error += f"; client error: {cause}"
            return ObservationRound(started, self._clock(), error=error)
        active, fenced = registered
        if not active:
            return ObservationRound(
                started,
                self._clock(),
                fenced_brokers=fenced,
                error="DescribeCluster listed no active broker",
            )
        try:
            answers = self._connection.run(self._describe_log_dirs, active)
        except Exception as exc:  # noqa: BLE001 - any failure is a failed round, reported as such
            self._connection.rebootstrap()
            return ObservationRound(
                started,
                self._clock(),
                active,
                fenced_brokers=fenced,
                error=f"DescribeLogDirs failed: {_describe(exc)}",
            )
        finished = self._clock()
        observations: list[VolumeObservation] = []
        missing: dict[int, str] = {}
        topics_listed = 0
        for broker_id in active:
            answer = answers[broker_id]
            if isinstance(answer, BaseException):
                missing[broker_id] = _describe(answer)
                continue
            response: LogDirsResponse
            response, self.log_dirs_versions[broker_id] = answer
            if response.error_code:
                missing[broker_id] = f"DescribeLogDirs error {_error_name(response.error_code)}"
                continue
            results = response.results
            observations += [  # a round builds 12,000 of them at 1,000 brokers
                admin_observation(
                    broker_id, log_dir, total, usable, finished, _error_name(code) if code else None
                )
                for code, log_dir, total, usable, _ in results
            ]
            for result in results:
                topics_listed += result[4]
        self.topics_listed = topics_listed
        if len(missing) == len(active):
            self._connection.rebootstrap()
        return ObservationRound(
            started, finished, active, tuple(observations), missing, fenced_brokers=fenced
        )

    async def _describe_cluster(self, manager: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ids of the active (unfenced) brokers and of the fenced ones: KRaft keeps a broker
        that stopped or halted registered, but fenced (listed with IncludeFencedBrokers, KIP-1073).

        The request goes to up to three brokers at once and the first answer wins, so one
        hung broker cannot fail the round (kafka-python's describe_cluster asks a single one)."""
        nodes = [broker.node_id for broker in manager.cluster.brokers()]
        random.shuffle(nodes)
        asked = nodes[:DESCRIBE_CLUSTER_FANOUT] or [None]
        first_answer = Future()
        failures: list[BaseException] = []

        def on_success(response: Any) -> None:
            if not first_answer.is_done:
                first_answer.success(response)

        def on_failure(exc: BaseException) -> None:
            # Counted against every broker asked, not those asked so far: a send can fail at
            # once (a broker in reconnect backoff), before the others are asked.
            failures.append(exc)
            if len(failures) == len(asked) and not first_answer.is_done:
                first_answer.failure(exc)

        for node_id in asked:
            request = ClusterRequest()  # kafka-python's request; its answer decoded for the ids
            try:
                future = manager.send(request, node_id=node_id, request_timeout_ms=self._timeout_ms)
            except Exception as exc:  # noqa: BLE001 - a node not asked is one more failure; others may answer
                future = Future().failure(exc)
            future.add_callback(on_success)
            future.add_errback(on_failure)
        response: ClusterResponse = await manager.wait_for(first_answer, self._timeout_ms)
        if response.error_code:
            raise kafka_errors.for_code(response.error_code)(response.error_message or "")
        fenced = tuple(sorted(broker_id for broker_id, is_fenced in response.brokers if is_fenced))
        active = tuple(
            sorted(broker_id for broker_id, is_fenced in response.brokers if not is_fenced)
        )
        return active, fenced

    def _send_log_dirs(self, manager: Any, broker_id: int, request: LogDirsRequest) -> Future:
        """``manager.send(request, node_id=broker_id, request_timeout_ms=...)``, as kafka-python's
        manager sends it (the broker's connection, or a failed future when it is in reconnect
        backoff), with the version negotiated on the same connection in an earlier round set
        beforehand: kafka-python negotiates the version of every request it sends (from the
        broker's API versions, a pure function of them), some microseconds each, 1,000 a round.
        The version is reused only while the connection is up and keeps the same
        BrokerVersionData (a reconnection negotiates afresh, as does a connection still
        starting: its requests wait and are negotiated when it is ready)."""
        try:
            connection = manager.get_connection(broker_id)
        except kafka_errors.NodeNotReadyError as exc:
            return Future().failure(exc)
        versions = connection.broker_version_data
        ready = versions is not None and connection.connected and not connection.initializing
        known = self._negotiated.get(broker_id) if ready else None
        if known is not None and known[0] is versions:
            request.API_VERSION = known[1]
        else:
            known = None  # kafka-python negotiates it now (or when the connection is ready)
        future = connection.send_request(request, request_timeout_ms=self._timeout_ms)
        if ready and known is None and request.API_VERSION is not None:
            self._negotiated[broker_id] = (versions, request.API_VERSION)
        return future

    async def _describe_log_dirs(self, manager: Any, broker_ids: tuple[int, ...]) -> dict[int, Any]:
        """Send DescribeLogDirs to every broker before awaiting any answer, then await them all
        under one deadline: one request timeout for the whole fan-out. Answers are collected by
        callbacks into one future, so a round arms one timer however many brokers there are."""
        answers: dict[int, Any] = {}
        if any(manager.cluster.broker_metadata(b) is None for b in broker_ids):
            # DescribeCluster named a broker the client's metadata has not seen yet (a broker
            # that just started): refresh the metadata once so it can be reached this round.
            try:
                await manager.wait_for(
                    manager.call_soon(manager.cluster.refresh_metadata), self._timeout_ms
                )
            except Exception:
                log.debug("metadata refresh failed", exc_info=True)
        all_answered = Future()

        def settle(broker_id: int, answer: Any) -> None:
            # Complete once every broker has its answer, not every one asked so far: a send can
            # fail at once (a broker in reconnect backoff), before the others are asked.
            answers[broker_id] = answer
            if len(answers) == len(broker_ids) and not all_answered.is_done:
                all_answered.success(None)

        for broker_id in broker_ids:
            request = LogDirsRequest()  # an empty topic list: log dirs only, no partitions
            try:
                future = self._send_log_dirs(manager, broker_id, request)
            except Exception as exc:  # noqa: BLE001 - e.g. a broker the client's metadata does not know yet
                settle(broker_id, exc)
                continue
            future.add_callback(
                lambda response, b=broker_id, r=request: settle(b, (response, r.API_VERSION))
            )
            future.add_errback(lambda exc, b=broker_id: settle(b, exc))
        if not all_answered.is_done:
            try:
                await manager.wait_for(all_answered, self._timeout_ms)
            except kafka_errors.KafkaTimeoutError:
                pass  # the brokers that did not answer in time are missing from this round
        unanswered = kafka_errors.KafkaTimeoutError(f"Timed out after {self._timeout_ms} ms")
        for broker_id in self._negotiated.keys() - set(broker_ids):
            del self._negotiated[broker_id]  # not asked this round: forgotten
        return {
            broker_id: answers.get(broker_id, unanswered) for broker_id in broker_ids
        }  # a copy: late answers do not change it
