"""POST /what-if: a candidate set of limits judged on the live view, with no effect on anything.

The candidate is checked by the settings' own rules and judged by the decider's own code
(``ThrottleDecider.judged_by``): the answer is what /throttle-factor and /volumes would say
now under those limits and that horizon (time factors and times to the hard limit from the
live fill trends, replayed through the candidate's rule). Nothing is published, recorded or
counted (beyond the HTTP metrics), so it needs no token; the body limit applies as to any body."""

from __future__ import annotations

import re
from datetime import timedelta

from fastapi import Request, Response

from app.decision.horizon import HORIZON_CHECK_INTERVALS, MIN_HORIZON_SECONDS
from app.server.api.routes.route_set import RouteSet
from app.server.api.routes.volumes import paced_responses, rendered_response, take_turn
from app.server.api.schemas.decision import decision_response
from app.server.api.schemas.volumes import volumes_view
from app.server.api.schemas.what_if import (
    FIELD_SETTINGS,
    HORIZON_PATTERN,
    CandidateLimits,
    WhatIf,
    limit_values,
)
from app.server.api.state import service_state, view_cache
from app.server.api.view_cache import earliest, node_reports_change_at
from app.server.edge.problems import InvalidRequest, ProblemError, field_error, problem_responses
from app.settings.durations import DURATION_HINT, format_duration, parse_duration
from app.settings.limits import storage_policy
from app.settings.loading import ConfigurationError, check_limits
from app.settings.model import Settings, property_name

WHAT_IF_PATH = "/what-if"
routes = RouteSet(tags=["what-if"])

# setting property -> the body field that stands for it
_BODY_FIELDS = {property_name(setting): path for path, setting in FIELD_SETTINGS.items()}
_HORIZON_SETTING = property_name("ramp_horizon")


@routes.post(
    WHAT_IF_PATH,
    response_model=WhatIf,
    summary="What a candidate set of limits and horizon would decide on the live view (changes nothing)",
    responses={**problem_responses(400, 413, 422), **paced_responses()},
)
async def what_if(candidate: CandidateLimits, request: Request) -> Response:
    state = service_state(request)
    errors = []
    try:
        limits = check_limits(limit_values(candidate))
    except ConfigurationError as exc:
        errors = [
            field_error(
                _BODY_FIELDS[p.key], "body", f"allowed: {p.allowed} (as the setting {p.key})"
            )
            for p in exc.problems
        ]
    horizon = None
    if candidate.horizon is not None:
        horizon, problem = _horizon_seconds(
            candidate.horizon, state.settings, state.view().keeps_trends
        )
        if problem is not None:
            errors.append(
                field_error(
                    "horizon", "body", f"allowed: {problem} (as the setting {_HORIZON_SETTING})"
                )
            )
    if errors:
        raise InvalidRequest(errors)
    await take_turn(request, state)
    policy = storage_policy(limits)

    def render(now: float) -> tuple[WhatIf, float | None]:
        twin = state.view().judged_by(policy, horizon)
        decision = twin.decision(now)
        answer = WhatIf(decision=decision_response(decision), volumes=volumes_view(twin, now))
        return answer, earliest(
            decision.reading.next_change_at, node_reports_change_at(state.view(), now)
        )

    # Computed once per candidate and change of the view; a new candidate within a budget.
    answer = view_cache(request).what_if(state, candidate.model_dump_json(), render)
    if isinstance(answer, int):
        detail = "new what-if candidates take more of the service's time than they may; try again, or repeat an earlier candidate"
        raise ProblemError(429, "Too many requests", detail, headers={"Retry-After": str(answer)})
    return rendered_response(request, answer, conditional=False)


def _horizon_seconds(
    text: str, settings: Settings, trends_kept: bool
) -> tuple[float | None, str | None]:
    """The candidate horizon in seconds, or what is allowed: the setting's own rules (a duration,
    at least the minimum and 12 check intervals), and a service that keeps fill trends."""
    least = timedelta(seconds=MIN_HORIZON_SECONDS)
    if settings.observation_enabled:
        least = max(least, settings.storage_check_interval * HORIZON_CHECK_INTERVALS)
    allowed = f"{DURATION_HINT}, at least {format_duration(least)} (PT1M and {HORIZON_CHECK_INTERVALS} check intervals)"
    if not trends_kept:  # whatever the horizon: nothing to judge it on
        return (
            None,
            f"a horizon only where the service keeps fill trends: set {_HORIZON_SETTING} to try one",
        )
    if re.fullmatch(HORIZON_PATTERN, text) is None:  # as the document states it: no spaces
        return None, allowed
    horizon = parse_duration(text)
    if horizon < least:
        return None, allowed
    return horizon.total_seconds(), None
