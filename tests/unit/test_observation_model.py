"""The observation model's own helpers."""

import dataclasses
import pickle

import pytest

from app.observation.model import ADMIN_API, ObservationRound, VolumeObservation, admin_observation


@pytest.mark.parametrize("error", [None, "KAFKA_STORAGE_ERROR"])
def test_an_admin_observation_is_the_dataclass_made_by_its_constructor(error):
    made = admin_observation(7, "/data/a", 1000, -1 if error else 250, 12.5, error)
    built = VolumeObservation(7, "/data/a", 1000, -1 if error else 250, 12.5, error)
    assert type(made) is VolumeObservation
    assert made == built and hash(made) == hash(built) and repr(made) == repr(built)
    assert dataclasses.astuple(made) == dataclasses.astuple(built)
    assert made.observed_by == ADMIN_API and made.key == (7, "/data/a")
    assert pickle.loads(pickle.dumps(made)) == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.usable_bytes = 1  # type: ignore[misc]


def test_kept_reasons_follow_the_round_brokers():
    round_ = ObservationRound(0.0, 1.0, (1, 2, 3), (), {2: "timed out"}, fenced_brokers=(4,))
    assert [round_.kept_reason(b) for b in (1, 2, 4, 5)] == [None, "missing", "fenced", "unregistered"]
    assert ObservationRound(0.0, 1.0, error="unreachable").kept_reason(1) == "last-valid"
