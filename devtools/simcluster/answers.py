"""What a Kafka 4.3 broker answers to ApiVersions, Metadata, DescribeCluster and DescribeLogDirs,
given the cluster's state: one function per request, each returning kafka-python's response
object at the request's version.

The answers follow Kafka's own (``KafkaApis``, ``ReplicaManager.describeLogDirs``) and were
checked against a real 4.3 cluster's (tests/integration/test_simulated_cluster.py):

- ApiVersions lists every API of a 4.3 broker (a client infers the broker's version from the
  list), with the features a 4.3 broker reports (to v3 only those whose lowest version is not 0); the simulation answers only the four requests
  above and closes the connection on any other, as Kafka does on a request it cannot parse.
- Metadata lists the registered, unfenced brokers; the simulated cluster has no topics, so a
  named topic is UNKNOWN_TOPIC_OR_PARTITION. The controller id a broker gives is a random alive
  broker (KRaft brokers do not expose the controller).
- DescribeCluster lists the registered brokers, the fenced ones only when asked
  (IncludeFencedBrokers, v2, KIP-1073), each with IsFenced; asked for controllers, a broker
  answers UNSUPPORTED_ENDPOINT_TYPE.
- DescribeLogDirs gives each log dir in configuration order with TotalBytes and UsableBytes
  (v4+); an offline one KAFKA_STORAGE_ERROR and no figures (-1), as Kafka does."""

from __future__ import annotations

import random

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse, DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from .state import Broker, ClusterState

KAFKA_VERSION = (4, 3)
API_VERSIONS: dict[int, tuple[int, int]] = BROKER_API_VERSIONS[KAFKA_VERSION]

# Kafka's error codes (org.apache.kafka.common.protocol.Errors)
UNKNOWN_TOPIC_OR_PARTITION = 3
UNSUPPORTED_VERSION = 35
KAFKA_STORAGE_ERROR = 56
MISMATCHED_ENDPOINT_TYPE = 114

BROKER_ENDPOINT = 1
# Every operation on the cluster resource, as a broker without an authorizer grants them
# (ALTER, CLUSTER_ACTION, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS, IDEMPOTENT_WRITE, CREATE_TOKENS).
CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}

# What a 4.3 broker with default features reports in ApiVersions v3+ (the real one's order).
SUPPORTED_FEATURES = {
    "group.version": (0, 1),
    "kraft.version": (0, 1),
    "metadata.version": (7, 30),
    "share.version": (0, 1),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
    "eligible.leader.replicas.version": (0, 1),
}
FINALIZED_FEATURES = {
    "group.version": 1,
    "streams.version": 1,
    "transaction.version": 2,
    "eligible.leader.replicas.version": 1,
    "share.version": 1,
    "metadata.version": 30,
}
FINALIZED_FEATURES_EPOCH = 13


def api_versions(request: ApiVersionsRequest) -> ApiVersionsResponse:
    version = request.API_VERSION
    keys = [ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high) for key, (low, high) in sorted(API_VERSIONS.items())]
    if version < 3:
        return ApiVersionsResponse[version](error_code=0, api_keys=keys, throttle_time_ms=0)
    return ApiVersionsResponse[version](
        error_code=0,
        api_keys=keys,
        throttle_time_ms=0,
        supported_features=[
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
            for name, (low, high) in SUPPORTED_FEATURES.items()
            if low > 0 or version >= 4  # a v3 client may not handle a feature whose lowest version is 0 (KAFKA-17011)
        ],
        finalized_features_epoch=FINALIZED_FEATURES_EPOCH,
        finalized_features=[
            ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in FINALIZED_FEATURES.items()
        ],
    )


def unsupported_api_versions() -> ApiVersionsResponse:
    """The answer to an ApiVersions of a version the broker does not know: v0, with the range
    of ApiVersions it does know, so the client retries with one."""
    low, high = API_VERSIONS[ApiVersionsRequest.API_KEY]
    return ApiVersionsResponse[0](
        error_code=UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=ApiVersionsRequest.API_KEY, min_version=low, max_version=high)],
    )


def _some_alive_broker(state: ClusterState) -> int:
    alive = state.alive_brokers()
    return random.choice(alive).broker_id if alive else -1


def metadata(request: MetadataRequest, state: ClusterState) -> MetadataResponse:
    version = request.API_VERSION
    named = [topic.name for topic in request.topics or []]
    # v0 asks for every topic with an empty list; there are none in the simulation.
    topics = [
        MetadataResponse.MetadataResponseTopic(
            error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name, topic_id=None, is_internal=False, partitions=[], authorized_operations=None
        )
        for name in named
    ]
    return MetadataResponse[version](
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack) for b in state.alive_brokers()
        ],
        cluster_id=state.cluster_id,
        controller_id=_some_alive_broker(state),
        topics=topics,
        authorized_operations=CLUSTER_OPERATIONS if getattr(request, "include_cluster_authorized_operations", False) else None,
        error_code=0,
    )


def describe_cluster(request: DescribeClusterRequest, state: ClusterState) -> DescribeClusterResponse:
    version = request.API_VERSION
    if version >= 1 and request.endpoint_type != BROKER_ENDPOINT:
        return DescribeClusterResponse[version](
            throttle_time_ms=0,
            error_code=MISMATCHED_ENDPOINT_TYPE,
            error_message="The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER",
            endpoint_type=BROKER_ENDPOINT,
            cluster_id="",
            controller_id=-1,
            brokers=[],
            authorized_operations=None,
        )
    with_fenced = version >= 2 and request.include_fenced_brokers
    brokers = [b for b in state.registered_brokers() if with_fenced or not b.fenced]
    return DescribeClusterResponse[version](
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=BROKER_ENDPOINT,
        cluster_id=state.cluster_id,
        controller_id=_some_alive_broker(state),
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(broker_id=b.broker_id, host=b.host, port=b.port, rack=b.rack, is_fenced=b.fenced)
            for b in brokers
        ],
        authorized_operations=CLUSTER_OPERATIONS if request.include_cluster_authorized_operations else None,
    )


def describe_log_dirs(request: DescribeLogDirsRequest, broker: Broker) -> DescribeLogDirsResponse:
    """The simulated brokers hold no partitions: every log dir lists no topics, whichever the
    request names."""
    version = request.API_VERSION
    results = [
        DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=KAFKA_STORAGE_ERROR if log_dir.offline else 0,
            log_dir=log_dir.path,
            topics=[],
            total_bytes=-1 if log_dir.offline else log_dir.total_bytes,
            usable_bytes=-1 if log_dir.offline else log_dir.usable_bytes,
        )
        for log_dir in broker.log_dirs
    ]
    return DescribeLogDirsResponse[version](throttle_time_ms=0, error_code=0, results=results)
