"""The README's configuration table, generated from the settings model.

``python -m app.settings.reference`` prints it; a test fails when the README's copy differs."""

from __future__ import annotations

from datetime import timedelta

from app.settings.durations import format_duration
from app.settings.model import Settings, allowed_values, env_name, property_name


def _default(value: object) -> str:
    if value is None:
        return "(none)"
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


if __name__ == "__main__":
    print(configuration_table())
