"""DescribeCluster as the round sends it (app/kafka/cluster_wire.py): the request is
kafka-python's, byte for byte and version for version, and an answer of every version decodes
to kafka-python's figures field by field (error code and message, each broker's id and fence),
whatever the hosts, racks and tagged fields; a short or overlong answer is an error."""

from __future__ import annotations

import io
import random
import struct

import kafka.errors as kafka_errors
import pytest
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse
from kafka.protocol.broker_version_data import BrokerVersionData

from app.kafka.cluster_wire import API_KEY, ClusterRequest, decode_response

VERSIONS = range(DescribeClusterRequest.min_version, DescribeClusterRequest.max_version + 1)
Broker = DescribeClusterResponse.DescribeClusterBroker


def _theirs_request() -> DescribeClusterRequest:
    return DescribeClusterRequest(include_cluster_authorized_operations=False, include_fenced_brokers=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("client_id", ["kafka-throttle-service", "", "dienst-ü"])
def test_the_request_is_kafka_pythons_byte_for_byte(version, client_id):
    ours = ClusterRequest()
    assert ours.API_VERSION is None and ours.API_KEY == API_KEY == DescribeClusterRequest.API_KEY
    ours.API_VERSION = version
    ours.with_header(correlation_id=4242, client_id=client_id)
    theirs = _theirs_request()
    theirs.API_VERSION = version
    theirs.with_header(correlation_id=4242, client_id=client_id)
    assert ours.encode(framed=True, header=True) == bytes(theirs.encode(framed=True, header=True))
    assert ours.header.correlation_id == 4242 and ours.header.api_version == version
    assert ours.header.get_response_class().version == version
    assert ours.expect_response()


@pytest.mark.parametrize(
    "broker_range", [None, (0, 0), (0, 1), (0, 2), (0, 5), (1, 1), (3, 4)], ids=str
)
def test_the_version_negotiated_is_the_one_kafka_python_negotiates(broker_range):
    api_versions = {18: (0, 3)} | ({API_KEY: broker_range} if broker_range else {})
    data = BrokerVersionData(api_versions=api_versions)

    def negotiated(request):
        try:
            return data.api_version(request)
        except kafka_errors.IncompatibleBrokerVersion as exc:
            return type(exc)

    assert negotiated(ClusterRequest()) == negotiated(_theirs_request())


def test_a_request_without_a_version_is_not_encoded():
    with pytest.raises(ValueError):
        ClusterRequest().with_header(correlation_id=1)


def _answer(version, rng, brokers, error_code=0, error_message=None):
    return DescribeClusterResponse[version](
        throttle_time_ms=rng.randrange(0, 5000),
        error_code=error_code,
        error_message=error_message,
        endpoint_type=1,
        cluster_id=rng.choice(["", "MkU3OEVBNTcwNTJENDM2Qk", "ø" * 70]),
        controller_id=rng.randrange(-1, 5),
        brokers=brokers,
        authorized_operations=None,
    )


def _brokers(rng, count):
    return [
        Broker(
            broker_id=rng.randrange(0, 2**31),
            host=rng.choice(["127.0.0.1", "kafka-0.kafka.svc", "h" * 127, "h" * 126, "ü" * 200, "x" * 300]),
            port=rng.randrange(0, 65536),
            rack=rng.choice([None, "", "eu-west-1a", "r" * 150]),
            is_fenced=rng.random() < 0.3,
        )
        for _ in range(count)
    ]


def _kafka_pythons(body, version):
    theirs = DescribeClusterResponse[version].decode(io.BytesIO(body))
    return (
        theirs.throttle_time_ms,
        theirs.error_code,
        theirs.error_message,
        tuple((b.broker_id, bool(getattr(b, "is_fenced", False)) if version >= 2 else False) for b in theirs.brokers),
    )


def _ours(answer):
    return answer.throttle_time_ms, answer.error_code, answer.error_message, answer.brokers


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("seed", range(6))
def test_an_answer_of_every_version_decodes_to_kafka_pythons_figures(version, seed):
    rng = random.Random(seed * 10 + version)
    answer = _answer(version, rng, _brokers(rng, rng.choice([0, 1, 3, 200])))
    body = bytes(answer.encode(version=version))
    ours = decode_response(body, version)
    assert ours.version == version
    assert _ours(ours) == _kafka_pythons(body, version)
    if version < 2:
        assert all(not fenced for _, fenced in ours.brokers), "no IsFenced below v2"


@pytest.mark.parametrize("version", VERSIONS)
def test_an_error_answer_gives_its_code_and_message(version):
    rng = random.Random(version)
    for message in (None, "", "The request was sent to an endpoint of type BROKER ü" * 3):
        body = bytes(_answer(version, rng, [], error_code=103, error_message=message).encode(version=version))
        assert _ours(decode_response(body, version)) == _kafka_pythons(body, version)
        assert decode_response(body, version).error_message == message


def _broker_bytes(version, broker_id, host, fenced, tagged=b"\x00"):
    raw = host.encode()
    out = struct.pack(">i", broker_id) + bytes([len(raw) + 1]) + raw + struct.pack(">i", 9092) + b"\x00"
    return out + (bytes([fenced]) if version >= 2 else b"") + tagged


@pytest.mark.parametrize("version", VERSIONS)
def test_tagged_fields_of_a_broker_and_of_the_answer_are_skipped(version):
    head = struct.pack(">ih", 0, 0) + b"\x00" + (b"\x01" if version >= 1 else b"") + b"\x04abc" + struct.pack(">i", 1)
    brokers = [
        _broker_bytes(version, 1, "a", 1, tagged=b"\x02\x00\x03xyz\x81\x01\x01q"),  # two tagged fields, tag 129
        _broker_bytes(version, 2, "bb", 0),
    ]
    body = head + b"\x03" + b"".join(brokers) + struct.pack(">i", -(2**31)) + b"\x01\x05\x02zz"
    ours = decode_response(body, version)
    assert ours.brokers == ((1, version >= 2), (2, False))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_short_or_overlong_answer_is_an_error(version):
    rng = random.Random(99)
    body = bytes(_answer(version, rng, _brokers(rng, 5)).encode(version=version))
    for cut in (3, 8, len(body) // 2, len(body) - 5, len(body) - 1):
        with pytest.raises(ValueError):
            decode_response(body[:cut], version)
    with pytest.raises(ValueError):
        decode_response(body + b"\x00", version)


def test_the_header_skips_its_tagged_fields():
    request = ClusterRequest()
    request.API_VERSION = 2
    request.with_header(correlation_id=9, client_id="x")
    decoder = request.header.get_response_class()
    buffer = io.BytesIO(b"\x00\x00\x00\x09" + b"\x01\x05\x02ab" + b"rest")
    assert decoder.parse_header(buffer).correlation_id == 9 and buffer.read() == b"rest"
