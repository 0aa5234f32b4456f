"""Quota endpoints: the table the shims poll, resolution, and guarded changes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request, Response
from fastapi.security import HTTPBearer

from app.server.conditional import WAIT_PARAMETER, conditional_get, conditional_responses
from app.server.routes.route_set import RouteSet
from app.server.problems import InvalidRequest, ProblemError, field_error, problem_responses
from app.quotas.change_rules import floor_problems, group_name_problem, name_problem, user_name_problem
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaType, QuotaValues
from app.quotas.service import MembershipConflict, QuotaService
from app.server.state import service_state
from app.server.schemas.quotas import (
    DEFAULT_NAME,
    EntityModel,
    GroupBody,
    GroupModel,
    OverrideModel,
    QuotaLimitsBody,
    TABLE_ETAG_FIELDS,
    QuotaTableModel,
    ResolutionModel,
    entity_name,
)

routes = RouteSet(tags=["quotas"])
bearer = HTTPBearer(auto_error=False, description="The token of throttle.service.admin.token")

TYPE_NAMES = [t.value for t in QuotaType]
_RESOLVE_PARAMETERS = [
    {"name": "user", "in": "query", "required": False, "schema": {"type": "string", "default": ""},
     "description": "The user principal name (without User:); empty for none", "example": "alice"},
    {"name": "client-id", "in": "query", "required": False, "schema": {"type": "string", "default": ""},
     "description": "The client id", "example": "billing-producer"},
    {"name": "type", "in": "query", "required": True, "schema": {"type": "string", "enum": TYPE_NAMES},
     "description": "The quota type", "example": "produce"},
]


def quota_service(request: Request) -> QuotaService:
    """The quota service, once its table is the store's; until then 503 (a shim keeps its last
    table rather than take one without the overrides)."""
    service = service_state(request).quota_service()
    if not service.ready:
        reason = getattr(service.store, "error", None)
        raise ProblemError(
            503,
            "Quota table not loaded",
            "the quota store's topic has not been read yet" + (f" ({reason})" if reason else ""),
            headers={"Retry-After": "1"},
        )
    return service


@routes.hot_get(
    "/quotas",
    response_model=QuotaTableModel,
    summary="The whole quota table and the factor in force",
    responses={**conditional_responses("The table", "a shim", TABLE_ETAG_FIELDS), **problem_responses(422, 503)},
    openapi_extra={"parameters": [WAIT_PARAMETER]},
)
async def quota_table(request: Request) -> Response:
    quota_service(request)  # 503 until the table is the store's
    table = service_state(request).quota_table
    assert table is not None
    return await conditional_get(request, table, service_state(request).clock)


@routes.hot_get(
    "/quotas/resolve",
    response_model=ResolutionModel,
    summary="The quota that applies to one client: limit, level, factor and metric tags",
    responses=problem_responses(422),
    openapi_extra={"parameters": _RESOLVE_PARAMETERS},
)
async def resolve_quota(request: Request) -> Response:
    query = request.query_params
    type_name = query.get("type")
    if type_name not in TYPE_NAMES:
        raise ProblemError(422, "Invalid request", f"type: expected one of {', '.join(TYPE_NAMES)}, got {type_name!r}")
    user, client_id = query.get("user", ""), query.get("client-id", "")
    resolution = quota_service(request).resolve(user, client_id, QuotaType(type_name))
    body = ResolutionModel.of(user, client_id, resolution).model_dump_json().encode()
    return Response(body, media_type="application/json")


# Declares the token in the OpenAPI document; app.server.admission checks it, before the body
# is read (FastAPI reads and parses a body before it runs a route's dependencies).
Admin = Depends(bearer)
MUTATION_ERRORS = problem_responses(401, 403, 404, 409, 413, 422, 503)


def _entity(user: str | None, client_id: str | None, new: bool) -> QuotaEntity:
    """The entity the query names. Names of a new entity follow the change rules; a removal
    takes any name, so that one stored before a rule existed can still be removed."""
    errors = []
    for field, value, problem_of in (("user", user, user_name_problem), ("client-id", client_id, name_problem)):
        if value == "":
            errors.append(field_error(field, "query", "must not be empty"))
        elif new and value not in (None, DEFAULT_NAME) and (problem := problem_of(value)):
            errors.append(field_error(field, "query", problem))
    if user is None and client_id is None:
        errors.append(field_error("user", "query", "name a user, a client-id, or both"))
    if errors:
        raise InvalidRequest(errors)
    return QuotaEntity(entity_name(user), entity_name(client_id))


def _quotas_to_set(limits: QuotaLimitsBody, service: QuotaService, field_prefix: str) -> QuotaValues:
    """The body's quotas, once each is at or above the floor of its type."""
    values = limits.to_limits()
    if not values:
        field = field_prefix.rstrip(".") or "body"
        raise InvalidRequest([field_error(field, "body", "set at least one quota (produce, fetch, request, controller_mutation)")])
    problems = floor_problems(values, service.table.floors)
    if problems:
        raise InvalidRequest([field_error(field_prefix + quota_type.value, "body", problem) for quota_type, problem in problems.items()])
    return values


NAME_RULES = "a PUT refuses control and invisible format characters and whitespace at either end"
UserQuery = Query(
    description=f"User principal name without User:, or {DEFAULT_NAME} for the default user; {NAME_RULES}", examples=["alice"]
)
ClientQuery = Query(
    alias="client-id", description=f"Client id, or {DEFAULT_NAME} for the default client id; {NAME_RULES}", examples=[DEFAULT_NAME]
)


@routes.put(
    "/quotas/overrides",
    response_model=OverrideModel,
    summary="Set the quotas of one entity (replaces its previous quotas)",
    dependencies=[Admin],
    responses=MUTATION_ERRORS,
)
async def put_override(
    request: Request,
    limits: QuotaLimitsBody,
    user: Annotated[str | None, UserQuery] = None,
    client_id: Annotated[str | None, ClientQuery] = None,
) -> OverrideModel:
    entity = _entity(user, client_id, new=True)
    service = quota_service(request)
    await service.put_override(entity, _quotas_to_set(limits, service, ""))
    return OverrideModel(entity=EntityModel.of(entity), level=entity.level.value, limits=limits)


@routes.delete(
    "/quotas/overrides",
    status_code=204,
    summary="Remove the quotas of one entity",
    dependencies=[Admin],
    responses=MUTATION_ERRORS,
)
async def delete_override(
    request: Request,
    user: Annotated[str | None, UserQuery] = None,
    client_id: Annotated[str | None, ClientQuery] = None,
) -> Response:
    entity = _entity(user, client_id, new=False)
    if not await quota_service(request).delete_override(entity):
        raise ProblemError(404, "Not found", "no override for this entity")
    return Response(status_code=204)


GroupName = Path(
    min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._-]+$", description="The group's name; not . or ..", examples=["analytics"]
)


@routes.put(
    "/quotas/groups/{name}",
    response_model=GroupModel,
    summary="Create or replace a quota group: its members share one quota",
    dependencies=[Admin],
    responses=MUTATION_ERRORS,
)
async def put_group(request: Request, name: Annotated[str, GroupName], body: GroupBody) -> GroupModel:
    problem = group_name_problem(name)
    if problem:
        raise InvalidRequest([field_error("name", "path", problem)])
    if not body.users and not body.client_ids:
        raise InvalidRequest([field_error("body", "body", "a group needs at least one user or client id")])
    service = quota_service(request)
    group = QuotaGroup(name, frozenset(body.users), frozenset(body.client_ids), _quotas_to_set(body.limits, service, "limits."))
    try:
        await service.put_group(group)
    except MembershipConflict as exc:
        raise ProblemError(409, "Conflict", str(exc)) from None
    return GroupModel.of(group)


@routes.delete(
    "/quotas/groups/{name}",
    status_code=204,
    summary="Remove a quota group",
    dependencies=[Admin],
    responses=MUTATION_ERRORS,
)
async def delete_group(request: Request, name: Annotated[str, GroupName]) -> Response:
    if not await quota_service(request).delete_group(name):
        raise ProblemError(404, "Not found", f"no group named {name!r}")
    return Response(status_code=204)
