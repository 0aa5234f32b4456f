"""Quota resolution (KIP-55 precedence, groups, excluded principals, factor and floor),
checked against the shared vectors that the broker shim's tests use too."""

import json
from pathlib import Path

import pytest

from app.quotas.model import DEFAULT, Level, QuotaEntity, QuotaType
from app.quotas.resolution import resolve
from app.server.api.schemas.quotas import table_from_json

VECTORS = json.loads((Path(__file__).resolve().parents[1] / "quota_vectors.json").read_text())
TABLES = {name: table_from_json(table) for name, table in VECTORS["tables"].items()}


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_shared_resolution_vectors(case):
    resolution = resolve(TABLES[case["table"]], case["user"], case["client_id"], QuotaType(case["type"]), case["factor"])
    expected = case["expected"]
    assert resolution.level == expected["level"]
    assert resolution.base_limit == expected["base_limit"]
    assert resolution.limit == expected["limit"]
    assert resolution.factor == expected["factor"]
    assert resolution.tags == expected["tags"]


def test_the_vectors_cover_every_level_and_rule():
    levels = {case["expected"]["level"] for case in VECTORS["cases"]}
    assert {level.value for level in Level} <= levels
    assert {"group", "excluded principal", "defaults", "unlimited"} <= levels


def test_a_throttled_limit_is_never_zero():
    table = TABLES["unlimited"]
    for factor in (0.0, 1e-9, 0.3):
        limit = resolve(table, "u", "c", QuotaType.PRODUCE, factor).limit
        assert limit is None or limit > 0


def test_entity_levels():
    assert QuotaEntity("a", "b").level is Level.USER_CLIENT
    assert QuotaEntity("a", DEFAULT).level is Level.USER_DEFAULT_CLIENT
    assert QuotaEntity(DEFAULT, None).level is Level.DEFAULT_USER
    assert QuotaEntity(None, DEFAULT).level is Level.DEFAULT_CLIENT
    with pytest.raises(ValueError):
        QuotaEntity(None, None)
    with pytest.raises(ValueError):
        QuotaEntity("", "x")


def test_the_precedence_the_table_sends_is_the_one_resolution_follows_and_the_vectors_pin():
    from app.quotas.model import PRECEDENCE
    from app.server.api.schemas.quotas import PRECEDENCE_NAMES

    assert PRECEDENCE_NAMES == [level.value for level in PRECEDENCE] == VECTORS["precedence"]


def test_the_shim_defaults_in_the_vectors_are_the_services_defaults():
    from app.settings.model import Settings

    defaults = {name: field.default for name, field in Settings.model_fields.items()}
    floors = VECTORS["shim_defaults"]["floors"]
    assert floors["produce"] == floors["fetch"] == defaults["quota_floor_bytes"]
    assert floors["request"] == defaults["quota_floor_request"]
    assert floors["controller_mutation"] == defaults["quota_floor_controller_mutation"]
    assert VECTORS["shim_defaults"]["factor_types"] == defaults["quota_factor_types"].split(",")


def test_the_state_names_of_the_vectors_are_the_services():
    from app.decision.policy import State

    for case in VECTORS["states"]:
        assert State.of(case["factor"]).value == case["state"], case
