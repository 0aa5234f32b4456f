"""GET /volumes: the cached cluster view, one entry per (broker, log dir), with its age.

Its size grows with the cluster (about 5 MB at 1,000 brokers x 12 log dirs) and anyone may ask,
so it is rendered once per change of what it shows and served from the bytes, with an ETag
(If-None-Match: 304) and gzip for clients that take it, at a pace per client address
(app/server/api/view_cache.py)."""

from __future__ import annotations

import asyncio
import hmac

from fastapi import Request, Response

from app.server.api.conditional import accepts_gzip, matching_etag
from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.volumes import VolumesView, volumes_view
from app.server.api.state import service_state, view_cache
from app.server.api.view_cache import Rendered, node_reports_change_at
from app.server.edge.admission import bearer_credentials
from app.server.edge.problems import ProblemError, problem_responses
from app.server.runtime.service import Service

routes = RouteSet(tags=["volumes"])


def paced_responses() -> dict[int | str, dict]:
    """The OpenAPI description of a large answer refused to a client asking too fast."""
    return {
        429: {
            **problem_responses(429)[429],
            "headers": {
                "Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait"}
            },
        }
    }


def _render(state: Service, now: float) -> tuple[VolumesView, float | None]:
    """The view at ``now``, and when it changes by itself: a node's report expiring (a
    volume's observation expiring ends the decider's view step, which the cache follows)."""
    view = state.view()
    return volumes_view(view, now), node_reports_change_at(view, now)


@routes.hot_get(
    "/volumes",
    response_model=VolumesView,
    summary="The cached cluster view of every log dir volume",
    responses={
        304: {"description": "The view is the one of the ETag given in If-None-Match"},
        **paced_responses(),
    },
)
async def volumes(request: Request) -> Response:
    state = service_state(request)
    await take_turn(request, state)
    answer = view_cache(request).volumes(state, lambda now: _render(state, now))
    return rendered_response(request, answer, conditional=True)


def rendered_response(request: Request, answer: Rendered, conditional: bool) -> Response:
    """``answer``'s bytes (gzipped for a client that takes gzip), or 304 for a GET whose
    If-None-Match names its ETag."""
    headers = {"etag": answer.etag, "vary": "accept-encoding", "cache-control": "no-cache"}
    if conditional and matching_etag(request.headers.get("if-none-match"), answer.etag):
        return Response(status_code=304, headers=headers)
    if answer.gzipped is not None and accepts_gzip(request.headers.get("accept-encoding")):
        return Response(
            answer.gzipped,
            media_type="application/json",
            headers={**headers, "content-encoding": "gzip"},
        )
    return Response(answer.body, media_type="application/json", headers=headers)


async def take_turn(request: Request, state: Service) -> None:
    """Wait for the client's turn at the large answers; ProblemError 429 when it is too far off.
    A request with the node or admin token is not paced."""
    credentials = bearer_credentials(request.scope["headers"])
    if credentials is not None:
        tokens = [
            t.get_secret_value().encode()
            for t in (state.settings.node_token, state.settings.admin_token)
            if t is not None
        ]
        if any(hmac.compare_digest(credentials, token) for token in tokens):
            return
    client = request.client.host if request.client else "-"
    wait = view_cache(request).pace.delay(client)
    if wait is None:
        detail = f"{client} asks for the large answers (/volumes, /what-if) faster than they are given to one client; try again later"
        raise ProblemError(429, "Too many requests", detail, headers={"Retry-After": "1"})
    if wait > 0:
        await asyncio.sleep(wait)
