"""The bounds of the OpenAPI document that are settings: the floor of each quota type (a quota
to set is at or above it) and the most members a group lists. The app writes them into the
document it generates, so that the document says what this service takes.

Also the integer bounds as the models give them: FastAPI's model of the document holds every
minimum and maximum as a float, which writes 0 as 0.0 and rounds a Java long's maximum (the
bound of byte counts, 2^63 - 1) up to 9.223372036854776e+18, 2^63, a value the service refuses."""

from __future__ import annotations

from typing import Any

from app.quotas.change_rules import FLOOR_SETTINGS
from app.settings import Settings
from app.settings.model import property_name

# No integer of the API is larger: byte counts are a Java long's, as Kafka and FileStore give them.
LONG_MAX = 2**63 - 1
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def exact_integer_bounds(node: Any) -> None:
    """Every bound of an integer schema in ``node`` written back as the integer it was."""
    if isinstance(node, dict):
        if node.get("type") == "integer":
            for key in _BOUNDS:
                if isinstance(node.get(key), float):
                    node[key] = LONG_MAX if node[key] >= LONG_MAX else int(node[key])
        for value in node.values():
            exact_integer_bounds(value)
    elif isinstance(node, list):
        for value in node:
            exact_integer_bounds(value)


def bound_by_settings(document: dict[str, Any], settings: Settings) -> None:
    exact_integer_bounds(document)
    schemas = document["components"]["schemas"]
    for quota_type, floor_field in FLOOR_SETTINGS.items():
        quota = schemas["QuotaLimitsBody"]["properties"][quota_type.value]
        del quota["exclusiveMinimum"]
        quota["minimum"] = getattr(settings, floor_field)
        quota["description"] += f"; at least the floor of the type, {property_name(floor_field)}"
    for members in ("users", "client_ids"):
        schemas["GroupBody"]["properties"][members]["maxItems"] = settings.quota_group_max_members
