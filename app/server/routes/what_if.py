"""POST /what-if: a candidate set of limits judged on the live view, with no effect on anything.

The candidate is checked by the settings' own rules and judged by the decider's own code
(``ThrottleDecider.judged_by``): the answer is what /throttle-factor and /volumes would say
now under those limits. Nothing is published, recorded or counted (beyond the HTTP metrics),
so it needs no token; the body limit applies as to any body."""

from __future__ import annotations

from fastapi import Request

from app.server.problems import InvalidRequest, field_error, problem_responses
from app.server.routes.route_set import RouteSet
from app.server.schemas.decision import decision_response
from app.server.schemas.volumes import volumes_view
from app.server.schemas.what_if import FIELD_SETTINGS, CandidateLimits, WhatIf, limit_values
from app.server.state import service_state
from app.settings.limits import storage_policy
from app.settings.loading import ConfigurationError, check_limits
from app.settings.model import property_name

WHAT_IF_PATH = "/what-if"
routes = RouteSet(tags=["what-if"])

# setting property -> the body field that stands for it
_BODY_FIELDS = {property_name(setting): path for path, setting in FIELD_SETTINGS.items()}


@routes.post(
    WHAT_IF_PATH,
    response_model=WhatIf,
    summary="What a candidate set of limits would decide on the live view (changes nothing)",
    responses=problem_responses(413, 422),
)
async def what_if(candidate: CandidateLimits, request: Request) -> WhatIf:
    try:
        limits = check_limits(limit_values(candidate))
    except ConfigurationError as exc:
        raise InvalidRequest(
            [field_error(_BODY_FIELDS[p.key], "body", f"allowed: {p.allowed} (as the setting {p.key})") for p in exc.problems]
        ) from None
    state = service_state(request)
    now = state.clock()
    twin = state.decider.judged_by(storage_policy(limits))
    return WhatIf(decision=decision_response(twin.decision(now)), volumes=volumes_view(twin, now))
