"""The cache of last observations per (broker, log dir)."""

from app.volumes.cache import VolumeCache
from app.volumes.model import VolumeObservation


def obs(broker: int, log_dir: str, at: float, usable: int = 100) -> VolumeObservation:
    return VolumeObservation(broker, log_dir, 1000, usable, observed_at=at)


def test_eviction_happens_only_past_the_validity_boundary():
    cache = VolumeCache(validity_seconds=300)
    cache.record_round([1], [obs(1, "/a", at=0.0)])
    assert cache.evict_expired(300.0) == []  # exactly validity old: kept
    assert len(cache) == 1
    evicted = cache.evict_expired(300.001)
    assert [v.key for v in evicted] == [(1, "/a")]
    assert len(cache) == 0


def test_a_broker_missing_from_a_round_keeps_its_last_observation():
    cache = VolumeCache(300)
    cache.record_round([1, 2], [obs(1, "/a", 0.0), obs(2, "/b", 0.0)])
    cache.record_round([1], [obs(1, "/a", 60.0, usable=50)])
    cache.evict_expired(60.0)
    by_key = {v.key: v for v in cache.volumes()}
    assert by_key[(2, "/b")].observed_at == 0.0
    assert by_key[(1, "/a")].usable_bytes == 50


def test_an_answering_broker_replaces_all_its_log_dirs():
    cache = VolumeCache(300)
    cache.record_round([1], [obs(1, "/a", 0.0), obs(1, "/b", 0.0)])
    cache.record_round([1], [obs(1, "/a", 10.0)])
    assert [v.key for v in cache.volumes()] == [(1, "/a")]
    assert cache.brokers() == {1}
