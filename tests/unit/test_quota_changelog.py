"""The quota log of the Kafka-backed store: records every replica applies alike, in order."""

import json

import pytest

from app.kafka.admin_config import to_librdkafka
from app.quotas.changelog import QuotaLog, group_key, group_value, override_key, override_value
from app.kafka.topics import topic_settings
from app.quotas.model import DEFAULT, QuotaEntity, QuotaGroup, QuotaType


def test_records_round_trip_every_kind_of_entity_and_a_group():
    log = QuotaLog()
    entities = [QuotaEntity("alice", None), QuotaEntity("alice", DEFAULT), QuotaEntity(DEFAULT, "app"), QuotaEntity(None, DEFAULT),
                QuotaEntity("<default>", None)]  # a user really named "<default>" is not the default user
    for i, entity in enumerate(entities):
        assert log.apply(override_key(entity), override_value({QuotaType.PRODUCE: 1000.0 + i})).accepted
    group = QuotaGroup("etl", frozenset({"bob"}), frozenset({"loader"}), {QuotaType.FETCH: 5.0})
    assert log.apply(group_key("etl"), group_value(group)).accepted
    assert log.overrides == {e: {QuotaType.PRODUCE: 1000.0 + i} for i, e in enumerate(entities)}
    assert log.groups == {"etl": group}
    assert len({override_key(e) for e in entities}) == len(entities), "one key per entity: compaction keeps each"


def test_the_latest_record_of_a_key_wins_and_a_tombstone_deletes():
    log = QuotaLog()
    entity = QuotaEntity("alice", None)
    log.apply(override_key(entity), override_value({QuotaType.PRODUCE: 1.0}))
    log.apply(override_key(entity), override_value({QuotaType.FETCH: 2.0}))
    assert log.overrides[entity] == {QuotaType.FETCH: 2.0}
    log.apply(override_key(entity), None)
    assert entity not in log.overrides
    log.apply(group_key("g"), group_value(QuotaGroup("g", frozenset({"u"}), frozenset(), {QuotaType.PRODUCE: 1.0})))
    log.apply(group_key("g"), None)
    assert log.groups == {}


def test_a_group_claiming_another_groups_member_is_not_applied_on_any_replica():
    records = [
        (group_key("a"), group_value(QuotaGroup("a", frozenset({"bob"}), frozenset(), {QuotaType.PRODUCE: 1.0}))),
        (group_key("b"), group_value(QuotaGroup("b", frozenset({"bob", "carol"}), frozenset(), {QuotaType.PRODUCE: 2.0}))),
    ]
    replicas = [QuotaLog(), QuotaLog()]
    results = [[replica.apply(key, value) for key, value in records] for replica in replicas]
    for replica, applied in zip(replicas, results):
        assert [r.accepted for r in applied] == [True, False]
        assert applied[1].reason == "user 'bob' already belongs to group 'a'"
        assert set(replica.groups) == {"a"}
    # A group may change its own members.
    replica = replicas[0]
    assert replica.apply(group_key("a"), group_value(QuotaGroup("a", frozenset({"bob", "dave"}), frozenset(), {QuotaType.PRODUCE: 1.0}))).accepted


@pytest.mark.parametrize(
    "key, value",
    [
        (b"not json", b"{}"),
        (json.dumps({"kind": "mystery"}).encode(), b"{}"),
        (override_key(QuotaEntity("alice", None)), b'{"quotas": {"nonsense": 1}}'),
        (json.dumps({"kind": "override", "user": {"default": False}, "client_id": None}).encode(), b'{"quotas": {}}'),
    ],
)
def test_an_unreadable_record_is_skipped_and_said_so_not_fatal(key, value):
    log = QuotaLog()
    applied = log.apply(key, value)
    assert not applied.accepted and applied.reason.startswith("unreadable record")
    assert log.overrides == {} and log.groups == {}


def test_the_topic_gets_three_replicas_and_two_in_sync_where_the_cluster_allows():
    assert [topic_settings(n) for n in (1, 2, 3, 9)] == [(1, 1), (2, 1), (3, 2), (3, 2)]


def test_the_store_connects_as_the_admin_client_does(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    config = to_librdkafka(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="throttle" password="s3cret";',
            "ssl.truststore.location": str(ca),
            "ssl.endpoint.identification.algorithm": "",
        },
        "kafka-0:9093",
    )
    assert config == {
        "bootstrap.servers": "kafka-0:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "throttle",
        "sasl.password": "s3cret",
        "ssl.ca.pem": ca.read_text(),
        "ssl.endpoint.identification.algorithm": "none",
    }
