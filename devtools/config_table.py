"""The configuration table of docs/configuration.md, generated from the settings model.

``python -m devtools.config_table`` prints it, ``... --update docs/configuration.md`` rewrites
the copy between the markers; a test fails when that copy differs."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from app.settings.durations import format_duration
from app.settings.model import Settings, allowed_values, env_name, property_name


def _default(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, timedelta):
        return format_duration(value)
    if value in ({}, ""):
        return "(none)"
    return str(value)


def configuration_table() -> str:
    rows = [
        "| property | environment variable | default | allowed | meaning |",
        "|---|---|---|---|---|",
    ]
    for field, info in Settings.model_fields.items():
        prop = property_name(field)
        env = env_name(prop).replace("*", "<PROPERTY>")
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        default = extra.get("shown_default") or _default(info.default)
        rows.append(f"| `{prop}` | `{env}` | {default} | {allowed_values(field)} | {info.description} |")
    return "\n".join(rows)


START_MARKER = "<!-- configuration-table"
END_MARKER = "<!-- /configuration-table -->"


def update_document(path: Path) -> None:
    """Replace the table between the document's markers with the generated one."""
    text = path.read_text()
    start = text.index("\n", text.index(START_MARKER)) + 1
    end = text.index(END_MARKER)
    path.write_text(text[:start] + configuration_table() + "\n" + text[end:])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--update"]:
        update_document(Path(sys.argv[2]))
    else:
        print(configuration_table())
