"""GET /metrics: Prometheus exposition of the service's and the HTTP metrics."""

from __future__ import annotations

from fastapi import Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app.server.api.routes.route_set import RouteSet
from app.server.api.state import service_state

routes = RouteSet(tags=["metrics"])

EXAMPLE = """# HELP kafka_throttle_factor Throttle factor in force (1 = no throttling, 0 = producers paused)
# TYPE kafka_throttle_factor gauge
kafka_throttle_factor 1.0
"""


@routes.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}, "example": EXAMPLE}},
        }
    },
)
def metrics(request: Request) -> Response:
    # A plain function: FastAPI runs it on the thread pool, so a large scrape never holds
    # up the event loop; the collectors it reads are safe to read from another thread.
    return Response(
        generate_latest(service_state(request).registry), media_type=CONTENT_TYPE_LATEST
    )
