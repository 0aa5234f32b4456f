"""Loaded by schemathesis (SCHEMATHESIS_HOOKS) in tests/integration/test_schemathesis.py.

positive_data_acceptance runs as schemathesis has it but for one request: PUT or DELETE of
/quotas/overrides naming neither a user nor a client-id. Each of the two query parameters is
optional, and an OpenAPI document cannot state a rule across two parameters (only an object
parameter could, and openapi-generator's Go and TypeScript clients send one as entity[user]=,
which no other client would); the document says it in both parameters' descriptions. That
request must then be answered 422 with the rule named.

And for POST /what-if: a soft limit must be of the hard limit's kind and strictly looser, and
hysteresis in the hard limit's unit. The document states each limit's own range and that it
names one kind (the hard limit exactly one), but not these rules across fields (the
descriptions say them); a candidate set that breaks one must be answered 422 naming the rule.

A what-if's horizon is judged on the service's own fill trends: a service without
throttle.service.ramp.horizon (the one under test observes nothing) keeps none, and answers a
candidate horizon 422 naming that rule, which depends on the service's settings, not on the
request (the field's description says it).

And PUT /nodes/{node_id}/volumes: it takes the node token, not the admin token the command line
sends (``before_call`` sends the node token there); usable bytes at most total bytes, each
log_dir, role and holds entry once and data only on a node with the broker role are rules
across fields (or items), stated in the
descriptions and answered 422 naming the rule; one report per node per second is a rule across
requests, answered 429 with Retry-After."""

from __future__ import annotations

import schemathesis
from schemathesis.specs.openapi.checks import positive_data_acceptance

ENTITY_PATH = "/quotas/overrides"
NEITHER = "name a user, a client-id, or both"


WHAT_IF_PATH = "/what-if"
HORIZON_RULE = "a horizon only where the service keeps fill trends"
NODES_PATH = "/nodes/"
NODE_TOKEN = "schemathesis-node-token-0123"  # tests/integration/test_schemathesis.py configures it
NODE_RULES = (
    "usable_bytes must not exceed total_bytes", "volumes lists a log_dir twice", "only a node with the broker role holds data",
    "roles lists a role twice", "holds lists an entry twice",
)


@schemathesis.hook
def before_call(ctx, case, kwargs):
    """A node's report carries the node token."""
    if case.path.startswith(NODES_PATH):
        case.headers = {**(case.headers or {}), "Authorization": f"Bearer {NODE_TOKEN}"}


def _positive(case) -> bool:
    return case.meta is not None and case.meta.generation.mode.is_positive


def _relates_limits(case) -> bool:
    """A valid what-if body that sets a soft limit or hysteresis beside the hard limit."""
    body = case.body if isinstance(case.body, dict) else {}
    return _positive(case) and case.path == WHAT_IF_PATH and any(body.get(part) for part in ("soft", "hysteresis"))


def _tries_a_horizon(case) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    return _positive(case) and case.path == WHAT_IF_PATH and body.get("horizon") is not None


def _names_neither(case) -> bool:
    return _positive(case) and case.path == ENTITY_PATH and not {"user", "client-id"} & set(case.query or {})


@schemathesis.check
def positive_data_acceptance_but_an_entity_of_no_name(ctx, response, case):
    """positive_data_acceptance, except that an override request naming no entity gets 422, and
    so may a what-if whose soft limit or hysteresis breaks a rule across fields."""
    if _names_neither(case):
        if response.status_code in (401, 403):  # the token is checked first
            return None
        assert response.status_code == 422 and NEITHER in response.text, f"{response.status_code} {response.text[:300]}"
        return None
    if _positive(case) and case.path.startswith(NODES_PATH):
        if response.status_code == 429:
            assert response.headers.get("retry-after"), response.headers
            return None
        if response.status_code == 422:
            assert any(rule in response.text for rule in NODE_RULES), f"{response.status_code} {response.text[:300]}"
            return None
    if _tries_a_horizon(case) and response.status_code == 422:
        assert HORIZON_RULE in response.text, f"{response.status_code} {response.text[:300]}"
        return None
    if _relates_limits(case) and response.status_code == 422:
        assert "allowed: " in response.text, f"{response.status_code} {response.text[:300]}"  # the rule is named
        return None
    return positive_data_acceptance(ctx, response, case)
