"""A problem of the configuration, as one line naming the key, the value and what is allowed,
and the error that carries every problem found at once.

A problem about a secret key shows ``<hidden>`` for its value, whatever the value is: the key
decides, and no other text of a message is searched for secret values and rewritten."""

from __future__ import annotations

from dataclasses import dataclass

from app.redaction import SHOWN_VALUE_CHARS, bounded, printable, quoted, shown_value
from app.settings.properties import escape_key


@dataclass(frozen=True)
class Problem:
    key: str
    value: str | None  # None: not given; a secret key's value is never held, only HIDDEN
    allowed: str
    origin: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", shown_value(self.key, self.value))

    def __str__(self) -> str:
        # One line a person reads, whatever was given: a long value or key is quoted by its start.
        shown = "<missing>" if self.value is None else quoted(self.value)
        notes = [f"from {self.origin}"] if self.origin else []
        if len(self.key) > SHOWN_VALUE_CHARS:
            notes.append(f"a key of {len(self.key):,} characters")
        where = f" ({'; '.join(notes)})" if notes else ""
        # What the line says besides the key and the value may echo them too (a path, an error):
        # its control characters are escaped as the value's are.
        return f"{escape_key(bounded(self.key))}={shown}{printable(where)}: allowed: {printable(self.allowed)}"


class ConfigurationError(Exception):
    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems
