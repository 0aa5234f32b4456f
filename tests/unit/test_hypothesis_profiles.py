"""The property-based tests run derandomized, without an example database and without
shrinking where CI is set, and explore where it is not (tests/conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import Phase, settings

from tests.conftest import hypothesis_profile

ROOT = Path(__file__).resolve().parents[2]


def test_ci_selects_the_reproducible_profile_and_a_developer_machine_the_exploring_one() -> None:
    assert hypothesis_profile({"CI": "true"}) == "ci"
    assert hypothesis_profile({"CI": "1"}) == "ci"
    for unset in ({}, {"CI": ""}, {"CI": "false"}, {"CI": "0"}):
        assert hypothesis_profile(unset) == "explore"
    assert hypothesis_profile({"CI": "true", "HYPOTHESIS_PROFILE": "explore"}) == "explore"


def test_the_ci_profile_is_derandomized_keeps_no_database_and_never_shrinks() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.database is None and ci.print_blob
    assert Phase.shrink not in ci.phases and Phase.generate in ci.phases and Phase.explicit in ci.phases


def test_the_profile_in_force_is_the_one_the_environment_selects() -> None:
    assert settings.default.derandomize == (hypothesis_profile(os.environ) == "ci")


def test_the_example_database_is_not_committed() -> None:
    assert ".hypothesis/" in (ROOT / ".gitignore").read_text().splitlines()
