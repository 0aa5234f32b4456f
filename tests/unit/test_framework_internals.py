"""The framework internals the service builds on, as they were when last verified.

Four modules reach below the frameworks' public surface (docs/architecture.md, "Framework
internals we rely on"):

- the HTTP edge's protocol (app/server/edge/http_protocol.py) subclasses uvicorn's httptools
  protocol: it overrides its connection and parser callbacks, calls its private
  ``_unset_keepalive_if_required``, reads the attributes the base keeps per connection and
  request, and drives an httptools parser of its own;
- the admin client's network selector (app/kafka/network_selector.py) overrides kafka-python's
  private timer methods and hands it a standard-library selector with ``get_key`` replaced;
- the admin connection (app/kafka/admin_connection.py) starts, checks and drives kafka-python's
  client through its private network and connection manager;
- the node report's direct route (app/server/edge/direct_route.py) reads FastAPI's description
  of the route it serves (``route.dependant``) and the app's exception handlers.

Each member is recorded here with its parameters (names, kinds and defaults, annotations left
out) as in uvicorn 0.54.0, httptools 0.9.0, kafka-python 3.0.12 and CPython 3.11. A release
that renames a member, changes its parameters or moves what the subclass reads fails here,
before it fails in production: re-read the new code, adapt the subclass, then the record."""

from __future__ import annotations

import hashlib
import inspect
import re
import selectors
import textwrap
from importlib.metadata import version
from typing import Annotated, Any

import httptools
import pytest
from annotated_types import Ge, Le
from fastapi import FastAPI, Path, Request
from fastapi.routing import APIRoute
from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector, Task, TaskState
from pydantic import BaseModel
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState


def parameters(member: Any) -> str:
    """``member``'s parameters as written, without annotations: ``(self, data, n=1, *, x=None)``."""
    signature = inspect.signature(member)
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def assigned_attributes(cls: type) -> set[str]:
    """The instance attributes ``cls``'s own code assigns (``self.name = ...``)."""
    return set(re.findall(r"\bself\.(\w+)\s*(?::[^=\n]+)?=(?!=)", inspect.getsource(cls)))


def source_digest(member: Any) -> str:
    return hashlib.sha256(textwrap.dedent(inspect.getsource(member)).encode()).hexdigest()[:16]


# --- uvicorn: the edge protocol's base -------------------------------------------------------

# Every method of HttpToolsProtocol the edge protocol overrides or calls.
UVICORN_PROTOCOL_METHODS = {
    "__init__": "(self, config, server_state, app_state, _loop=None)",
    "connection_made": "(self, transport)",
    "connection_lost": "(self, exc)",
    "data_received": "(self, data)",
    "on_message_begin": "(self)",
    "on_headers_complete": "(self)",
    "on_body": "(self, body)",  # a node report's body kept for the report lane, else the base's
    "on_message_complete": "(self)",
    "on_response_complete": "(self)",
    "shutdown": "(self)",  # the server stops: a report in the lane is answered first
    "_unset_keepalive_if_required": "(self)",  # private: the edge's marks the connection busy (called by the base's connection_lost too)
    "_start_asgi_task": "(self, cycle, app)",  # private: a pipelined request started when the one before is answered
    "timeout_keep_alive_handler": "(self)",  # closes an idle connection (the edge's idle timer calls it)
}
# What the edge protocol reads of the base's state: the parser (replaced for an ignored
# upgrade), the pipeline, the transport, the loop, the request cycle, the client's address and
# the request's target and headers as the base's callbacks collect them.
# The report lane (app/server/edge/report_lane.py) writes its 204 with the server state's
# default headers and answers only when the cycle before it is complete.
# The idle timer: the base's keep-alive timeout and the handle it keeps of its timer, which the
# edge arms at most once per connection (the base cancels it in _unset_keepalive_if_required,
# which the edge replaces).
UVICORN_PROTOCOL_ATTRIBUTES = (
    "parser", "pipeline", "transport", "loop", "cycle", "client", "url", "headers", "server_state",
    "flow", "timeout_keep_alive", "timeout_keep_alive_task",
    # the request's scope, made by the edge only for a request the app answers
    "scope", "expect_100_continue", "asgi_version", "server", "scheme", "root_path", "app_state",
)
UVICORN_CYCLE_ATTRIBUTES = ("response_started", "response_complete")
UVICORN_SERVER_STATE_ATTRIBUTES = ("default_headers", "total_requests")
# The base methods the edge replaces without calling them: what they did in the version
# verified, so that a change to them is looked at (the edge's versions must keep doing it).
UVICORN_REPLACED_SOURCES = {
    "data_received": "02c2572f1df55907",
    # the idle timer armed at most once per connection (app/server/edge/http_protocol.py)
    "on_response_complete": "5684fd801d0683ac",
    "_unset_keepalive_if_required": "58f4ffce604d92dd",
    # the scope made only for a request the app answers (a report the lane answers needs none)
    "on_message_begin": "0efab6f9456c4987",
}


@pytest.mark.parametrize(("name", "expected"), sorted(UVICORN_PROTOCOL_METHODS.items()))
def test_each_uvicorn_protocol_method_the_edge_overrides_or_calls_keeps_its_name_and_parameters(name, expected):
    member = getattr(HttpToolsProtocol, name, None)
    assert callable(member), f"HttpToolsProtocol.{name} is gone"
    assert parameters(member) == expected, f"HttpToolsProtocol.{name} changed its parameters"


def test_the_uvicorn_protocol_state_the_edge_reads_is_still_kept_by_the_base():
    missing = set(UVICORN_PROTOCOL_ATTRIBUTES) - assigned_attributes(HttpToolsProtocol)
    assert not missing, f"HttpToolsProtocol no longer sets {sorted(missing)}"
    missing = set(UVICORN_CYCLE_ATTRIBUTES) - assigned_attributes(RequestResponseCycle)
    assert not missing, f"RequestResponseCycle no longer sets {sorted(missing)}"
    missing = set(UVICORN_SERVER_STATE_ATTRIBUTES) - assigned_attributes(ServerState)
    assert not missing, f"ServerState no longer sets {sorted(missing)}"


@pytest.mark.parametrize(("name", "digest"), sorted(UVICORN_REPLACED_SOURCES.items()))
def test_the_uvicorn_methods_the_edge_replaces_are_the_ones_it_was_written_against(name, digest):
    assert source_digest(getattr(HttpToolsProtocol, name)) == digest, (
        f"uvicorn's HttpToolsProtocol.{name} changed: the edge's version replaces it without calling it"
    )


# --- httptools: the parser the edge drives itself ----------------------------------------------


class _Callbacks:
    def __init__(self) -> None:
        self.url = b""

    def on_url(self, url: bytes) -> None:
        self.url += url


def test_the_httptools_parser_methods_the_edge_calls_keep_their_names_and_parameters():
    parser = httptools.HttpRequestParser(_Callbacks())
    assert parameters(parser.feed_data) == "(data)"
    assert parameters(parser.get_http_version) == "()"
    assert parameters(parser.should_upgrade) == "()"
    # from httptools 0.6.3; the edge's parser, as uvicorn's own, tolerates data after a close
    assert "lenient_data_after_close" in inspect.signature(parser.set_dangerous_leniencies).parameters
    parser.set_dangerous_leniencies(lenient_data_after_close=True)


def test_an_httptools_upgrade_still_stops_at_the_head_and_says_where_the_rest_begins():
    """The edge serves an Upgrade request as HTTP/1.1: it feeds what follows the head, at the
    offset HttpParserUpgrade carries, to a parser of its own."""
    callbacks = _Callbacks()
    parser = httptools.HttpRequestParser(callbacks)
    head = b"POST /what-if HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 2\r\n\r\n"
    with pytest.raises(httptools.HttpParserUpgrade) as raised:
        parser.feed_data(head + b"{}")
    assert raised.value.args[0] == len(head)
    assert parser.should_upgrade() and parser.get_http_version() == "1.1" and callbacks.url == b"/what-if"


def test_the_httptools_errors_the_edge_tells_apart_keep_their_family():
    assert issubclass(httptools.HttpParserInvalidMethodError, httptools.HttpParserError)
    with pytest.raises(httptools.HttpParserInvalidMethodError):
        httptools.HttpRequestParser(_Callbacks()).feed_data(b"BREW / HTTP/1.1\r\n\r\n")


# --- kafka-python: the network selector's base ---------------------------------------------------

# Every NetworkSelector method the scaling selector overrides or calls, and how it is built.
KAFKA_SELECTOR_METHODS = {
    "__init__": "(self, **configs)",
    "_unschedule": "(self, task)",  # overridden: a cancelled timer stays in the heap
    "_schedule_tasks": "(self)",  # overridden: drops the cancelled timers as they come due
    "_add_ready_task": "(self, task)",  # called for a timer that came due, and a write tried at once
    "_wait_write": "(self, fileobj, timeout_at=None)",  # overridden: a task's first wait answered at once
    "wait_write": "(self, fileobj, timeout_at=None)",  # its kernel event, handled with the task as _current
    "call_at": "(self, when, task)",  # pushes (when, task) onto the heap the overrides read
    "cancel": "(self, task)",
    "reschedule": "(self, when, task)",
    "register_event": "(self, fileobj, event, task)",  # overridden: a lingering read interest taken up
    "unregister_event": "(self, fileobj, event)",  # overridden: a read interest left registered
    "_process_events": "(self, event_list)",  # overridden: readable with nobody waiting, dropped
    "_wait_io": "(self, fileobj, event, timeout_at)",  # registers, and unregisters when the wait ends
}


def test_kafka_python_still_registers_a_wait_and_keys_its_tasks_as_the_network_selector_reads_them():
    """A wait registers its socket with ``register_event`` and unregisters it with
    ``unregister_event``; a key's data is ``(reader task, writer task)``; the wakeup socket's
    key is ``_wakeup_r``'s."""
    wait = inspect.getsource(NetworkSelector._wait_io)
    assert "self.register_event(fileobj, event, suspended)" in wait
    assert "self.unregister_event(fileobj, event)" in wait
    assert "reader, writer = key.data" in inspect.getsource(NetworkSelector._process_events)
    assert "if fileobj is self._wakeup_r:" in inspect.getsource(NetworkSelector._process_events)


@pytest.mark.parametrize(("name", "expected"), sorted(KAFKA_SELECTOR_METHODS.items()))
def test_each_kafka_python_selector_method_the_network_selector_relies_on_keeps_its_parameters(name, expected):
    member = getattr(NetworkSelector, name, None)
    assert callable(member), f"NetworkSelector.{name} is gone"
    assert parameters(member) == expected, f"NetworkSelector.{name} changed its parameters"


def test_kafka_python_still_keeps_its_timers_as_the_network_selector_reads_them():
    """The overrides read the timer heap (``_scheduled``, entries ``(when, task)``) and each
    task's ``scheduled_at`` and ``state``; cancelling and rescheduling go through
    ``_unschedule``; the selector class comes from the ``selector`` setting, the network
    selector from KafkaNetClient's ``net`` argument."""
    assert "_scheduled" in assigned_attributes(NetworkSelector)
    assert "heapq.heappush(self._scheduled, (when, task))" in inspect.getsource(NetworkSelector.call_at)
    assert "task.scheduled_at = when" in inspect.getsource(NetworkSelector.call_at)
    for name in ("cancel", "reschedule"):
        assert "self._unschedule(task)" in inspect.getsource(getattr(NetworkSelector, name)), name
    assert {"scheduled_at", "state"} <= assigned_attributes(Task)
    assert TaskState.UNSCHEDULED in TaskState
    assert "selector" in NetworkSelector.DEFAULT_CONFIG
    assert parameters(KafkaNetClient.__init__) == "(self, net=None, manager=None, **configs)"


def test_kafka_python_still_keeps_what_the_admin_connection_reaches_through_the_client():
    """app/kafka/admin_connection.py starts the IO thread through the client's private network
    (``_net.start()``), tells a dead thread or a closed manager by ``_net._io_thread``,
    ``_net._exception`` and ``_manager.closed``, runs every request through ``_manager.run``
    (after ``bootstrap``/``bootstrapped``), and forgets refused logins each round
    (``_manager._auth_failures.clear()``)."""
    assert {"_net", "_manager"} <= assigned_attributes(KafkaNetClient)
    assert {"_io_thread", "_exception"} <= assigned_attributes(NetworkSelector)
    assert parameters(NetworkSelector.start) == "(self)"
    assert {"_auth_failures", "closed"} <= assigned_attributes(KafkaConnectionManager)
    assert parameters(KafkaConnectionManager.run) == "(self, coro, *args)"
    assert parameters(KafkaConnectionManager.bootstrap) == "(self, timeout_ms=None, refresh=True)"
    assert isinstance(inspect.getattr_static(KafkaConnectionManager, "bootstrapped"), property)


def test_the_standard_library_selector_members_the_quiet_selector_reads_are_there():
    """QuietSelector replaces ``get_key`` with a copy that reads the selector's private map."""
    assert parameters(selectors.DefaultSelector.get_key) == "(self, fileobj)"
    assert parameters(selectors.DefaultSelector._fileobj_lookup) == "(self, fileobj)"
    assert {"_map", "_fd_to_key"} <= assigned_attributes(selectors._BaseSelectorImpl)


# --- FastAPI: what the node report's direct route reads of the route it serves ----------------------


class _DirectBody(BaseModel):
    a: int


async def _direct_endpoint(request: Request, body: _DirectBody, node_id: Annotated[int, Path(ge=0, le=9)]) -> None:
    return None


def test_the_fastapi_route_members_the_direct_route_reads_are_there_as_it_reads_them():
    """app/server/edge/direct_route.py serves PUT /nodes/{id}/volumes itself: it reads the route's
    ``dependant`` (its path, body, query, header and cookie parameters, dependencies and the
    request parameter's name), the path parameter's bounds from its field's metadata, the route's
    endpoint, and the app's ``exception_handlers``; it refuses at the first request when the
    route's shape is not the one it serves. Here, that FastAPI still exposes them so."""
    app = FastAPI()
    endpoint = app.put("/n/{node_id}/v")(_direct_endpoint)
    [route] = [r for r in app.router.routes if isinstance(r, APIRoute)]
    dependant = route.dependant
    assert [p.name for p in dependant.path_params] == ["node_id"]
    assert [p.name for p in dependant.body_params] == ["body"]
    assert dependant.body_params[0].field_info.annotation is _DirectBody
    field = dependant.path_params[0].field_info
    assert field.annotation is int
    assert [m.ge for m in field.metadata if isinstance(m, Ge)] == [0]
    assert [m.le for m in field.metadata if isinstance(m, Le)] == [9]
    assert dependant.request_param_name == "request"
    assert dependant.query_params == [] and dependant.header_params == [] and dependant.cookie_params == []
    assert dependant.dependencies == []
    assert route.endpoint is endpoint
    assert isinstance(app.exception_handlers, dict)


# --- the versions the records above were taken from ----------------------------------------------


def test_the_installed_frameworks_are_the_versions_these_records_were_verified_on():
    """pyproject.toml allows only these minor versions (constraints.txt pins the patch): a move
    to another one starts by re-verifying the records above and updating them and the doc."""
    assert version("uvicorn").startswith("0.54.")
    assert version("fastapi").startswith("0.165.")  # the direct route's record above
    assert version("kafka-python").startswith("3.0.")
    major, minor, patch = (int(part) for part in version("httptools").split(".")[:3])
    assert (0, 6, 3) <= (major, minor, patch) < (1, 0, 0)
