"""DescribeLogDirs encoded and decoded by the service itself (app/kafka/log_dirs_wire.py): the
request's bytes are kafka-python's for every version, and an answer of every version, topics and
tagged fields included, decodes to kafka-python's figures; a truncated answer is an error."""

from __future__ import annotations

import io
import struct

import pytest
from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

from app.kafka.log_dirs_wire import MAX_VERSION, MIN_VERSION, LogDirsRequest, decode_response

VERSIONS = range(MIN_VERSION, MAX_VERSION + 1)
Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("client_id", ["kafka-throttle-service", "", "dienst-ü"])
def test_the_request_is_kafka_pythons_empty_topic_list_byte_for_byte(version, client_id):
    ours = LogDirsRequest()
    ours.API_VERSION = version
    ours.with_header(correlation_id=123456, client_id=client_id)
    theirs = DescribeLogDirsRequest(topics=[])
    theirs.API_VERSION = version
    theirs.with_header(correlation_id=123456, client_id=client_id)
    assert ours.encode(framed=True, header=True) == bytes(theirs.encode(framed=True, header=True))
    assert (
        ours.header.correlation_id == 123456 and ours.header.get_response_class().version == version
    )


def _answer(version: int, topics: bool, long_path: bool = True) -> DescribeLogDirsResponse:
    listed = (
        [
            Topic(
                name="orders",
                partitions=[
                    Partition(
                        partition_index=i,
                        partition_size=10 * i,
                        offset_lag=i,
                        is_future_key=bool(i % 2),
                    )
                    for i in range(3)
                ],
            )
        ]
        if topics
        else []
    )
    results = [
        Result(
            error_code=0,
            log_dir="/var/lib/kafka/data-ø",
            topics=listed,
            total_bytes=2**40,
            usable_bytes=2**39 + 7,
        ),
        Result(
            error_code=56,
            log_dir="/var/lib/kafka/offline",
            topics=[],
            total_bytes=-1,
            usable_bytes=-1,
        ),
        Result(error_code=0, log_dir="/d" * 100, topics=listed, total_bytes=0, usable_bytes=0),
    ][: 3 if long_path else 2]
    kwargs = {"error_code": 0} if version >= 3 else {}
    return DescribeLogDirsResponse[version](throttle_time_ms=17, results=results, **kwargs)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("topics", [False, True])
def test_an_answer_of_every_version_decodes_to_kafka_pythons_figures(version, topics):
    answer = _answer(version, topics)
    body = bytes(answer.encode(version=version))
    theirs = DescribeLogDirsResponse[version].decode(io.BytesIO(body))
    ours = decode_response(body, version)
    assert ours.throttle_time_ms == theirs.throttle_time_ms == 17
    assert ours.error_code == getattr(theirs, "error_code", 0)
    expected = [
        (
            r.error_code,
            r.log_dir,
            r.total_bytes if version >= 4 else -1,
            r.usable_bytes if version >= 4 else -1,
            len(r.topics),
        )
        for r in theirs.results
    ]
    assert [tuple(r) for r in ours.results] == expected
    assert ours.results[0][4] == (1 if topics else 0)  # topics listed


@pytest.mark.parametrize("version", [1, 5])
def test_a_truncated_answer_is_an_error_not_a_short_round(version):
    body = bytes(_answer(version, topics=True).encode(version=version))
    for cut in (3, len(body) // 2, len(body) - 2):
        with pytest.raises((ValueError, struct.error)):
            decode_response(body[:cut], version)


def test_the_header_of_a_flexible_answer_skips_its_tagged_fields():
    answer = LogDirsRequest()
    answer.API_VERSION = 4
    answer.with_header(correlation_id=9, client_id="x")
    decoder = answer.header.get_response_class()
    buffer = io.BytesIO(b"\x00\x00\x00\x09" + b"\x01\x05\x02ab" + b"rest")
    assert decoder.parse_header(buffer).correlation_id == 9 and buffer.read() == b"rest"


@pytest.mark.parametrize("version", [4, 5])
def test_the_plain_answers_take_the_short_decoder_and_decode_as_the_general_reader_does(version):
    from app.kafka.log_dirs_wire import _decode, _decode_plain

    plain = bytes(_answer(version, topics=False, long_path=False).encode(version=version))
    assert (
        _decode_plain(plain, version) == _decode(plain, version) == decode_response(plain, version)
    )
    with_topics = bytes(_answer(version, topics=True).encode(version=version))
    assert _decode_plain(with_topics, version) is None  # topics listed: the general reader
    assert _decode_plain(plain[:-5], version) is None
    long_path = bytes(_answer(version, topics=False).encode(version=version))
    assert _decode_plain(long_path, version) is None and decode_response(
        long_path, version
    ) == _decode(long_path, version)
