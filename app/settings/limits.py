"""The storage limits as a set of their own: the six settings that make one, the rules between
them, and the policy they give.

One set of rules for every place a set of limits comes from: the service's configuration at
start-up (``load_settings``), a candidate set tried on the live view (``POST /what-if``) and
the candidate sets of the report's backtest (``throttle-report --limits``)."""

from __future__ import annotations

from collections.abc import Callable

from app.decision.policy import StoragePolicy, policy_from_levels
from app.settings.model import Settings, property_name

HARD_LIMITS = ("storage_per_volume_limit_min_available_bytes", "storage_per_volume_limit_min_available_ratio")
SOFT_LIMITS = ("storage_per_volume_soft_limit_min_available_bytes", "storage_per_volume_soft_limit_min_available_ratio")
HYSTERESIS = ("storage_per_volume_limit_hysteresis_bytes", "storage_per_volume_limit_hysteresis_ratio")
LIMIT_FIELDS = HARD_LIMITS + SOFT_LIMITS + HYSTERESIS


def _kind(field: str) -> str:
    return "bytes" if field.endswith("bytes") else "ratio"


def limit_rules(settings: Settings, given: Callable[[str], bool], valid: Callable[..., bool]) -> list[tuple[str, str]]:
    """(field, what is allowed) for each rule between the limit settings that ``settings``
    break. ``given(field)``: the field was set (an invalid value counts: which limits are set
    is known even then); ``valid(*fields)``: none of them holds an invalid value (how they
    compare is known only then)."""
    problems: list[tuple[str, str]] = []
    hard = [f for f in HARD_LIMITS if given(f)]
    soft = [f for f in SOFT_LIMITS if given(f)]
    hysteresis = [f for f in HYSTERESIS if given(f)]
    exactly_one = f"exactly one hard limit: either {property_name(HARD_LIMITS[0])} or {property_name(HARD_LIMITS[1])}"
    if not hard:
        problems.append((HARD_LIMITS[0], exactly_one))
    elif len(hard) > 1:
        problems.extend((field, exactly_one + ", not both") for field in hard)
    if len(soft) > 1:
        problems.extend((field, "at most one soft limit") for field in soft)
    if len(hard) == 1:
        hard_kind = _kind(hard[0])
        for field in soft:
            if _kind(field) != hard_kind:
                problems.append((field, f"a soft limit of the same kind as the hard limit ({hard_kind})"))
            elif len(soft) == 1 and valid(field, hard[0]) and getattr(settings, field) <= getattr(settings, hard[0]):
                problems.append((field, f"a value strictly greater than the hard limit {property_name(hard[0])}={getattr(settings, hard[0])}"))
        for field in hysteresis:
            if _kind(field) != hard_kind:
                problems.append((field, f"hysteresis in the unit of the hard limit ({hard_kind})"))
    if len(hysteresis) > 1:
        problems.extend((field, "at most one hysteresis setting") for field in hysteresis)
    return problems


def storage_policy(settings: Settings) -> StoragePolicy:
    """The policy of a set of limits that passed the rules."""
    return policy_from_levels(*(getattr(settings, field) for field in LIMIT_FIELDS))
