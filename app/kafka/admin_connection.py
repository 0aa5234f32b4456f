"""The one admin connection of the service: built once, reused by every round, rebuilt only
when it is broken.

kafka-python's ``KafkaAdminClient`` starts its IO thread and then bootstraps inside its
constructor; when the bootstrap fails the constructor raises and the caller never gets the
object that owns the thread and its sockets. A service that builds a new client each round
while the cluster is unreachable therefore leaks a thread and a few file descriptors per
round. This class holds kafka-python's connection layer (``KafkaNetClient``: the IO loop and
the connection manager) directly, so nothing is built that cannot be closed: the IO thread
starts once, and an unreachable cluster only means "not bootstrapped yet" for the next round.

kafka-python 3.0 does not close a socket whose connect fails (refused, timed out): the socket
lives on in a reference cycle through the exception until the garbage collector runs, so an
unreachable cluster holds dozens of descriptors at a time. ``_close_on_failed_connect`` closes
it at once.

Retry pacing belongs to the rounds: the reconnect backoff never exceeds a round, and a broker
that refused a login is tried again next round (kafka-python would otherwise remember the
refusal for the life of the client).

The IO loop is kafka-python's, with the costs that grow with the number of brokers removed
(``app/kafka/network_selector.py``), and its plain TCP connections send a request at once and
read an answer with one ``recv`` instead of two (``app/kafka/tcp_transport.py``)."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from kafka import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka.net.inet import KafkaNetSocket

from app.kafka.network_selector import ScalingNetworkSelector
from app.kafka.tcp_transport import with_plain_transport
from app.kafka.tls import TlsFiles
from app.redaction import shown_value

log = logging.getLogger(__name__)

T = TypeVar("T")


def _close_on_failed_connect(connect: Callable[..., Any]) -> Callable[..., Any]:
    async def connect_or_close(
        self: KafkaNetSocket,
        net: Any,
        addrinfo: Any,
        socket_options: Any = (),
        timeout_at: Any = None,
    ) -> Any:
        opened: list[Any] = []
        make_socket = self.socket

        def socket_kept(*args: Any) -> Any:
            opened.append(make_socket(*args))
            return opened[-1]

        self.socket = socket_kept
        try:
            return await connect(self, net, addrinfo, socket_options, timeout_at)
        except BaseException:
            for sock in opened:
                sock.close()
            raise
        finally:
            del self.socket

    # a mark on the function, so that a second import does not wrap it twice
    connect_or_close.closes_failed_sockets = True  # type: ignore[attr-defined]
    return connect_or_close


if not getattr(KafkaNetSocket.connect, "closes_failed_sockets", False):
    KafkaNetSocket.connect = _close_on_failed_connect(KafkaNetSocket.connect)


class AdminConnection:
    def __init__(
        self,
        bootstrap_servers: str,
        timeout_ms: int,
        config: dict[str, Any],
        tls: TlsFiles | None = None,
        round_interval_ms: int = 1000,
    ) -> None:
        unknown = set(config) - set(KafkaAdminClient.DEFAULT_CONFIG)
        if unknown:
            raise ValueError(f"unknown admin client settings: {sorted(unknown)}")
        self._config = {
            **copy.copy(KafkaAdminClient.DEFAULT_CONFIG),
            # The rounds are the retry schedule: every broker is tried again at least once a round.
            "reconnect_backoff_max_ms": max(50, min(round_interval_ms, 1000)),
            **config,
            "bootstrap_servers": bootstrap_servers,
            "request_timeout_ms": timeout_ms,
        }
        self._timeout_ms = timeout_ms
        self._tls = tls
        self._tls_loaded: tuple[tuple[str, str], ...] | None = None
        self._client: KafkaNetClient | None = None
        self._needs_bootstrap = True
        self._lock = threading.Lock()
        self.builds = 0  # how many times the connection layer was built (for tests and diagnostics)

    # -- life -------------------------------------------------------------------------------
    def _build(self) -> KafkaNetClient:
        config = dict(self._config)
        if self._tls is not None:
            self._tls_loaded = self._tls.fingerprint()
            config["ssl_context"] = self._tls.context()  # reads the files now; may raise
        # The service hides secrets by key in its own lines; they are not scrubbed by value.
        shown = {k: shown_value(k, v) for k, v in config.items()}
        log.debug("building the admin connection with %s", shown)
        client = KafkaNetClient(net=ScalingNetworkSelector(**config), metrics=None, **config)
        # kafka-python 3.0 builds each connection's transport in this private method of its manager
        manager = client._manager  # noqa: SLF001
        manager._build_transport = with_plain_transport(manager._build_transport)  # noqa: SLF001
        try:
            # kafka-python 3.0 starts its IO thread only through the client's private network
            client._net.start()  # noqa: SLF001
        except BaseException:
            client.close()
            raise
        self.builds += 1
        self._needs_bootstrap = True
        return client

    def _broken(self, client: KafkaNetClient) -> bool:
        # kafka-python 3.0 tells of a dead IO thread or a closed manager only through private members
        net, manager = client._net, client._manager  # noqa: SLF001
        thread, failure = net._io_thread, net._exception  # noqa: SLF001
        return manager.closed or failure is not None or thread is None or not thread.is_alive()

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.close()  # closes every connection, stops and joins the IO thread
        except Exception:  # closing a broken client must not break the round
            log.debug("closing the admin connection failed", exc_info=True)

    def tls_changed(self) -> list[str]:
        """The TLS files that changed on disk since the connection was built (empty if none)."""
        if self._tls is None or self._tls_loaded is None:
            return []
        current = self._tls.fingerprint()
        if current == self._tls_loaded:
            return []
        return [
            path
            for (path, digest), (_, before) in zip(current, self._tls_loaded)
            if digest != before
        ] or ["paths"]

    def rebuild(self) -> None:
        """Close now; the next round builds afresh (new TLS material, say)."""
        with self._lock:
            self._close_locked()

    def rebootstrap(self) -> None:
        """Ask the bootstrap servers for the cluster's brokers again at the next round."""
        self._needs_bootstrap = True

    # -- use --------------------------------------------------------------------------------
    def run(self, coroutine: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """Run ``coroutine(manager, *args)`` on the IO thread, bootstrapping first if needed.
        Raises what the bootstrap or the coroutine raised."""
        with self._lock:
            if self._client is not None and self._broken(self._client):
                log.info("admin connection broken: rebuilding it")
                self._close_locked()
            if self._client is None:
                self._client = self._build()
            manager = self._client._manager  # noqa: SLF001 - kafka-python 3.0 runs requests only through it
            manager.run(self._fresh_round, manager)
            if self._needs_bootstrap or not manager.bootstrapped:
                manager.bootstrap(self._timeout_ms)  # raises KafkaTimeoutError when unreachable
                self._needs_bootstrap = False
            return manager.run(coroutine, manager, *args)

    @staticmethod
    async def _fresh_round(manager: Any) -> None:
        # A login refused in an earlier round is tried again: credentials or ACLs may have been fixed.
        manager._auth_failures.clear()  # noqa: SLF001 - kafka-python 3.0 keeps refused logins there
