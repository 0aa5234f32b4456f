"""GET /throttle-factor: the decision every broker shim and operator reads."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from app.api.conditional import WaitQuery, conditional_get
from app.api.dependencies import get_observer
from app.api.problems import problem_responses
from app.observer import Observer
from app.throttle.decision import ThrottleDecision

router = APIRouter(tags=["throttle"])


@router.get(
    "/throttle-factor",
    response_model=ThrottleDecision,
    summary="The throttle factor in force and why",
    responses={
        200: {"description": "The decision, with a strong ETag", "headers": {"ETag": {"schema": {"type": "string"}}}},
        304: {"description": "Unchanged since the ETag given in If-None-Match"},
        **problem_responses(422),
    },
)
async def throttle_factor(
    request: Request,
    observer: Annotated[Observer, Depends(get_observer)],
    wait: Annotated[str | None, WaitQuery] = None,
) -> Response:
    return await conditional_get(request, observer.board, wait)
