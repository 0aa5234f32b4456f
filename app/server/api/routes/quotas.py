"""Quota endpoints: the table the shims poll, resolution, and guarded changes."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Annotated

from fastapi import Depends, Path, Request, Response
from fastapi.security import HTTPBearer

from app.quotas.change_rules import (
    DEFAULT_NAME,
    floor_problems,
    group_name_problem,
    name_problem,
    user_name_problem,
)
from app.quotas.model import QuotaEntity, QuotaGroup, QuotaType, QuotaValues
from app.quotas.service import MembershipConflict, QuotaService, TableFull
from app.server.api.conditional import WAIT_PARAMETER, conditional_get, conditional_responses
from app.server.api.routes.route_set import RouteSet
from app.server.api.schemas.quotas import (
    NAME_RULES,
    TABLE_ETAG_FIELDS,
    EntityModel,
    GroupBody,
    GroupModel,
    OverrideModel,
    QuotaLimitsBody,
    QuotaTableModel,
    ResolutionModel,
    entity_name,
    name_schema,
)
from app.server.api.state import service_state
from app.server.edge.problems import InvalidRequest, ProblemError, field_error, problem_responses
from app.server.edge.query import query_values, strict_query
from app.settings.model import property_name

routes = RouteSet(tags=["quotas"])
bearer = HTTPBearer(auto_error=False, description="The token of throttle.service.admin.token")

TYPE_NAMES = [t.value for t in QuotaType]
_RESOLVE_PARAMETERS = [
    {
        "name": "user",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "default": ""},
        "description": "The user principal name (without User:); empty for none",
        "example": "alice",
    },
    {
        "name": "client-id",
        "in": "query",
        "required": False,
        "schema": {"type": "string", "default": ""},
        "description": "The client id",
        "example": "billing-producer",
    },
    {
        "name": "type",
        "in": "query",
        "required": True,
        "schema": {"type": "string", "enum": TYPE_NAMES},
        "description": "The quota type",
        "example": "produce",
    },
]


def quota_service(request: Request) -> QuotaService:
    """The quota service, once its table is the store's; until then 503 (a shim keeps its last
    table rather than take one without the overrides)."""
    service = service_state(request).quota_service()
    if not service.ready:
        reason = service.store.error
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
    responses={
        **conditional_responses("The table", "a shim", TABLE_ETAG_FIELDS),
        **problem_responses(422, 503),
    },
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
    responses=problem_responses(422, 503),
    openapi_extra={"parameters": _RESOLVE_PARAMETERS},
)
async def resolve_quota(request: Request) -> Response:
    query = query_values(request.scope)
    type_name = query.get("type")
    if type_name not in TYPE_NAMES:
        raise ProblemError(
            422,
            "Invalid request",
            f"type: expected one of {', '.join(TYPE_NAMES)}, got {type_name!r}",
        )
    user, client_id = query.get("user", ""), query.get("client-id", "")
    resolution = quota_service(request).resolve(user, client_id, QuotaType(type_name))
    body = ResolutionModel.of(user, client_id, resolution).model_dump_json().encode()
    return Response(body, media_type="application/json")


# Declares the token in the OpenAPI document; app.server.edge.admission checks it, before the body
# is read (FastAPI reads and parses a body before it runs a route's dependencies). Then the query
# string is read strictly (app.server.edge.query).
MUTATION_DEPENDENCIES = [Depends(bearer), Depends(strict_query)]
# What a change can be answered besides its success: 400 when its body is not JSON that Python
# can hold (not UTF-8, an integer of more than 4,300 digits, arrays nested too deep), 413 when
# the body is over the limit or the table would be, 503 when the store cannot take it.
PUT_ERRORS = problem_responses(400, 401, 403, 413, 422, 503)
DELETE_ERRORS = problem_responses(401, 403, 404, 413, 422, 503)

_ENTITY_NAMES = (
    (
        "user",
        "User principal name without User:",
        DEFAULT_NAME + " for the default user",
        user_name_problem,
        True,
    ),
    ("client-id", "Client id", DEFAULT_NAME + " for the default client id", name_problem, False),
)


def _entity_parameters(new: bool) -> list[dict]:
    """The query parameters naming an entity: a PUT's names follow the change rules; a removal
    takes any name, so that one stored before a rule existed can still be removed."""
    parameters = []
    for field, what, default, _, users in _ENTITY_NAMES:
        schema: dict = {"type": "string", "minLength": 1}
        if new:
            name_schema(users, members=False)(schema)
        rules = (
            f"; {NAME_RULES}"
            if new
            else "; any name, so that one stored under older rules can be removed"
        )
        parameters.append(
            {
                "name": field,
                "in": "query",
                "required": False,
                "schema": schema,
                "example": "alice" if users else DEFAULT_NAME,
                "description": f"{what}, or {default}{rules}. Name a user, a client-id or both (a request naming neither is answered 422)",
            }
        )
    return parameters


def _entity(request: Request, new: bool) -> QuotaEntity:
    """The entity the query names (see _entity_parameters)."""
    query = query_values(request.scope)
    errors = []
    for field, _, _, problem_of, _ in _ENTITY_NAMES:
        value = query.get(field)
        if value == "":
            errors.append(field_error(field, "query", "must not be empty"))
        elif new and value not in (None, DEFAULT_NAME) and (problem := problem_of(value)):
            errors.append(field_error(field, "query", problem))
    if "user" not in query and "client-id" not in query:
        errors.append(field_error("user", "query", "name a user, a client-id, or both"))
    if errors:
        raise InvalidRequest(errors)
    return QuotaEntity(entity_name(query.get("user")), entity_name(query.get("client-id")))


def _quotas_to_set(
    limits: QuotaLimitsBody, service: QuotaService, field_prefix: str
) -> QuotaValues:
    """The body's quotas, once each is at or above the floor of its type."""
    values = limits.to_limits()
    if not values:
        field = field_prefix.rstrip(".") or "body"
        raise InvalidRequest(
            [
                field_error(
                    field,
                    "body",
                    "set at least one quota (produce, fetch, request, controller_mutation)",
                )
            ]
        )
    problems = floor_problems(values, service.table.floors)
    if problems:
        raise InvalidRequest(
            [
                field_error(field_prefix + quota_type.value, "body", problem)
                for quota_type, problem in problems.items()
            ]
        )
    return values


@routes.put(
    "/quotas/overrides",
    response_model=OverrideModel,
    summary="Set the quotas of one entity (replaces its previous quotas)",
    dependencies=MUTATION_DEPENDENCIES,
    responses=PUT_ERRORS,
    openapi_extra={"parameters": _entity_parameters(new=True)},
)
async def put_override(request: Request, limits: QuotaLimitsBody) -> OverrideModel:
    entity = _entity(request, new=True)
    service = quota_service(request)
    await _changing_table(service.put_override(entity, _quotas_to_set(limits, service, "")))
    return OverrideModel(entity=EntityModel.of(entity), level=entity.level.value, limits=limits)


@routes.delete(
    "/quotas/overrides",
    status_code=204,
    summary="Remove the quotas of one entity",
    dependencies=MUTATION_DEPENDENCIES,
    responses=DELETE_ERRORS,
    openapi_extra={"parameters": _entity_parameters(new=False)},
)
async def delete_override(request: Request) -> Response:
    entity = _entity(request, new=False)
    if not await quota_service(request).delete_override(entity):
        raise ProblemError(404, "Not found", "no override for this entity")
    return Response(status_code=204)


async def _changing_table(change: Awaitable[None]) -> None:
    """A change of the table; 413 when it would take the table past its cap, 409 when a group
    would take a member of another group."""
    try:
        await change
    except TableFull as exc:
        raise ProblemError(413, "Quota table full", str(exc)) from None
    except MembershipConflict as exc:
        raise ProblemError(409, "Conflict", str(exc)) from None


GroupName = Path(
    min_length=1,
    max_length=200,
    pattern=r"^[A-Za-z0-9._-]+$",
    description="The group's name; not . or ..",
    examples=["analytics"],
)


@routes.put(
    "/quotas/groups/{name}",
    response_model=GroupModel,
    summary="Create or replace a quota group: its members share one quota",
    dependencies=MUTATION_DEPENDENCIES,
    # 404: a name with a slash (%2F) names no group path.
    responses=problem_responses(400, 401, 403, 404, 409, 413, 422, 503),
)
async def put_group(
    request: Request, name: Annotated[str, GroupName], body: GroupBody
) -> GroupModel:
    problem = group_name_problem(name)
    if problem:
        raise InvalidRequest([field_error("name", "path", problem)])
    service = quota_service(request)
    _check_members(body, service_state(request).settings.quota_group_max_members)
    group = QuotaGroup(
        name,
        frozenset(body.users),
        frozenset(body.client_ids),
        _quotas_to_set(body.limits, service, "limits."),
    )
    await _changing_table(service.put_group(group))
    return GroupModel.of(group)


def _check_members(body: GroupBody, max_members: int) -> None:
    errors = [
        field_error(
            field,
            "body",
            f"lists {len(names)} names, more than {max_members} ({property_name('quota_group_max_members')})",
        )
        for field, names in (("users", body.users), ("client_ids", body.client_ids))
        if len(names) > max_members
    ]
    if errors:
        raise InvalidRequest(errors)


@routes.delete(
    "/quotas/groups/{name}",
    status_code=204,
    summary="Remove a quota group",
    dependencies=MUTATION_DEPENDENCIES,
    responses=DELETE_ERRORS,
)
async def delete_group(request: Request, name: Annotated[str, GroupName]) -> Response:
    if not await quota_service(request).delete_group(name):
        raise ProblemError(404, "Not found", f"no group named {name!r}")
    return Response(status_code=204)
