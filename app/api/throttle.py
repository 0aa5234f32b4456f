"""GET /throttle-factor: the decision every broker shim and operator reads."""

from __future__ import annotations

from fastapi import Request, Response

from app.api.conditional import WAIT_PARAMETER, conditional_get
from app.api.fast_route import FastRoutes
from app.api.problems import problem_responses
from app.throttle.decision import ThrottleDecision

routes = FastRoutes(tags=["throttle"])


@routes.get(
    "/throttle-factor",
    response_model=ThrottleDecision,
    summary="The throttle factor in force and why",
    responses={
        200: {"description": "The decision, with a strong ETag", "headers": {"ETag": {"schema": {"type": "string"}}}},
        304: {"description": "Unchanged since the ETag given in If-None-Match"},
        **problem_responses(422),
    },
    openapi_extra={"parameters": [WAIT_PARAMETER]},
)
async def throttle_factor(request: Request) -> Response:
    return await conditional_get(request, request.app.state.observer.board)
