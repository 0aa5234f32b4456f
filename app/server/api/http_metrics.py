"""The HTTP metrics: request counts and latencies per handler, method and status class, as
prometheus-fastapi-instrumentator defines them (its ``requests`` and ``latency`` metrics, read
from its ``Info``), registered in the service's registry.

They are counted by ``HttpMetrics`` rather than by the instrumentator's own middleware, which
looks the handler up by matching the request against every route of the app before serving it:
with FastAPI's route contexts that lookup costs about a fifth of a hot request. Starlette's
router records the route it matched in the request's scope (``scope["route"]``); the handler is
its path, read after the request. A request no route took (refused before routing, a HEAD
served as a GET in a copy of the scope) is looked up as the instrumentator does, and one no
route serves is counted as ``none``, as the instrumentator counts it."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable
from timeit import default_timer
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from prometheus_fastapi_instrumentator import metrics as http_metrics
from prometheus_fastapi_instrumentator.metrics import Info as RequestInfo
from prometheus_fastapi_instrumentator.routing import get_route_name
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.server.api.conditional import WAIT_PARAMETER
from app.server.edge.methods import metric_method

HTTP_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    30.0,
    300.0,
)
# Long-polls are held up to the wait asked for (at most 300 s): their own histogram, so that
# the latency of the answers given at once is not buried under the time spent waiting.
LONG_POLL_BUCKETS = (0.01, 0.1, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def instrument_http(app: FastAPI, registry: CollectorRegistry) -> DirectCount:
    """Request counts and latencies per handler and method (one of the served methods, else
    ``other``), long-polls (``?wait=``) in a histogram of
    their own. The request/response size summaries of the default set are left out: they
    double the cost of instrumenting the hot endpoints."""
    answered = http_metrics.latency(registry=registry, buckets=HTTP_LATENCY_BUCKETS)
    long_polls = http_metrics.latency(
        metric_name="http_long_poll_duration_seconds",
        metric_doc="Duration of long-poll requests (?wait=) in seconds, the time held waiting for a change included",
        registry=registry,
        buckets=LONG_POLL_BUCKETS,
    )
    assert answered is not None and long_polls is not None  # a fresh registry has neither yet

    requests = http_metrics.requests(registry=registry)
    assert requests is not None
    app.add_middleware(HttpMetrics, counted=requests, answered=answered, long_polls=long_polls)
    return DirectCount(requests, answered)


class DirectCount:
    """Counts a request answered without the app (app/server/edge/report_lane.py) as
    ``HttpMetrics`` counts one answered by it: ``for_route(handler, method)`` gives the count
    of one route's answers, called with its status and duration."""

    def __init__(
        self, counted: Callable[[RequestInfo], None], answered: Callable[[RequestInfo], None]
    ) -> None:
        self._counted = counted
        self._answered = answered

    def for_route(self, handler: str, method: str, status: int) -> Callable[[float], None]:
        label_method, label_status = metric_method(method), f"{str(status)[0]}xx"

        def info(duration: float) -> RequestInfo:
            return RequestInfo(
                request=None,  # type: ignore[arg-type]  # read by none of the two metrics
                response=None,
                method=label_method,
                modified_handler=handler,
                modified_status=label_status,
                modified_duration=duration,
                modified_duration_without_streaming=duration,
            )

        counted, answered = _series(self._counted, info(0.0)), _series(self._answered, info(0.0))
        if counted is not None and answered is not None:
            # The route's two series, looked up once (a report is counted 1,000 times a second),
            # and its answers' durations kept aside and folded into them when the registry is
            # read (or when many are waiting): no lock taken per answer.
            folding = _folding(counted, answered)
            if folding is not None:
                self.bound = self.batched = True
                return folding
            self.bound = True
            inc, observe = counted[1].inc, answered[1].observe

            def count_bound(duration: float) -> None:
                inc()
                observe(duration)

            return count_bound

        def count(duration: float) -> None:
            answer = info(duration)
            self._counted(answer)
            self._answered(answer)

        return count

    bound = False  # for_route counts through series looked up once (for tests)
    batched = False  # and folds its answers into them when the registry is read (for tests)


# Answers waiting to be folded into their series at most: a registry never read keeps no more.
FOLD_AT = 4096


def _folding(counted: tuple[Any, Any], answered: tuple[Any, Any]) -> Callable[[float], None] | None:
    """A count of a route's answers that keeps each answer's duration aside (an append to a
    deque, which takes no lock) and folds them into the route's counter and histogram series
    when either metric is collected, or when ``FOLD_AT`` are waiting. The series end as if
    each answer had been counted at once: the count and each bucket by the answers folded, the
    histogram's sum by each duration in turn, in the order counted (the same float as before).
    None when the histogram's series is not as prometheus_client writes it today."""
    (counter_metric, counter), (histogram_metric, histogram) = counted, answered
    try:
        bounds, buckets, sum_inc = (
            list(histogram._upper_bounds),  # noqa: SLF001 - read in place, checked here
            list(histogram._buckets),  # noqa: SLF001
            histogram._sum.inc,  # noqa: SLF001
        )
        inc_count = counter.inc
        collects = (counter_metric.collect, histogram_metric.collect)
    except AttributeError:
        return None
    if len(bounds) != len(buckets) or not bounds or bounds[-1] != float("inf"):
        return None
    waiting: deque[float] = deque()
    keep, popleft = waiting.append, waiting.popleft

    def fold() -> None:
        folded, per_bucket = 0, [0] * len(bounds)
        while True:
            try:  # another thread may fold at the same time: each duration is taken once
                duration = popleft()
            except IndexError:
                break
            folded += 1
            sum_inc(duration)
            per_bucket[bisect_left(bounds, duration)] += 1  # the first bound >= it, as observe
        if folded:
            inc_count(folded)
            for bucket, answers in zip(buckets, per_bucket, strict=True):
                if answers:
                    bucket.inc(answers)

    def folding_collect(collect: Callable[[], Any]) -> Callable[[], Any]:
        def collect_folded() -> Any:
            fold()
            return collect()

        return collect_folded

    # Read through the registry (the exposition, get_sample_value): the waiting answers first.
    counter_metric.collect, histogram_metric.collect = (folding_collect(c) for c in collects)

    def count_batched(duration: float) -> None:
        keep(duration)
        if len(waiting) >= FOLD_AT:
            fold()

    return count_batched


def _series(
    instrumentation: Callable[[RequestInfo], None], info: RequestInfo
) -> tuple[Any, Any] | None:
    """The metric of ``instrumentation`` (one of the instrumentator's metric functions) and the
    series it would count ``info`` in, for ``info``'s labels (which a route's answers share); None
    when the function is not as the instrumentator writes it today (its metric and the
    ``Info`` fields its labels come from, in its closure): then it is called for each answer."""
    try:
        cells = dict(
            zip(
                instrumentation.__code__.co_freevars,
                (cell.cell_contents for cell in instrumentation.__closure__ or ()),
                strict=True,
            )
        )
        metric, fields = cells["METRIC"], cells["info_attribute_names"]
        return metric, (
            metric.labels(*[getattr(info, name) for name in fields]) if fields else metric
        )
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


# Not counted: the scrapes themselves.
EXCLUDED_HANDLERS = frozenset({"/metrics"})
_WAIT = WAIT_PARAMETER["name"].encode()


def _long_poll(query_string: bytes) -> bool:
    """The query names the wait parameter (strict_query refuses it given twice or encoded)."""
    return _WAIT in query_string and any(
        part.partition(b"=")[0] == _WAIT for part in query_string.split(b"&")
    )


class HttpMetrics:
    def __init__(
        self,
        app: ASGIApp,
        counted: Callable[[RequestInfo], None],
        answered: Callable[[RequestInfo], None],
        long_polls: Callable[[RequestInfo], None],
    ) -> None:
        self.app = app
        self._counted = counted
        self._answered = answered
        self._long_polls = long_polls

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = default_timer()
        status = 500
        first_byte: float | None = None

        async def noting_status(message: Message) -> None:
            nonlocal status, first_byte
            if message["type"] == "http.response.start":
                status, first_byte = message["status"], default_timer()
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        finally:
            self._count(scope, status, started, first_byte)

    def _count(self, scope: Scope, status: int, started: float, first_byte: float | None) -> None:
        route = scope.get("route")
        handler = getattr(route, "path", None)
        request = Request(scope)
        if handler is None:
            handler = get_route_name(request, should_include_root_path=False) or "none"
        if handler in EXCLUDED_HANDLERS:
            return
        finished = default_timer()
        info = RequestInfo(
            request=request,
            response=None,
            method=metric_method(scope["method"]),
            modified_handler=handler,
            modified_status=f"{str(status)[0]}xx",
            modified_duration=max(finished - started, 0.0),
            modified_duration_without_streaming=max((first_byte or started) - started, 0.0),
        )
        self._counted(info)
        (self._long_polls if _long_poll(scope["query_string"]) else self._answered)(info)
