"""GET /throttle-factor: the decision every broker shim and operator reads."""

from __future__ import annotations

from fastapi import Request, Response

from app.server.api.conditional import WAIT_PARAMETER, conditional_get, conditional_responses
from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.decision import DECISION_ETAG_FIELDS, ThrottleDecision
from app.server.api.state import service_state
from app.server.edge.problems import problem_responses

routes = RouteSet(tags=["throttle"])


@routes.hot_get(
    "/throttle-factor",
    response_model=ThrottleDecision,
    summary="The throttle factor in force and why",
    responses={
        **conditional_responses("The decision", "a client", DECISION_ETAG_FIELDS),
        **problem_responses(422),
    },
    openapi_extra={"parameters": [WAIT_PARAMETER]},
)
async def throttle_factor(request: Request) -> Response:
    state = service_state(request)
    return await conditional_get(request, state.decisions, state.clock)
