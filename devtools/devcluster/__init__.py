"""Local multi-broker Apache Kafka (KRaft) cluster for tests and local runs.

Stdlib only. See ``LocalKafkaCluster`` and ``ensure_kafka_jars``.
"""

from .jars import KAFKA_VERSION, ensure_kafka_jars
from .cluster import CONTROLLER_ID, LocalKafkaCluster, cleanup_stale_clusters

__all__ = [
    "KAFKA_VERSION",
    "CONTROLLER_ID",
    "ensure_kafka_jars",
    "LocalKafkaCluster",
    "cleanup_stale_clusters",
]
