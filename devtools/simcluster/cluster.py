"""The simulated cluster at run time: one listening port per broker on loopback, on an asyncio
event loop of its own thread, and the controls a test or benchmark drives it with.

A client bootstraps from any broker, learns every broker's advertised host and port from
Metadata or DescribeCluster and connects to each, exactly as with a real cluster: N brokers are
N ports and, from one client, N connections. Every control runs on the event loop, so a change
is in force for the next request any broker reads, and a control returns once it is."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.protocol.metadata import ApiVersionsRequest

from . import answers
from .state import Broker, ClusterState, LogDir, MiB, new_cluster
from .wire import UnsupportedRequest, decode_request, encode_response, frame_size, peek_api

log = logging.getLogger(__name__)

T = TypeVar("T")



def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # a faster loop leaves more of a small machine to the client under test
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class SimulatedCluster:
    """``SimulatedCluster(brokers=1000, log_dirs_per_broker=12).start()``; then
    ``bootstrap_servers``, the controls (``set_usable_bytes``, ``fence``, ``take_log_dir_offline``,
    ``freeze_broker``, ``stop_broker``...) and ``stop()``. Also a context manager."""

    def __init__(
        self,
        brokers: int = 3,
        log_dirs_per_broker: int = 1,
        total_bytes: int = 64 * MiB,
        usable_bytes: int | None = None,
        host: str = "127.0.0.1",
        state: ClusterState | None = None,
    ) -> None:
        self.state = state or new_cluster(brokers, log_dirs_per_broker, total_bytes, usable_bytes, host)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: dict[int, asyncio.base_events.Server] = {}
        self._connections: dict[int, set[asyncio.StreamWriter]] = {broker_id: set() for broker_id in self.state.brokers}
        self._thawed: dict[int, asyncio.Event] = {}

    # -- life -------------------------------------------------------------------------------
    def start(self) -> SimulatedCluster:
        ready = threading.Event()
        self._loop = _new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.call_soon(ready.set)
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, name="simulated-kafka-cluster", daemon=True)
        self._thread.start()
        ready.wait()
        self._run(self._start_all)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        self._run(self._stop_all)
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """Three brokers' addresses, as a client is usually configured."""
        first = sorted(self.state.brokers.values(), key=lambda b: b.broker_id)[:3]
        return ",".join(f"{b.host}:{b.port}" for b in first)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.state.brokers)

    def broker_port(self, broker_id: int) -> int:
        return self.state.brokers[broker_id].port

    def log_dirs(self, broker_id: int) -> list[str]:
        return [log_dir.path for log_dir in self.state.brokers[broker_id].log_dirs]

    def connections(self) -> int:
        """Client connections open to all brokers now."""
        return self._run_sync(lambda: sum(len(writers) for writers in self._connections.values()))

    # -- controls: volumes ------------------------------------------------------------------
    def set_usable_bytes(self, broker_id: int, usable_bytes: int, index: int | None = None) -> None:
        """The free bytes of one log dir's volume (``index``), or of all of the broker's."""
        self._run_sync(lambda: [setattr(d, "usable_bytes", usable_bytes) for d in self._dirs(broker_id, index)])

    def set_total_bytes(self, broker_id: int, total_bytes: int, index: int | None = None) -> None:
        self._run_sync(lambda: [setattr(d, "total_bytes", total_bytes) for d in self._dirs(broker_id, index)])

    def take_log_dir_offline(self, broker_id: int, index: int = 0) -> None:
        self._run_sync(lambda: [setattr(d, "offline", True) for d in self._dirs(broker_id, index)])

    def bring_log_dir_online(self, broker_id: int, index: int = 0) -> None:
        self._run_sync(lambda: [setattr(d, "offline", False) for d in self._dirs(broker_id, index)])

    # -- controls: registration -------------------------------------------------------------
    def fence(self, broker_id: int) -> None:
        """Fenced: still registered (DescribeCluster lists it with IncludeFencedBrokers), gone
        from Metadata. The broker itself keeps answering unless stopped or frozen."""
        self._run_sync(lambda: setattr(self._broker(broker_id), "fenced", True))

    def unfence(self, broker_id: int) -> None:
        self._run_sync(lambda: setattr(self._broker(broker_id), "fenced", False))

    def unregister(self, broker_id: int) -> None:
        """Gone from DescribeCluster altogether (kafka-cluster unregister)."""
        self._run_sync(lambda: setattr(self._broker(broker_id), "registered", False))

    # -- controls: the broker process -------------------------------------------------------
    def freeze_broker(self, broker_id: int) -> None:
        """Keeps its connections and reads requests but answers none (like SIGSTOP) until thawed."""
        self._run_sync(lambda: self._set_frozen(broker_id, True))

    def thaw_broker(self, broker_id: int) -> None:
        """Answers the requests it held, and the next ones."""
        self._run_sync(lambda: self._set_frozen(broker_id, False))

    def stop_broker(self, broker_id: int, fenced: bool = True) -> None:
        """Closes its port and connections. A broker that shuts down is fenced at once; one that
        dies (``fenced=False``) stays unfenced until its session expires: call ``fence`` then."""
        self._run(self._stop_broker, broker_id, fenced)

    def start_broker(self, broker_id: int) -> None:
        """Listens again on its port, registered and unfenced."""
        self._run(self._start_broker, broker_id)

    # -- the event loop side ----------------------------------------------------------------
    def _run(self, coroutine: Callable[..., Any], *args: Any) -> Any:
        assert self._loop is not None, "the simulated cluster is not started"
        return asyncio.run_coroutine_threadsafe(coroutine(*args), self._loop).result(30)

    def _run_sync(self, function: Callable[[], T]) -> T:
        async def call() -> T:
            return function()

        return self._run(call)

    def _broker(self, broker_id: int) -> Broker:
        try:
            return self.state.brokers[broker_id]
        except KeyError:
            raise ValueError(f"no broker {broker_id}; brokers are {min(self.state.brokers)}..{max(self.state.brokers)}") from None

    def _dirs(self, broker_id: int, index: int | None) -> list[LogDir]:
        dirs = self._broker(broker_id).log_dirs
        if index is None:
            return dirs
        if not 0 <= index < len(dirs):
            raise ValueError(f"broker {broker_id} has log dirs 0..{len(dirs) - 1}, not {index}")
        return [dirs[index]]

    def _set_frozen(self, broker_id: int, frozen: bool) -> None:
        self._broker(broker_id).frozen = frozen
        if frozen:
            self._thawed[broker_id].clear()
        else:
            self._thawed[broker_id].set()

    async def _start_all(self) -> None:
        for broker_id, broker in self.state.brokers.items():
            self._thawed[broker_id] = asyncio.Event()
            if not broker.frozen:
                self._thawed[broker_id].set()
            if broker.listening:
                await self._listen(broker)

    async def _stop_all(self) -> None:
        for broker_id in list(self._servers):
            await self._close(broker_id)

    async def _listen(self, broker: Broker) -> None:
        server = await asyncio.start_server(
            lambda reader, writer: self._serve(broker, reader, writer), broker.host, broker.port, reuse_address=True, backlog=128
        )
        broker.port = server.sockets[0].getsockname()[1]
        broker.listening = True
        self._servers[broker.broker_id] = server

    async def _close(self, broker_id: int) -> None:
        server = self._servers.pop(broker_id, None)
        if server is not None:
            server.close()
        for writer in list(self._connections[broker_id]):
            writer.close()
        if server is not None:
            await server.wait_closed()

    async def _stop_broker(self, broker_id: int, fenced: bool) -> None:
        broker = self._broker(broker_id)
        broker.listening = False
        if fenced:
            broker.fenced = True
        await self._close(broker_id)

    async def _start_broker(self, broker_id: int) -> None:
        broker = self._broker(broker_id)
        if broker_id not in self._servers:
            await self._listen(broker)
        broker.registered, broker.fenced = True, False

    async def _serve(self, broker: Broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections = self._connections[broker.broker_id]
        connections.add(writer)
        try:
            while True:
                payload = await reader.readexactly(frame_size(await reader.readexactly(4)))
                await self._thawed[broker.broker_id].wait()
                writer.write(self._answer(broker, payload))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except UnsupportedRequest as exc:
            log.warning("broker %d: closing a connection after a request it cannot answer (%s)", broker.broker_id, exc)
        finally:
            connections.discard(writer)
            writer.close()

    def _answer(self, broker: Broker, payload: bytes) -> bytes:
        api_key, version, correlation_id = peek_api(payload)
        if api_key == ApiVersionsRequest.API_KEY and version > answers.API_VERSIONS[api_key][1]:
            return encode_response(answers.unsupported_api_versions(), correlation_id)
        header, request = decode_request(payload)
        if request.name == "ApiVersionsRequest":
            response = answers.api_versions(request)
        elif request.name == "MetadataRequest":
            response = answers.metadata(request, self.state)
        elif request.name == "DescribeClusterRequest":
            response = answers.describe_cluster(request, self.state)
        else:
            response = answers.describe_log_dirs(request, broker)
        return encode_response(response, header.correlation_id)
