"""The cache of last observations per (broker, log dir), and how long each stays in the view."""

from app.observation.cache import VolumeCache
from app.observation.model import ObservationRound, VolumeObservation


def obs(broker: int, log_dir: str, at: float, usable: int = 100) -> VolumeObservation:
    return VolumeObservation(broker, log_dir, 1000, usable, observed_at=at)


def round_at(at: float, active: list[int], observations: list[VolumeObservation], fenced: tuple[int, ...] = ()) -> ObservationRound:
    return ObservationRound(at, at, tuple(active), tuple(observations), fenced_brokers=fenced)


def test_eviction_happens_only_past_the_validity_boundary():
    cache = VolumeCache(validity_seconds=300)
    cache.record_round(round_at(0.0, [1], [obs(1, "/a", at=0.0)]))
    assert cache.evict_expired(300.0) == []  # exactly validity old: kept
    assert len(cache) == 1
    evicted = cache.evict_expired(300.001)
    assert [v.key for v in evicted] == [(1, "/a")]
    assert len(cache) == 0


def test_a_broker_missing_from_a_round_keeps_its_last_observation():
    cache = VolumeCache(300)
    cache.record_round(round_at(0.0, [1, 2], [obs(1, "/a", 0.0), obs(2, "/b", 0.0)]))
    cache.record_round(round_at(60.0, [1], [obs(1, "/a", 60.0, usable=50)]))
    cache.evict_expired(60.0)
    by_key = {v.key: v for v in cache.volumes()}
    assert by_key[(2, "/b")].observed_at == 0.0
    assert by_key[(1, "/a")].usable_bytes == 50


def test_an_answering_broker_replaces_all_its_log_dirs():
    cache = VolumeCache(300)
    cache.record_round(round_at(0.0, [1], [obs(1, "/a", 0.0), obs(1, "/b", 0.0)]))
    cache.record_round(round_at(10.0, [1], [obs(1, "/a", 10.0)]))
    assert [v.key for v in cache.volumes()] == [(1, "/a")]
    assert cache.brokers() == {1}


def test_a_fenced_broker_keeps_its_observation_for_as_long_as_it_stays_registered():
    cache = VolumeCache(validity_seconds=10, keep_fenced=True)
    cache.record_round(round_at(0.0, [1, 2], [obs(1, "/a", 0.0), obs(2, "/b", 0.0, usable=0)]))
    for at in range(1, 100):  # broker 2 halted: every round lists it as fenced
        cache.record_round(round_at(float(at), [1], [obs(1, "/a", float(at))], fenced=(2,)))
        assert cache.evict_expired(float(at)) == []
    kept = {v.key: v for v in cache.volumes()}[(2, "/b")]
    assert (kept.observed_at, cache.expires_at(kept), cache.fenced) == (0.0, 99.0 + 10, {2})


def test_an_unregistered_broker_is_forgotten_a_validity_after_it_was_last_confirmed():
    cache = VolumeCache(validity_seconds=10, keep_fenced=True)
    cache.record_round(round_at(0.0, [1, 2], [obs(1, "/a", 0.0), obs(2, "/b", 0.0)]))
    cache.record_round(round_at(50.0, [1], [obs(1, "/a", 50.0)], fenced=(2,)))
    cache.record_round(round_at(51.0, [1], [obs(1, "/a", 51.0)]))  # unregistered: no longer listed
    entry = {v.key: v for v in cache.volumes()}[(2, "/b")]
    assert (cache.expires_at(entry), cache.fenced) == (50.0 + 10, set())
    assert cache.evict_expired(60.0) == []
    assert [v.key for v in cache.evict_expired(60.001)] == [(2, "/b")]


def test_with_expire_a_fenced_broker_is_forgotten_like_an_unregistered_one():
    cache = VolumeCache(validity_seconds=10, keep_fenced=False)
    cache.record_round(round_at(0.0, [1, 2], [obs(1, "/a", 0.0), obs(2, "/b", 0.0)]))
    cache.record_round(round_at(5.0, [1], [obs(1, "/a", 5.0)], fenced=(2,)))
    entry = {v.key: v for v in cache.volumes()}[(2, "/b")]
    assert (cache.expires_at(entry), cache.fenced) == (0.0 + 10, {2})
    assert [v.key for v in cache.evict_expired(10.001)] == [(2, "/b")]


def test_a_failed_round_confirms_nothing_and_changes_nothing():
    cache = VolumeCache(validity_seconds=10, keep_fenced=True)
    cache.record_round(round_at(0.0, [1], [obs(1, "/a", 0.0)], fenced=(2,)))
    cache.record_round(ObservationRound(5.0, 5.0, error="DescribeCluster failed"))
    assert [(v.key, cache.expires_at(v)) for v in cache.volumes()] == [((1, "/a"), 0.0 + 10)]
    assert cache.fenced == {2}, "the latest DescribeCluster answer still stands"


def test_a_round_that_lists_only_fenced_brokers_still_confirms_them():
    # Every broker halted: DescribeCluster answers, but there is no active broker to ask.
    cache = VolumeCache(validity_seconds=10, keep_fenced=True)
    cache.record_round(round_at(0.0, [1], [obs(1, "/a", 0.0, usable=0)]))
    cache.record_round(ObservationRound(30.0, 30.0, fenced_brokers=(1,), error="DescribeCluster listed no active broker"))
    assert [(v.key, cache.expires_at(v)) for v in cache.volumes()] == [((1, "/a"), 30.0 + 10)]
    assert cache.fenced == {1}


def test_the_brokers_follow_every_change_of_the_entries():
    cache = VolumeCache(300)
    cache.record_round(round_at(0.0, [1, 2], [obs(1, "/a", 0.0), obs(2, "/a", 0.0)]))
    assert cache.brokers() == {1, 2}
    cache.brokers().add(9)  # a copy: the caller's to change
    assert cache.brokers() == {1, 2}
    # broker 2 missing: its entry is kept, in the order the entries had
    cache.record_round(ObservationRound(200.0, 200.0, (1, 2), (obs(1, "/a", 200.0), obs(1, "/b", 200.0)), {2: "timed out"}))
    assert cache.brokers() == {1, 2} and [v.key for v in cache.volumes()] == [(2, "/a"), (1, "/a"), (1, "/b")]
    cache.evict_expired(301.0)  # broker 2's observation expires: the dict is changed in place
    assert cache.brokers() == {1}
    cache.record_round(round_at(400.0, [3], [obs(3, "/a", 400.0)]))  # 1 did not answer: kept
    assert cache.brokers() == {1, 3}
    cache.record_round(round_at(410.0, [1, 3], [obs(1, "/a", 410.0), obs(3, "/a", 410.0)]))  # all answered
    assert [v.key for v in cache.volumes()] == [(1, "/a"), (3, "/a")] and cache.brokers() == {1, 3}


def test_observations_are_grouped_by_expiry_in_the_order_the_entries_hold_them():
    cache = VolumeCache(300)
    cache.record_round(round_at(0.0, [1, 2, 3], [obs(1, "/a", 0.0), obs(2, "/a", 0.0), obs(3, "/a", 0.0)]))
    cache.record_round(ObservationRound(5.0, 5.0, (1, 2, 3), (obs(2, "/a", 5.0), obs(2, "/b", 5.0)), {1: "timed out", 3: "timed out"}))
    cache.record_round(ObservationRound(9.0, 9.0, (1, 2, 3), (obs(3, "/a", 0.0),), {1: "timed out", 2: "timed out"}))
    # entries: 1/a at 0, 2/a and 2/b at 5, 3/a at 0 again (a run of the first time after another)
    groups = cache.by_expiry()
    assert list(groups) == [300.0, 305.0]
    assert [v.key for v in groups[300.0]] == [(1, "/a"), (3, "/a")]
    assert [v.key for v in groups[305.0]] == [(2, "/a"), (2, "/b")]
