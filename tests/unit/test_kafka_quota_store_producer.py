"""The Kafka-backed quota store keeps a producer that can produce: one that reported a fatal
error (librdkafka's idempotent producer cannot produce again after one) is replaced at the
next write, a merely transient error keeps it. No broker: the writes time out, as they would
against an unreachable cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from app.quotas.kafka_store import KafkaQuotaStore, StoreUnavailable
from app.quotas.model import QuotaEntity, QuotaType


@pytest.fixture
def store():
    store = KafkaQuotaStore("quotas", {"bootstrap.servers": "127.0.0.1:9"}, write_timeout_seconds=0.2)
    store.start()
    store._loaded.set()  # as if the topic had been read: the write goes to the producer
    yield store
    store.close()


def write(store: KafkaQuotaStore) -> None:
    with pytest.raises(StoreUnavailable, match="timed out"):
        store.put_override(QuotaEntity(user="alice"), {QuotaType.PRODUCE: 1e6}, 0.0)


def test_a_producer_that_reported_a_fatal_error_is_replaced_at_the_next_write(store):
    first = store._producer
    store._on_client_error(KafkaError(KafkaError._FATAL, "fenced for the test", fatal=True))
    write(store)
    assert store._producer is not first
    replaced = store._producer
    write(store)
    assert store._producer is replaced, "replaced once, not at every write"


def test_a_transient_error_keeps_the_producer(store):
    first = store._producer
    store._on_client_error(KafkaError(KafkaError._TRANSPORT, "broker down for the test"))
    write(store)
    assert store._producer is first
