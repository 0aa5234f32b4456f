"""N simulated broker shims polling the service's quota table as the Java shim does, for load tests.

What one shim does (shim/src/main/java/io/kafkathrottle/shim/QuotaFeed.java, TableFetcher.java):
a first ``GET /quotas`` without condition; then, over the same HTTP/1.1 connection, ``GET
/quotas?wait=30`` with ``If-None-Match`` and the ETag of the table it holds, again as soon as
the answer comes. A 200 is a new table (its ETag, its validity); a 304 renews the validity of
the table held from ``Throttle-Valid-Until``. Any other answer, a connection error or no
answer within the request timeout plus the wait drops the ETag and waits the poll interval
before asking again, unconditionally. The defaults are the shim's (long-poll wait 30 s, poll
interval 5 s, request timeout 10 s).

A shim keeps of a table only what a load test needs: its ETag, its ``state`` and when it
arrived. Bodies are counted, not kept, so a thousand shims receiving a table of 10,000
overrides at once cost the test little more than the kernel's copies. Every shim counts the
bytes it sent and received (status lines, headers, bodies)."""

from __future__ import annotations

import asyncio
import re
import time
import zlib
from dataclasses import dataclass, field

SHIM_LONG_POLL_WAIT_SECONDS = 30.0
SHIM_POLL_INTERVAL_SECONDS = 5.0
SHIM_REQUEST_TIMEOUT_SECONDS = 10.0
_STATE = re.compile(rb'"state":"([A-Z_]+)"')
_TAIL_BYTES = 512  # the table's last fields (factor, state, source, valid_until) are in its tail


@dataclass
class Table:
    etag: str
    state: str | None
    received_at: float  # time.time()
    size: int


@dataclass
class ShimStats:
    table: Table | None = None
    tables: list[Table] = field(default_factory=list)
    not_modified: int = 0
    failures: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0


@dataclass
class _Response:
    status: int
    headers: dict[str, str]
    tail: bytes
    size: int
    body: bytes | None = None  # kept only when compressed

class _HttpConnection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: a request at a time, the body counted and its tail kept."""

    def __init__(self, stats: ShimStats) -> None:
        self._stats = stats
        self._transport: asyncio.Transport | None = None
        self._head = bytearray()
        self._status = 0
        self._headers: dict[str, str] = {}
        self._remaining = -1  # body bytes still expected; -1: reading the head
        self._tail = b""
        self._size = 0
        self._body: bytearray | None = None
        self._answer: asyncio.Future[_Response] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(exc or ConnectionResetError("the service closed the connection"))

    def request(self, head: bytes) -> asyncio.Future[_Response]:
        assert self._transport is not None
        self._answer = asyncio.get_running_loop().create_future()
        self._head.clear()
        self._remaining, self._tail, self._size, self._body = -1, b"", 0, None
        self._transport.write(head)
        self._stats.bytes_sent += len(head)
        return self._answer

    def data_received(self, data: bytes) -> None:
        self._stats.bytes_received += len(data)
        if self._remaining < 0:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(self._head[:end]).decode("latin-1").split("\r\n")
            self._status = int(lines[0].split(" ", 2)[1])
            self._headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
            data = bytes(self._head[end + 4 :])
            self._remaining = 0 if self._status == 304 else int(self._headers.get("content-length", "0"))
            self._body = bytearray() if self._headers.get("content-encoding") == "gzip" else None
        if self._body is not None:
            self._body += data
        self._size += len(data)
        self._remaining -= len(data)
        self._tail = (self._tail + data[-_TAIL_BYTES:])[-_TAIL_BYTES:]
        if self._remaining <= 0 and self._answer is not None and not self._answer.done():
            body = bytes(self._body) if self._body is not None else None
            self._answer.set_result(_Response(self._status, self._headers, self._tail, self._size, body))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class PollingShims:
    """``shims = PollingShims("127.0.0.1", 8080, count=1000)``; ``await shims.run()`` until
    ``shims.stop()``; ``shims.stats`` per shim, read at any time."""

    def __init__(
        self,
        host: str,
        port: int,
        count: int,
        wait_seconds: float = SHIM_LONG_POLL_WAIT_SECONDS,
        poll_interval_seconds: float = SHIM_POLL_INTERVAL_SECONDS,
        request_timeout_seconds: float = SHIM_REQUEST_TIMEOUT_SECONDS,
        token: str | None = None,
        ramp_seconds: float = 0.0,
        accept_encoding: str | None = "gzip",
    ) -> None:
        self._host, self._port = host, port
        self._wait = wait_seconds
        self._poll_interval = poll_interval_seconds
        self._timeout = request_timeout_seconds
        self._token = token
        self._ramp = ramp_seconds
        self._accept_encoding = accept_encoding  # gzip, as the Java shim sends; None for none
        self._inflated_tails: dict[str, bytes] = {}
        self.stats = [ShimStats() for _ in range(count)]
        self._stopping: asyncio.Event | None = None

    def _tail_of(self, response: _Response) -> bytes:
        """The table's tail, where its state is. A compressed table is inflated once per ETag:
        a thousand shims in one process inflating the same table would measure this process."""
        if response.headers.get("content-encoding") != "gzip":
            return response.tail
        etag = response.headers.get("etag", "")
        if etag not in self._inflated_tails:
            self._inflated_tails[etag] = zlib.decompress(response.body or b"", 31)[-_TAIL_BYTES:]
        return self._inflated_tails[etag]

    def _request(self, etag: str | None) -> bytes:
        # The shim's URL: ?wait= in seconds, BigDecimal.valueOf(millis, 3).stripTrailingZeros()
        wait = f"{self._wait:.3f}".rstrip("0").rstrip(".")
        target = "/quotas" if etag is None or self._wait == 0 else f"/quotas?wait={wait}"
        lines = [f"GET {target} HTTP/1.1", f"Host: {self._host}:{self._port}", "User-Agent: Java-http-client/21", "Accept: application/json"]
        if self._accept_encoding is not None:
            lines.append(f"Accept-Encoding: {self._accept_encoding}")
        if etag is not None:
            lines.append(f"If-None-Match: {etag}")
        if self._token is not None:
            lines.append(f"Authorization: Bearer {self._token}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def run(self) -> None:
        self._stopping = asyncio.Event()
        shims = [asyncio.create_task(self._poll(index)) for index in range(len(self.stats))]
        await self._stopping.wait()
        for shim in shims:
            shim.cancel()
        await asyncio.gather(*shims, return_exceptions=True)

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def _poll(self, index: int) -> None:
        stats = self.stats[index]
        await asyncio.sleep(self._ramp * index / max(len(self.stats), 1))
        loop = asyncio.get_running_loop()
        connection: _HttpConnection | None = None
        etag: str | None = None
        try:
            while True:
                try:
                    if connection is None or connection.closed:
                        _, connection = await asyncio.wait_for(
                            loop.create_connection(lambda: _HttpConnection(stats), self._host, self._port), self._timeout
                        )
                    timeout = self._timeout + (self._wait if etag is not None else 0.0)
                    response = await asyncio.wait_for(connection.request(self._request(etag)), timeout)
                except (OSError, TimeoutError, ConnectionError):
                    response = None
                if response is not None and response.status == 304:
                    stats.not_modified += 1
                    continue
                if response is not None and response.status == 200:
                    match = _STATE.search(self._tail_of(response))
                    etag = response.headers.get("etag")
                    stats.table = Table(etag or "", match.group(1).decode() if match else None, time.time(), response.size)
                    stats.tables.append(stats.table)
                    if etag is not None and self._wait > 0:
                        continue
                else:
                    stats.failures += 1
                    etag = None  # the next answer must be a whole table
                    if connection is not None:
                        connection.close()
                        connection = None
                await asyncio.sleep(self._poll_interval)
        finally:
            if connection is not None:
                connection.close()
