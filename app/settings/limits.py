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
    (
        "storage_per_volume_limit_min_available_bytes",
        "storage_per_volume_limit_min_available_ratio",
    ),
    (
        "storage_per_volume_soft_limit_min_available_bytes",
        "storage_per_volume_soft_limit_min_available_ratio",
    ),
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


@dataclass(frozen=True)
class GivenLimits:
    """What the rules of one set of limits judge: the fields of each kind that were set (an
    invalid value counts: which limits are set is known even then), and ``valid(*fields)``:
    none of them holds an invalid value (how they compare is known only then)."""

    limits: LimitFields
    settings: Settings
    valid: Callable[..., bool]
    hard: list[str]
    soft: list[str]
    hysteresis: list[str]

    @property
    def exactly_one(self) -> str:
        return f"exactly one hard limit: either {property_name(self.limits.hard[0])} or {property_name(self.limits.hard[1])}"


LimitRule = Callable[[GivenLimits], list[tuple[str, str]]]


def one_hard_limit(given: GivenLimits) -> list[tuple[str, str]]:
    """Exactly one hard limit (of an optional set, once any of it is given)."""
    if not given.hard:
        # an optional set given without its hard limit is named by what was given
        return [
            (
                given.limits.hard[0]
                if given.limits.required
                else (given.soft + given.hysteresis)[0],
                given.exactly_one,
            )
        ]
    if len(given.hard) > 1:
        return [(field, given.exactly_one + ", not both") for field in given.hard]
    return []


def at_most_one_soft_limit(given: GivenLimits) -> list[tuple[str, str]]:
    return (
        [(field, "at most one soft limit") for field in given.soft] if len(given.soft) > 1 else []
    )


def soft_limit_looser_than_hard(given: GivenLimits) -> list[tuple[str, str]]:
    """A soft limit of the hard limit's kind, strictly above it (judged against one hard limit)."""
    if len(given.hard) != 1:
        return []
    hard = given.hard[0]
    problems = []
    for field in given.soft:
        if _kind(field) != _kind(hard):
            problems.append(
                (field, f"a soft limit of the same kind as the hard limit ({_kind(hard)})")
            )
        elif (
            len(given.soft) == 1
            and given.valid(field, hard)
            and getattr(given.settings, field) <= getattr(given.settings, hard)
        ):
            problems.append(
                (
                    field,
                    f"a value strictly greater than the hard limit {property_name(hard)}={getattr(given.settings, hard)}",
                )
            )
    return problems


def hysteresis_of_hard_kind(given: GivenLimits) -> list[tuple[str, str]]:
    """Hysteresis in the hard limit's unit (judged against one hard limit)."""
    if len(given.hard) != 1:
        return []
    hard_kind = _kind(given.hard[0])
    return [
        (field, f"hysteresis in the unit of the hard limit ({hard_kind})")
        for field in given.hysteresis
        if _kind(field) != hard_kind
    ]


def at_most_one_hysteresis(given: GivenLimits) -> list[tuple[str, str]]:
    return (
        [(field, "at most one hysteresis setting") for field in given.hysteresis]
        if len(given.hysteresis) > 1
        else []
    )


# The rules between the settings of one set of limits, in the order their problems are reported.
LIMIT_RULES: tuple[LimitRule, ...] = (
    one_hard_limit,
    at_most_one_soft_limit,
    soft_limit_looser_than_hard,
    hysteresis_of_hard_kind,
    at_most_one_hysteresis,
)


def limit_rules(
    settings: Settings,
    given: Callable[[str], bool],
    valid: Callable[..., bool],
    limits: LimitFields = DATA_LIMITS,
) -> list[tuple[str, str]]:
    """(field, what is allowed) for each of ``LIMIT_RULES`` that the settings of one set of
    ``limits`` in ``settings`` break. ``given(field)``: the field was set (an invalid value
    counts: which limits are set is known even then); ``valid(*fields)``: none of them holds
    an invalid value (how they compare is known only then)."""
    judged = GivenLimits(
        limits,
        settings,
        valid,
        [f for f in limits.hard if given(f)],
        [f for f in limits.soft if given(f)],
        [f for f in limits.hysteresis if given(f)],
    )
    if not limits.required and not (judged.hard or judged.soft or judged.hysteresis):
        return []
    return [problem for rule in LIMIT_RULES for problem in rule(judged)]


def storage_policy(settings: Settings) -> StoragePolicy:
    """The policy of a set of limits that passed the rules."""
    return policy_from_levels(*(getattr(settings, field) for field in LIMIT_FIELDS))


def metadata_policy(settings: Settings) -> StoragePolicy | None:
    """The metadata volumes' policy, or None when no metadata limit is configured."""
    if all(getattr(settings, field) is None for field in METADATA_LIMITS.hard):
        return None
    return policy_from_levels(*(getattr(settings, field) for field in METADATA_LIMITS.fields))
