"""A loopback stand-in of the service for the broker shim alone, in tests and benchmarks that
prove the shim inside real Kafka nodes without the real service.

It answers the two things the shim asks: ``GET /quotas`` (a quota table in the service's shape,
an ETag, a ``?wait=`` long-poll held until the table changes, then 304) and ``PUT
/nodes/{id}/volumes`` (each report recorded with its Authorization header, answered 204). It
counts the bytes each kind of request took on the wire, both ways (request line, headers and
body; status line, headers and body), so a benchmark can say what the shim costs a node."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import BinaryIO
from urllib.parse import parse_qs, urlparse

QUOTAS = "quotas"
REPORTS = "reports"


def quota_table(mutation_factor: float = 1.0, **fields: object) -> dict:
    """A quota table in the service's shape: no quotas of its own, factor 1, the given mutation
    factor; ``fields`` replace entries (e.g. ``factor=0.0, state="PAUSE"``)."""
    return {
        "defaults": {},
        "overrides": [],
        "groups": [],
        "excluded_principals": [],
        "factor": 1.0,
        "factor_types": ["produce"],
        "floors": {"produce": 65536, "fetch": 65536, "request": 1, "controller_mutation": 1},
        "state": "OPEN",
        "source": "observed",
        "valid_until": None,
        "enforced": True,
        "canary_brokers": [],
        "mutation_factor": mutation_factor,
        **fields,
    }


@dataclass(frozen=True)
class Report:
    at: float  # time.monotonic() when it arrived
    node_id: int
    authorization: str | None
    body: dict


@dataclass
class Traffic:
    """What one kind of request took on the wire."""

    requests: int = 0
    bytes_in: int = 0  # request line, headers and body, as the shim sent them
    bytes_out: int = 0  # status line, headers and body, as the stand-in answered


class _CountingWriter:
    def __init__(self, raw: BinaryIO, count: Callable[[int], None]) -> None:
        self._raw = raw
        self._count = count

    def write(self, data: bytes) -> int:
        self._count(len(data))
        return self._raw.write(data)

    def flush(self) -> None:
        self._raw.flush()

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def close(self) -> None:
        self._raw.close()


class StandInService:
    """``GET /quotas`` and ``PUT /nodes/{id}/volumes`` on 127.0.0.1, a free port."""

    def __init__(self, mutation_factor: float = 1.0) -> None:
        self.reports: list[Report] = []
        self.traffic = {QUOTAS: Traffic(), REPORTS: Traffic()}
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        self._generation = 0
        self._table = quota_table(mutation_factor)
        self._closed = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def table(self, mutation_factor: float = 1.0, **fields: object) -> None:
        """Publishes a table with this mutation factor (and ``fields``, see ``quota_table``):
        held long-polls answer at once."""
        with self._changed:
            self._table = quota_table(mutation_factor, **fields)
            self._generation += 1
            self._changed.notify_all()

    def last_reports(self) -> dict[int, Report]:
        """Each node's latest report."""
        return {report.node_id: report for report in list(self.reports)}

    def report_counts(self, since: float = 0.0) -> dict[int, int]:
        counts: dict[int, int] = {}
        for report in list(self.reports):
            if report.at >= since:
                counts[report.node_id] = counts.get(report.node_id, 0) + 1
        return counts

    def traffic_snapshot(self) -> dict[str, Traffic]:
        with self._lock:
            return {kind: Traffic(t.requests, t.bytes_in, t.bytes_out) for kind, t in self.traffic.items()}

    def close(self) -> None:
        """Gone, as a stopped service is: new connections are refused, and held long-polls and
        requests on kept-alive connections have theirs closed without an answer."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, if_none_match: str | None, wait: float) -> tuple[bytes | None, str]:
        with self._changed:
            if if_none_match == self._etag():
                self._changed.wait_for(lambda: self._closed or if_none_match != self._etag(), timeout=wait)
            etag = self._etag()
            return (None if etag == if_none_match else json.dumps(self._table).encode()), etag

    def _etag(self) -> str:
        return f'"g{self._generation}"'

    def _count(self, kind: str, bytes_in: int = 0, bytes_out: int = 0, request: bool = False) -> None:
        with self._lock:
            traffic = self.traffic[kind]
            traffic.requests += int(request)
            traffic.bytes_in += bytes_in
            traffic.bytes_out += bytes_out

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the service answers the shim's HTTP/1.1 client

            def log_message(self, *args) -> None:  # the caller's output, not every poll
                pass

            kind = QUOTAS  # of the request being answered

            def handle_one_request(self) -> None:
                if not stand_in._closed:
                    super().handle_one_request()
                self.close_connection = self.close_connection or stand_in._closed

            def _gone(self) -> bool:
                """Closed: the connection ends without an answer."""
                self.close_connection = stand_in._closed
                return stand_in._closed

            def setup(self) -> None:
                super().setup()
                self.wfile = _CountingWriter(self.wfile, lambda n: stand_in._count(self.kind, bytes_out=n))

            def _start(self, kind: str, body: bytes) -> None:
                self.kind = kind
                head = len(self.requestline) + 2 + len(bytes(self.headers))
                stand_in._count(kind, bytes_in=head + len(body), request=True)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                self._start(QUOTAS, b"")
                if url.path != "/quotas":
                    self._send(404)
                    return
                wait = float(parse_qs(url.query).get("wait", ["0"])[0])
                body, etag = stand_in._answer(self.headers.get("If-None-Match"), wait)
                if self._gone():
                    return
                self._send(304 if body is None else 200, body or b"", {"ETag": etag})

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self._gone():
                    return
                self._start(REPORTS, body)
                parts = urlparse(self.path).path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "nodes" or parts[2] != "volumes" or not parts[1].isdigit():
                    self._send(404)
                    return
                report = Report(time.monotonic(), int(parts[1]), self.headers.get("Authorization"), json.loads(body))
                stand_in.reports.append(report)
                self._send(204)

            def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                if status not in (204, 304):
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if body:
                    self.wfile.write(body)
                self.wfile.flush()

        return Handler
