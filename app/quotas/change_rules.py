"""What a quota change must hold before it is stored: names that Kafka's tools take and show
back unchanged, and quotas no lower than the floor the throttle factor stops at. Each check
returns why it refuses, or None."""

from __future__ import annotations

import unicodedata

from app.quotas.model import QuotaType, QuotaValues
from app.settings.model import property_name

PRINCIPAL_PREFIX = "User:"

# The setting that gives each quota type its floor.
FLOOR_SETTINGS: dict[QuotaType, str] = {
    QuotaType.PRODUCE: "quota_floor_bytes",
    QuotaType.FETCH: "quota_floor_bytes",
    QuotaType.REQUEST: "quota_floor_request",
    QuotaType.CONTROLLER_MUTATION: "quota_floor_controller_mutation",
}

# Characters no name may hold: they end or split a line in logs and tools (NUL, CR, LF and the
# other controls, U+2028/U+2029), or show a name other than it is (the U+202E right-to-left
# override and the zero-width characters are format characters).
_REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def name_problem(name: str) -> str | None:
    """Why a user or client id cannot name an entity or a group member, or None."""
    if not name:
        return "must not be empty"
    for character in name:
        category = unicodedata.category(character)
        if category in _REFUSED_CATEGORIES:
            return f"must not hold {_REFUSED_CATEGORIES[category]} (U+{ord(character):04X})"
    if name.strip() != name:
        return "must not begin or end with whitespace"
    return None


def user_name_problem(name: str) -> str | None:
    """As name_problem, and a user is named as Kafka's quota entities name it: without User:."""
    problem = name_problem(name)
    if problem is None and name.startswith(PRINCIPAL_PREFIX):
        return f"give the principal name without the {PRINCIPAL_PREFIX} prefix ({name[len(PRINCIPAL_PREFIX):]!r})"
    return problem


def group_name_problem(name: str) -> str | None:
    """The path pattern allows dots; a name of dots alone would be a path segment of its own."""
    if name in (".", ".."):
        return f"{name!r} cannot name a group (it is a relative path segment)"
    return None


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def floor_problems(limits: QuotaValues, floors: dict[QuotaType, float]) -> dict[QuotaType, str]:
    """Why each quota below the floor of its type is refused: the factor never brings a quota
    lower, and Kafka divides by the quota to compute a throttle time (see docs/quotas.md)."""
    return {
        quota_type: f"{_number(value)} is below the floor of {quota_type.value} quotas, "
        f"{_number(floors[quota_type])} ({property_name(FLOOR_SETTINGS[quota_type])})"
        for quota_type, value in limits.items()
        if value < floors[quota_type]
    }
