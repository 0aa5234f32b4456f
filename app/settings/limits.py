"""The storage limits as a set of their own: the six settings that make one, the rules between
them, and the policy they give.

One set of rules for every place a set of limits comes from: the service's configuration at
start-up (``load_settings``), a candidate set tried on the live view (``POST /what-if``) and
the candidate sets of the report's backtest (``throttle-report --limits``). The metadata
volumes' limits (``throttle.service.metadata.*``) are a second set of the same shape, judged by
the same rules, except that they are optional as a whole."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.decision.policy import StoragePolicy, policy_from_levels
from app.settings.model import Settings, property_name


@dataclass(frozen=True)
class LimitFields:
    """The settings fields of one set of limits: (bytes, ratio) for each of hard, soft and
    hysteresis. ``required``: the set must state a hard limit (the data volumes'); an optional
    set (the metadata volumes') may be left out whole, but once any of it is given it needs
    its hard limit too."""

    hard: tuple[str, str]
    soft: tuple[str, str]
    hysteresis: tuple[str, str]
    required: bool = True

    @property
    def fields(self) -> tuple[str, ...]:
        return self.hard + self.soft + self.hysteresis


DATA_LIMITS = LimitFields(
    ("storage_per_volume_limit_min_available_bytes", "storage_per_volume_limit_min_available_ratio"),
    ("storage_per_volume_soft_limit_min_available_bytes", "storage_per_volume_soft_limit_min_available_ratio"),
    ("storage_per_volume_limit_hysteresis_bytes", "storage_per_volume_limit_hysteresis_ratio"),
)
METADATA_LIMITS = LimitFields(
    ("metadata_limit_min_available_bytes", "metadata_limit_min_available_ratio"),
    ("metadata_soft_limit_min_available_bytes", "metadata_soft_limit_min_available_ratio"),
    ("metadata_limit_hysteresis_bytes", "metadata_limit_hysteresis_ratio"),
    required=False,
)
HARD_LIMITS, SOFT_LIMITS, HYSTERESIS = DATA_LIMITS.hard, DATA_LIMITS.soft, DATA_LIMITS.hysteresis
LIMIT_FIELDS = DATA_LIMITS.fields


def _kind(field: str) -> str:
    return "bytes" if field.endswith("bytes") else "ratio"


def limit_rules(
    settings: Settings, given: Callable[[str], bool], valid: Callable[..., bool], limits: LimitFields = DATA_LIMITS
) -> list[tuple[str, str]]:
    """(field, what is allowed) for each rule between the settings of one set of ``limits``
    that ``settings`` break. ``given(field)``: the field was set (an invalid value counts:
    which limits are set is known even then); ``valid(*fields)``: none of them holds an
    invalid value (how they compare is known only then)."""
    problems: list[tuple[str, str]] = []
    hard = [f for f in limits.hard if given(f)]
    soft = [f for f in limits.soft if given(f)]
    hysteresis = [f for f in limits.hysteresis if given(f)]
    if not limits.required and not (hard or soft or hysteresis):
        return problems
    exactly_one = f"exactly one hard limit: either {property_name(limits.hard[0])} or {property_name(limits.hard[1])}"
    if not hard:
        # an optional set given without its hard limit is named by what was given
        problems.append((limits.hard[0] if limits.required else (soft + hysteresis)[0], exactly_one))
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


def metadata_policy(settings: Settings) -> StoragePolicy | None:
    """The metadata volumes' policy, or None when no metadata limit is configured."""
    if all(getattr(settings, field) is None for field in METADATA_LIMITS.hard):
        return None
    return policy_from_levels(*(getattr(settings, field) for field in METADATA_LIMITS.fields))
