"""Enforcement: read it, change it at run time (kept in the quota store), return to the settings."""

from __future__ import annotations

from fastapi import Request

from app.decision.enforcement import Enforcement
from app.server.api.routes.quotas import MUTATION_DEPENDENCIES, quota_service
from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.enforcement import EnforcementBody, EnforcementModel
from app.server.api.state import service_state
from app.server.edge.problems import ProblemError, errors_detail, field_error, problem_responses

routes = RouteSet(tags=["enforcement"])
# 400: a body that is not JSON Python can hold; 409: a canary broker the cluster view does not
# hold now (the body is well formed: the cluster decides, as a group's member held elsewhere).
CHANGE_ERRORS = problem_responses(400, 401, 403, 409, 413, 422, 503)


def _current(request: Request) -> EnforcementModel:
    state = service_state(request)
    service = quota_service(request)
    return EnforcementModel.of(
        service.enforcement, service.enforcement_source, state.settings.initial_enforcement
    )


@routes.get(
    "/enforcement",
    response_model=EnforcementModel,
    summary="The enforcement in force and where it comes from",
    responses=problem_responses(503),
)
async def get_enforcement(request: Request) -> EnforcementModel:
    return _current(request)


@routes.put(
    "/enforcement",
    response_model=EnforcementModel,
    summary="Switch between enforce and shadow, and name canary brokers, on every shim at once (kept in the quota store)",
    dependencies=MUTATION_DEPENDENCIES,
    responses=CHANGE_ERRORS,
)
async def put_enforcement(request: Request, body: EnforcementBody) -> EnforcementModel:
    state = service_state(request)
    service = quota_service(request)
    known = state.registered_brokers()
    unknown = sorted(set(body.canary_brokers) - known)
    if unknown:
        listed = ", ".join(map(str, sorted(known))) or "none yet"
        errors = [
            field_error(
                "canary_brokers",
                "body",
                f"broker {b} is not registered in the cluster view (registered: {listed})",
            )
            for b in unknown
        ]
        raise ProblemError(409, "Conflict", errors_detail(errors), errors=errors)
    await service.set_enforcement(Enforcement.of(body.mode, body.canary_brokers))
    return _current(request)


@routes.delete(
    "/enforcement",
    response_model=EnforcementModel,
    summary="Forget the enforcement set with PUT: the settings' enforcement holds again",
    dependencies=MUTATION_DEPENDENCIES,
    responses=problem_responses(401, 403, 413, 422, 503),
)
async def delete_enforcement(request: Request) -> EnforcementModel:
    await quota_service(request).clear_enforcement()
    return _current(request)
