"""The nodes' volume reports answered inside the HTTP connection, before any ASGI machinery.

A node's report (``PUT /nodes/{node_id}/volumes``) is the service's most frequent request: 1,000
nodes at the shim's one-second poll interval are 1,000 a second. The direct route
(app/server/edge/direct_route.py) already skips FastAPI's routing and parsing; what is left of a
report's cost sits around it: a task per request, a dozen middleware layers each wrapping the
send, the response built as ASGI messages and serialised by uvicorn. ``ReportLane`` answers a
plain report from the connection itself (app/server/edge/http_protocol.py): once the whole body
is in, it is read as the route's own body model reads it (straight into the report's own
objects: app/server/api/schemas/nodes.py's ``plain_report``), the service takes it, and
``204 No Content`` with the server's default headers is written to the transport, all in one
synchronous call on the event loop; the HTTP metrics count it under the route as before.

Only a report that every layer would let through unchanged is answered here, decided from its
head before its body is read: PUT on the route's path with a canonical id in range and no query,
HTTP/1.1 kept alive, no ``Expect``, one ``Content-Type: application/json``, a Content-Length
within the node report's body limit (no chunked body), and the node token (compared in constant
time). Anything else, a body the model refuses, and a report the service refuses (unknown node,
too soon: refusals that change nothing, so asking again gives the same answer) goes to the app as
it came, body and all, and is answered, audited and counted there exactly as before."""

from __future__ import annotations

import hmac
from collections.abc import Callable

from fastapi import FastAPI

from app.observation.node_reports import NodeVolume, node_report
from app.server.edge.admission import NODE_REPORT_MAX_BYTES, bearer_of
from app.server.edge.direct_route import JSON_TYPE, DirectlyServed

NO_CONTENT = b"HTTP/1.1 204 No Content\r\n"
# A report's roles and volumes, as its body gives them.
PlainReport = tuple[frozenset[str], tuple[NodeVolume, ...]]


class ReportLane:
    """What a connection needs to answer a plain node report itself.

    ``take(node_id, body)`` reads a report's body and offers it: it says whether the service
    took it (a body the route's model takes, and ``Service.offer_node_report`` answered no
    refusal); ``count(duration)`` counts an answered report in the HTTP metrics."""

    def __init__(
        self,
        served: DirectlyServed,
        node_token: bytes,
        max_body_bytes: int,
        take: Callable[[int, bytes], bool],
        count: Callable[[float], None],
    ) -> None:
        self.served = served
        self.node_token = node_token
        self.max_body_bytes = min(max_body_bytes, NODE_REPORT_MAX_BYTES)
        self._take = take
        self.count = count
        self.prefix, self.suffix = served.prefix.encode(), served.suffix.encode()
        self.answered = 0  # reports answered here (for tests and diagnostics)
        # The 204 of a kept-alive connection, for the server's default headers it was made with
        # (the server replaces its list when its date changes, once a second).
        self._answer_for: list[tuple[bytes, bytes]] | None = None
        self._answer = b""

    @classmethod
    def for_app(
        cls,
        app: FastAPI,
        served: DirectlyServed,
        node_token: bytes,
        max_body_bytes: int,
        count: Callable[[float], None],
        read: Callable[[bytes], PlainReport | None],
    ) -> ReportLane:
        """``read``: a body's roles and volumes, when the route's body model takes it."""

        def take(node_id: int, body: bytes) -> bool:
            plain = read(body)
            if plain is None:
                return False
            roles, volumes = plain
            return (
                app.state.service.offer_node_report(
                    node_id, lambda now: node_report(node_id, roles, volumes, now)
                )
                is None
            )

        return cls(served, node_token, max_body_bytes, take, count)

    def node_of(self, method: bytes, url: bytes, headers: list[tuple[bytes, bytes]]) -> int | None:
        """The node id of a report this lane may answer, judged from its head; None when the app
        answers it."""
        if method != b"PUT" or not url.startswith(self.prefix) or not url.endswith(self.suffix):
            return None
        node_id = self.served.path_value(
            url[len(self.prefix) : len(url) - len(self.suffix)].decode("latin-1")
        )
        if node_id is None:
            return None
        # One pass over the headers: their names in lower case, as the server gives them; the
        # first Authorization is the one (as bearer_credentials reads it).
        content_type = length = authorization = None
        for name, value in headers:
            if name == b"content-type":
                if content_type is not None:
                    return None
                content_type = value.lower()
            elif name == b"content-length":
                length = value
            elif name == b"authorization":
                if authorization is None:
                    authorization = value
            elif name in (b"transfer-encoding", b"expect"):
                return None
        if content_type != JSON_TYPE or length is None or not length.isdigit():
            return None
        if int(length) > self.max_body_bytes:
            return None
        credentials = bearer_of(authorization or b"")
        if credentials is None or not hmac.compare_digest(credentials, self.node_token):
            return None
        return node_id

    def answer(self, default_headers: list[tuple[bytes, bytes]], close: bool = False) -> bytes:
        """``no_content(default_headers, close)``, made once a second for kept-alive connections."""
        if close:
            return no_content(default_headers, close=True)
        if default_headers is not self._answer_for:
            self._answer = no_content(default_headers)
            self._answer_for = default_headers
        return self._answer

    def take(self, node_id: int, body: bytes) -> bool:
        """Validate and offer the report: True when taken (answer 204), False when the app must
        answer it (a body the model refuses, a refusal of the service)."""
        if not self._take(node_id, body):
            return False
        self.answered += 1
        return True


def no_content(default_headers: list[tuple[bytes, bytes]], close: bool = False) -> bytes:
    """``204 No Content`` with the server's default headers (its date, its name), as uvicorn
    writes the app's 204 (``close``: on a connection closed after it)."""
    headers = b"".join(name + b": " + value + b"\r\n" for name, value in default_headers)
    return NO_CONTENT + headers + (b"connection: close\r\n\r\n" if close else b"\r\n")
