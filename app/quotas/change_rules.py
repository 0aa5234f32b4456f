"""What a quota change must hold before it is stored: names that Kafka's tools take and show
back unchanged, and quotas no lower than the floor the throttle factor stops at. Each check
returns why it refuses, or None."""

from __future__ import annotations

import functools
import sys
import unicodedata

from app.quotas.model import QuotaEntity, QuotaGroup, QuotaTable, QuotaType, QuotaValues
from app.settings.model import property_name

PRINCIPAL_PREFIX = "User:"
DEFAULT_NAME = "<default>"  # Kafka's name for the default entity of a kind
# Kafka takes longer names, but a name travels in every table a shim receives and in log lines;
# 1 KiB holds any principal name or client id seen in practice (a certificate DN included).
NAME_MAX_BYTES = 1024

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
    "Cs": "a lone surrogate (not UTF-8)",
}


def name_problem(name: str) -> str | None:
    """Why a user or client id cannot name an entity or a group member, or None."""
    if not name:
        return "must not be empty"
    if (
        len(name) > NAME_MAX_BYTES // 4
        and len(name.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES
    ):
        return f"must be at most {NAME_MAX_BYTES} bytes in UTF-8"
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
        return f"give the principal name without the {PRINCIPAL_PREFIX} prefix ({name[len(PRINCIPAL_PREFIX) :]!r})"
    return problem


def member_name_problem(name: str, users: bool) -> str | None:
    """Why a name cannot be a group's member: as an entity's name, and never the default entity."""
    if name == DEFAULT_NAME:
        return f"{DEFAULT_NAME} cannot be a group member"
    return user_name_problem(name) if users else name_problem(name)


@functools.cache
def name_pattern(users: bool, members: bool) -> str:
    """The rules of name_problem (and user_name_problem, member_name_problem) but the length, as
    a regular expression for the OpenAPI document: no refused character, none of str.strip()'s
    whitespace at either end, users without the principal prefix, members not the default."""
    characters = [chr(code) for code in range(sys.maxunicode + 1)]
    # Lone surrogates are left out: they are no Unicode scalar values, so no regular expression
    # engine of a UTF-8 validator can name them (nor a UTF-8 JSON text hold them but as escapes).
    pattern_categories = set(_REFUSED_CATEGORIES) - {"Cs"}
    refused = [
        ord(c)
        for c, category in zip(characters, map(unicodedata.category, characters))
        if category in pattern_categories
    ]
    spaces = [ord(c) for c in filter(str.isspace, characters)]
    anywhere = _character_class(refused)
    at_ends = _character_class(sorted(set(refused + spaces)))
    lookaheads = (f"(?!{PRINCIPAL_PREFIX})" if users else "") + (
        f"(?!{DEFAULT_NAME}$)" if members else ""
    )
    return f"^{lookaheads}{at_ends}({anywhere}*{at_ends})?$"


def _character_class(codes: list[int]) -> str:
    """A negated character class of these code points, as runs of ranges."""
    runs: list[list[int]] = []
    for code in codes:
        if runs and runs[-1][1] == code - 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    escaped = "".join(
        _escape(low) if low == high else f"{_escape(low)}-{_escape(high)}" for low, high in runs
    )
    return f"[^{escaped}]"


def _escape(code: int) -> str:
    # \uXXXX reads the same in ECMA-262 (JSON Schema's dialect) and Python; beyond the BMP the
    # character itself does, where the escapes differ (\u{...} against \U...).
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


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


def table_entries(table: QuotaTable) -> int:
    """What the table's size is counted in: each override and each group member is one entry."""
    return len(table.overrides) + len(table.user_groups) + len(table.client_groups)


def table_size_problem(
    table: QuotaTable,
    max_entries: int,
    entity: QuotaEntity | None = None,
    group: QuotaGroup | None = None,
) -> str | None:
    """Why setting ``entity``'s override or ``group`` would make the table too large, or None. A
    change that does not grow the table passes even when it is over the cap (lowered since)."""
    before = table_entries(table)
    after = before + (entity is not None and entity not in table.overrides)
    if group is not None:
        replaced = table.groups.get(group.name)
        after += (
            len(group.users)
            + len(group.client_ids)
            - (len(replaced.users) + len(replaced.client_ids) if replaced else 0)
        )
    if after > max_entries and after > before:
        return (
            f"the quota table would hold {after} entries (overrides and group members), more than "
            f"{max_entries} ({property_name('quota_table_max_entries')}); remove some first or raise the limit"
        )
    return None
