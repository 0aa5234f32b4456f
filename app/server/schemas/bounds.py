"""The bounds of the OpenAPI document that are settings: the floor of each quota type (a quota
to set is at or above it) and the most members a group lists. The app writes them into the
document it generates, so that the document says what this service takes."""

from __future__ import annotations

from typing import Any

from app.quotas.change_rules import FLOOR_SETTINGS
from app.settings import Settings
from app.settings.model import property_name


def bound_by_settings(document: dict[str, Any], settings: Settings) -> None:
    schemas = document["components"]["schemas"]
    for quota_type, floor_field in FLOOR_SETTINGS.items():
        quota = schemas["QuotaLimitsBody"]["properties"][quota_type.value]
        del quota["exclusiveMinimum"]
        quota["minimum"] = getattr(settings, floor_field)
        quota["description"] += f"; at least the floor of the type, {property_name(floor_field)}"
    for members in ("users", "client_ids"):
        schemas["GroupBody"]["properties"][members]["maxItems"] = settings.quota_group_max_members
