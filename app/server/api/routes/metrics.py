"""GET /metrics: Prometheus exposition of the service's and the HTTP metrics."""

from __future__ import annotations

from fastapi import Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from app.server.api.conditional import accepts_gzip
from app.server.api.routes.route_set import RouteSet
from app.server.api.state import service_state
from app.server.edge.exposition import exposition, gzipped_exposition

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
    # The per-volume families come rendered by their collector (app/server/edge/exposition.py),
    # and gzipped once when the scraper takes gzip (Prometheus does).
    registry = service_state(request).registry
    if accepts_gzip(request.headers.get("accept-encoding")):
        return Response(
            gzipped_exposition(registry),
            media_type=CONTENT_TYPE_LATEST,
            headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
        )
    return Response(
        exposition(registry), media_type=CONTENT_TYPE_LATEST, headers={"Vary": "Accept-Encoding"}
    )
