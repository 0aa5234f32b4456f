"""A decider's state between rounds, saved and taken up again: a decider restored from a snapshot
decides, round after round, exactly as the one it was taken from (the restart and replica
promise of docs/architecture.md, "State that outlives the process")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.decision.decider import ThrottleDecider
from app.decision.factor import FactorSource
from app.decision.policy import LimitKind, StoragePolicy
from app.decision.snapshot import SnapshotError, restore_decider
from app.observation.model import ObservationRound, VolumeObservation
from app.observation.node_reports import NodeReport, NodeVolume
from app.server.api.schemas.decision import decision_response
from app.server.api.schemas.volumes import volumes_view

MiB = 1024 * 1024
POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, hard_level=8 * MiB, soft_level=24 * MiB, hysteresis=2 * MiB)
METADATA_POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_level=0.1, soft_level=0.3, hysteresis=0.05)
VALIDITY = 30.0


def new_decider(horizon: float | None = 60.0, fallback: float = 0.0, policy: StoragePolicy = POLICY) -> ThrottleDecider:
    return ThrottleDecider(policy, VALIDITY, fallback, started_at=0.0, horizon_seconds=horizon, metadata_policy=METADATA_POLICY)


def shown(d: ThrottleDecider, now: float) -> tuple:
    """Everything a client can read of a decider at ``now``."""
    return decision_response(d.decision(now)).model_dump(), volumes_view(d, now).model_dump()


# A small cluster the events below act on: brokers 1-3 with two log dirs each, nodes 1-4 reporting.
BROKERS = (1, 2, 3)
DIRS = ("/data/a", "/data/b")


@st.composite
def events(draw) -> list[tuple]:
    """Rounds (complete, with a missing or fenced broker, failed) and node reports, 1-3 s apart."""
    usable = {(b, d): draw(st.integers(4 * MiB, 60 * MiB)) for b in BROKERS for d in DIRS}
    out, at = [], 0.0
    for _ in range(draw(st.integers(2, 40))):
        at += draw(st.sampled_from([1.0, 1.5, 2.0, 3.0]))
        kind = draw(st.sampled_from(["round", "round", "round", "missing", "fenced", "failed", "report", "data"]))
        for key in usable:
            usable[key] = max(0, usable[key] - draw(st.integers(-2 * MiB, 3 * MiB)))
        if kind == "data":  # a broker's shim reports its data dirs (near what a round would see, or not)
            broker = draw(st.sampled_from(BROKERS))
            skew = draw(st.sampled_from([0, 0, 256 * 1024, -8 * MiB]))
            out.append(("data", at, broker, tuple(max(0, usable[(broker, d)] + skew) for d in DIRS)))
            continue
        if kind == "report":
            node = draw(st.integers(1, 4))
            free = draw(st.integers(0, 100))
            out.append(("report", at, node, free))
            continue
        if kind == "failed":
            out.append(("round", ObservationRound(at, at, error="cluster unreachable")))
            continue
        active, fenced, missing = list(BROKERS), (), {}
        if kind == "fenced":
            broker = draw(st.sampled_from(BROKERS))
            active.remove(broker)
            fenced = (broker,)
        if kind == "missing":
            missing = {draw(st.sampled_from(BROKERS)): "KafkaTimeoutError"}
        observations = tuple(
            VolumeObservation(b, d, 64 * MiB, usable[(b, d)], at, "KAFKA_STORAGE_ERROR" if usable[(b, d)] == 0 else None)
            for b in active
            if b not in missing
            for d in DIRS
        )
        out.append(("round", ObservationRound(at - 0.2, at, tuple(active), observations, missing, None, fenced)))
    return out


def apply(d: ThrottleDecider, event: tuple) -> float:
    if event[0] == "round":
        d.apply_round(event[1])
        return event[1].finished_at
    if event[0] == "data":
        _, at, broker, free = event
        volumes = tuple(NodeVolume(dir_, 64 * MiB, f, frozenset({"data"})) for dir_, f in zip(DIRS, free, strict=True))
        d.record_node_report(NodeReport(broker, frozenset({"broker"}), volumes, at))
        return at
    _, at, node, free = event
    volume = NodeVolume("/meta", 100 * MiB, free * MiB, frozenset({"metadata", "data"} if node == 1 else {"metadata"}))
    d.record_node_report(NodeReport(node, frozenset({"broker", "controller"}), (volume,), at))
    return at


@settings(max_examples=60, deadline=None)
@given(events(), st.data(), st.sampled_from([None, 60.0]))
def test_a_mirrored_decider_answers_every_read_and_every_later_round_as_the_original(events, data, horizon):
    original = new_decider(horizon)
    cut = data.draw(st.integers(0, len(events)))
    now = 0.0
    for event in events[:cut]:
        now = apply(original, event)
    replica = new_decider(horizon)
    replica.mirror(original.snapshot(now), now)
    for later in (now, now + 0.5, now + VALIDITY / 2, now + VALIDITY + 1):
        assert shown(replica, later) == shown(original, later)
    assert replica.registered_brokers() == original.registered_brokers()
    for event in events[cut:]:
        now = apply(original, event)
        apply(replica, event)
        assert shown(replica, now) == shown(original, now)
        assert shown(replica, now + VALIDITY / 3) == shown(original, now + VALIDITY / 3)
        assert replica.registered_brokers() == original.registered_brokers()


@settings(max_examples=60, deadline=None)
@given(events(), st.data())
def test_a_resumed_decider_serves_the_saved_factor_as_last_valid_then_decides_as_if_it_never_stopped(events, data):
    original = new_decider()
    cut = data.draw(st.integers(1, len(events)))
    now = 0.0
    for event in events[:cut]:
        now = apply(original, event)
    restarted = new_decider()
    restarted.resume(original.snapshot(now), now + 0.5)
    before, after = original.reading(now + 0.5), restarted.reading(now + 0.5)
    assert after.factor == before.factor, "a restart never changes the factor in force"
    expected_source = FactorSource.LAST_VALID if before.source is FactorSource.OBSERVED else before.source
    assert after.source is expected_source
    assert restarted.decision(now + 0.5).resumed_from == now
    own_round = False
    for event in events[cut:]:
        now = apply(original, event)
        apply(restarted, event)
        own_round = own_round or event[0] == "round"
        if own_round:  # from its first round on, exactly the decisions of the one that never stopped
            assert restarted.decision(now).resumed_from is None
            assert shown(restarted, now) == shown(original, now)


def test_a_halted_full_brokers_kept_observation_holds_the_pause_across_a_restart():
    """The incident of the state issue: broker 3 halted on a full log dir, listed fenced; the
    service restarted with its saved state decides PAUSE before and at its first round."""
    original = new_decider(horizon=None, fallback=1.0)
    full = VolumeObservation(3, "/data/a", 64 * MiB, 0, 10.0, "KAFKA_STORAGE_ERROR")
    healthy = [VolumeObservation(b, "/data/a", 64 * MiB, 40 * MiB, 10.0) for b in (1, 2)]
    original.apply_round(ObservationRound(9.8, 10.0, (1, 2, 3), (*healthy, full)))
    for at in range(12, 600, 2):  # broker 3 halted: listed fenced, not asked
        obs = tuple(VolumeObservation(b, "/data/a", 64 * MiB, 40 * MiB, float(at)) for b in (1, 2))
        original.apply_round(ObservationRound(at - 0.2, float(at), (1, 2), obs, fenced_brokers=(3,)))
    assert original.reading(598).factor == 0.0
    saved = original.snapshot(598.0)

    restarted = ThrottleDecider(POLICY, VALIDITY, 1.0, started_at=610.0, metadata_policy=METADATA_POLICY)
    restarted.resume(saved, 610.0)
    # No round of its own yet: the saved pause, as last-valid, until the saved view expires.
    assert (restarted.reading(610.0).factor, restarted.reading(610.0).source) == (0.0, FactorSource.LAST_VALID)
    obs = tuple(VolumeObservation(b, "/data/a", 64 * MiB, 40 * MiB, 612.0) for b in (1, 2))
    restarted.apply_round(ObservationRound(611.8, 612.0, (1, 2), obs, fenced_brokers=(3,)))
    decision = restarted.decision(612.0)
    assert (decision.factor, decision.source) == (0.0, FactorSource.OBSERVED)
    assert [v.volume.broker_id for v in decision.evaluation.breaching] == [3]
    assert decision.fenced_brokers == frozenset({3})
    # Without the saved state the same round opens the cluster: what the issue measured.
    forgetful = ThrottleDecider(POLICY, VALIDITY, 1.0, started_at=610.0, metadata_policy=METADATA_POLICY)
    forgetful.apply_round(ObservationRound(611.8, 612.0, (1, 2), obs, fenced_brokers=(3,)))
    assert forgetful.reading(612.0).factor == 1.0


def test_a_state_older_than_its_validity_keeps_the_facts_and_starts_from_the_grace():
    original = new_decider(horizon=None)
    obs = tuple(VolumeObservation(b, "/data/a", 64 * MiB, 4 * MiB, 10.0) for b in (1, 2))
    original.apply_round(ObservationRound(9.8, 10.0, (1, 2), obs))
    restarted = ThrottleDecider(POLICY, VALIDITY, 0.0, started_at=500.0, metadata_policy=METADATA_POLICY)
    restarted.resume(original.snapshot(10.0), 500.0)
    reading = restarted.reading(500.0)
    assert (reading.factor, reading.source) == (1.0, FactorSource.INITIAL), "nothing kept past its expiry"


def test_a_snapshot_under_other_limits_brings_back_the_observations_and_judges_them_again():
    original = new_decider(horizon=None)
    full = VolumeObservation(3, "/data/a", 64 * MiB, 0, 10.0, "KAFKA_STORAGE_ERROR")
    original.apply_round(ObservationRound(9.8, 10.0, (1, 2), (), fenced_brokers=(3,)))
    original.apply_round(ObservationRound(11.8, 12.0, (1, 2, 3), (full,)))
    original.apply_round(ObservationRound(13.8, 14.0, (1, 2), (), fenced_brokers=(3,)))
    other = StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, hard_level=0.05)
    restarted = ThrottleDecider(other, VALIDITY, 1.0, started_at=20.0, metadata_policy=METADATA_POLICY)
    restored = restarted.resume(original.snapshot(14.0), 20.0)
    assert not restored.exact and restored.volumes == 1
    assert restarted.reading(20.0).source is FactorSource.INITIAL
    restarted.apply_round(ObservationRound(21.8, 22.0, (1, 2), (), fenced_brokers=(3,)))
    assert restarted.reading(22.0).factor == 0.0, "the kept observation of the fenced broker judged by the new limits"
    with pytest.raises(SnapshotError, match="other settings"):
        ThrottleDecider(other, VALIDITY, 1.0, started_at=20.0).mirror(original.snapshot(14.0), 20.0)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "too short"),
        (b"XXXX" + bytes(8), "not a decider snapshot"),
        (b"KTDS" + (99).to_bytes(4, "little") + bytes(4), "format 99"),
    ],
)
def test_bytes_that_are_no_snapshot_are_refused_with_a_reason(data, message):
    with pytest.raises(SnapshotError, match=message):
        restore_decider(new_decider(), data, 0.0)


def test_a_snapshot_cut_short_is_refused():
    d = new_decider()
    d.apply_round(ObservationRound(0.8, 1.0, (1,), (VolumeObservation(1, "/d", 64 * MiB, 30 * MiB, 1.0),)))
    data = d.snapshot(1.0)
    with pytest.raises(SnapshotError):
        restore_decider(new_decider(), data[:-3], 1.0)


@settings(max_examples=40, deadline=None)
@given(events())
def test_a_snapshot_taken_after_others_is_the_snapshot_a_fresh_process_would_take(events):
    """Snapshots reuse the encoding of a node's judged report that has not changed since the
    one before; taken after every event, each is byte for byte the one taken with nothing
    reused."""
    from app.decision import snapshot

    d = new_decider()
    now = 0.0
    for event in events:
        now = apply(d, event)
        reused = d.snapshot(now)
        snapshot._ENCODED.pop(d.metadata, None)
        assert reused == d.snapshot(now)
        d.snapshot(now)  # and the next one reuses again
