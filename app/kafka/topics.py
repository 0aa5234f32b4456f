"""Topics the service creates for itself: replicated as the cluster allows (three replicas and
min.insync.replicas 2 where there are three brokers or more), created once by whichever process
comes first (the quota topic and the state topic, compacted; the history topic, time-retained:
app/history/kafka_topic.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("app.kafka")


def topic_settings(brokers: int) -> tuple[int, int]:
    """Replication factor and min.insync.replicas for a new topic: 3 and 2 where the cluster
    allows; on smaller clusters every broker holds a replica and one may be down."""
    replicas = max(1, min(3, brokers))
    min_insync = 2 if replicas >= 3 else max(1, replicas - 1)
    return replicas, min_insync


def ensure_topic(
    client_config: dict[str, Any],
    topic: str,
    config: dict[str, str],
    timeout: float,
    what: str,
    existing: Callable[[Any, str], None] | None = None,
) -> None:
    """Create the one-partition ``topic`` with ``config`` unless it exists, replicated as
    ``topic_settings`` says; another process creating it first is no failure. ``existing`` is
    given the admin client when the topic is there already (to check its configuration)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({**client_config})
    metadata = admin.list_topics(timeout=timeout)
    if topic in metadata.topics and not metadata.topics[topic].error:
        if existing is not None:
            existing(admin, topic)
        return
    replicas, min_insync = topic_settings(len(metadata.brokers))
    settings = {**config, "min.insync.replicas": str(min_insync)}
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=replicas, config=settings)]
    )[topic]
    kept = "compacted" if settings.get("cleanup.policy") == "compact" else "time-retained"
    try:
        future.result(timeout=timeout)
        log.info(
            "created the %s %r (replication factor %d, min.insync.replicas %d, %s)",
            what,
            topic,
            replicas,
            min_insync,
            kept,
        )
    except KafkaException as exc:
        if exc.args[0].code() != 36:  # TOPIC_ALREADY_EXISTS: another replica was first
            raise


def ensure_compacted_topic(
    client_config: dict[str, Any], topic: str, config: dict[str, str], timeout: float, what: str
) -> None:
    """Create the compacted ``topic`` unless it exists (the quota topic, the state topic), with
    ``config`` besides."""
    ensure_topic(client_config, topic, {**config, "cleanup.policy": "compact"}, timeout, what)
