"""The HTTP metrics: request counts and latencies per handler and method, from
prometheus-fastapi-instrumentator, registered in the service's registry."""

from __future__ import annotations

from fastapi import FastAPI
from prometheus_client import CollectorRegistry
from prometheus_fastapi_instrumentator import Instrumentator
from prometheus_fastapi_instrumentator import metrics as http_metrics
from prometheus_fastapi_instrumentator.metrics import Info as RequestInfo

from app.server.api.conditional import WAIT_PARAMETER
from app.server.edge.methods import metric_method

HTTP_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0)
# Long-polls are held up to the wait asked for (at most 300 s): their own histogram, so that
# the latency of the answers given at once is not buried under the time spent waiting.
LONG_POLL_BUCKETS = (0.01, 0.1, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


def instrument_http(app: FastAPI, registry: CollectorRegistry) -> None:
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

    def method_label(info: RequestInfo) -> None:
        info.method = metric_method(info.method)  # read by the metrics after it

    def latency(info: RequestInfo) -> None:
        (long_polls if WAIT_PARAMETER["name"] in info.request.query_params else answered)(info)

    instrumentator = Instrumentator(registry=registry, excluded_handlers=["/metrics"])
    instrumentator.add(method_label, http_metrics.requests(registry=registry), latency)
    instrumentator.instrument(app)
