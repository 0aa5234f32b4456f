"""A DescribeLogDirs answer of a shape seen before (same version, length and log dirs' lengths)
is decoded with one unpack of the whole answer; every answer decodes to kafka-python's figures,
field by field, whether it takes that path, the short decoder or the general reader: answers
whose figures, error codes or log dir names changed, answers of the same length but another
shape (longer and shorter names, topics listed, tagged fields), and answers of every shape in
turn (the remembered shapes bounded)."""

from __future__ import annotations

import io
import random

import pytest
from kafka.protocol.admin import DescribeLogDirsResponse

from app.kafka import log_dirs_wire
from app.kafka.log_dirs_wire import _decode, _decode_known, decode_response

Result = DescribeLogDirsResponse.DescribeLogDirsResult
Topic = Result.DescribeLogDirsTopic
Partition = Topic.DescribeLogDirsPartition


@pytest.fixture(autouse=True)
def no_shapes_remembered():
    log_dirs_wire._layouts.clear()
    yield
    log_dirs_wire._layouts.clear()


def _encode(version, dirs, throttle=0, error=0, topics=()):
    results = [
        Result(
            error_code=code,
            log_dir=name,
            topics=list(topics),
            total_bytes=total,
            usable_bytes=usable,
            **({"is_cordoned": bool(i % 2)} if version >= 5 else {}),
        )
        for i, (code, name, total, usable) in enumerate(dirs)
    ]
    answer = DescribeLogDirsResponse[version](throttle_time_ms=throttle, error_code=error, results=results)
    return bytes(answer.encode(version=version))


def _kafka_pythons(body, version):
    theirs = DescribeLogDirsResponse[version].decode(io.BytesIO(body))
    return (
        theirs.throttle_time_ms,
        theirs.error_code,
        [(r.error_code, r.log_dir, r.total_bytes, r.usable_bytes, len(r.topics)) for r in theirs.results],
    )


def _ours(answer):
    return answer.throttle_time_ms, answer.error_code, [tuple(r) for r in answer.results]


def _dirs(rng, names):
    return [
        (rng.choice([0, 0, 0, 56]), name, rng.randrange(-1, 2**50), rng.randrange(-1, 2**49))
        for name in names
    ]


@pytest.mark.parametrize("version", [4, 5])
def test_answers_of_a_known_shape_take_the_whole_unpack_and_decode_as_kafka_python_does(version):
    rng = random.Random(version)
    names = [f"/var/lib/kafka/data-{i:02d}" for i in range(12)]
    first = _encode(version, _dirs(rng, names))
    assert _decode_known(first, version) is None, "no shape known yet"
    assert _ours(decode_response(first, version)) == _kafka_pythons(first, version)
    for _ in range(50):
        body = _encode(version, _dirs(rng, names), throttle=rng.randrange(0, 1000), error=rng.choice([0, 0, 31]))
        known = _decode_known(body, version)
        assert known is not None, "same shape: one unpack"
        assert _ours(known) == _ours(decode_response(body, version)) == _kafka_pythons(body, version)
        assert known.version == version


@pytest.mark.parametrize("version", [4, 5])
def test_other_names_of_the_same_lengths_are_read_from_the_answer(version):
    rng = random.Random(7)
    decode_response(_encode(version, _dirs(rng, ["/data/a1", "/data/b2"])), version)
    body = _encode(version, _dirs(rng, ["/disk/ø", "/disk/zz"]))  # "ø" is two bytes
    known = _decode_known(body, version)
    assert known is not None and [r[1] for r in known.results] == ["/disk/ø", "/disk/zz"]
    assert _ours(known) == _kafka_pythons(body, version)


@pytest.mark.parametrize("version", [4, 5])
def test_an_answer_of_the_same_length_and_another_shape_is_not_misread(version):
    rng = random.Random(11)
    decode_response(_encode(version, _dirs(rng, ["/data/abc", "/data/de"])), version)
    shifted = _encode(version, _dirs(rng, ["/data/ab", "/data/cde"]))  # same length, names split otherwise
    assert _decode_known(shifted, version) is None
    assert _ours(decode_response(shifted, version)) == _kafka_pythons(shifted, version)
    # Remembered now: the next answer of that shape takes the whole unpack.
    assert _decode_known(_encode(version, _dirs(rng, ["/data/xy", "/data/zzz"])), version) is not None


@pytest.mark.parametrize("version", [4, 5])
def test_topics_listed_in_an_answer_of_a_known_length_go_to_the_general_reader(version):
    rng = random.Random(3)
    topic = Topic(name="t", partitions=[])
    with_topic = _encode(version, _dirs(rng, ["/d"]), topics=[topic])
    # A shape without topics of exactly that length: a name longer by what the topic takes.
    extra = len(with_topic) - len(_encode(version, _dirs(rng, ["/d"])))
    decode_response(_encode(version, _dirs(rng, ["/d" + "x" * extra])), version)
    assert (version, len(with_topic)) in log_dirs_wire._layouts
    assert _decode_known(with_topic, version) is None
    assert _ours(decode_response(with_topic, version)) == _kafka_pythons(with_topic, version)
    assert decode_response(with_topic, version).results[0][4] == 1


@pytest.mark.parametrize("version", [4, 5])
def test_tagged_fields_in_an_answer_of_a_known_length_go_to_the_general_reader(version):
    rng = random.Random(5)
    plain = _encode(version, _dirs(rng, ["/data/abcd"]))
    decode_response(plain, version)
    # The same answer with a name two bytes shorter and, in their place, one empty tagged field
    # (tag 0, size 0) in the log dir's tagged fields: the same length, another shape.
    dirs = _dirs(rng, ["/data/ab"])
    body = bytearray(_encode(version, dirs))
    assert body[-2] == 0 and body[-1] == 0  # the log dir's tagged fields, then the answer's
    tagged = bytes(body[:-2]) + b"\x01\x00\x00" + b"\x00"
    assert len(tagged) == len(plain)
    assert _decode_known(tagged, version) is None
    assert _ours(decode_response(tagged, version)) == _ours(_decode(tagged, version))
    assert [tuple(r)[:4] for r in decode_response(tagged, version).results] == [tuple(d) for d in dirs]


def test_the_shapes_remembered_are_bounded_and_each_answer_still_decodes():
    rng = random.Random(1)
    for length in range(1, 200):
        body = _encode(4, _dirs(rng, ["/" + "d" * length]))
        assert _ours(decode_response(body, 4)) == _kafka_pythons(body, 4)
        assert len(log_dirs_wire._layouts) <= log_dirs_wire._MAX_LAYOUTS
    long_name = _encode(4, _dirs(rng, ["/" + "d" * 130]))
    log_dirs_wire._layouts.clear()
    decode_response(long_name, 4)
    assert log_dirs_wire._layouts == {}, "a name of 127 bytes or more is the general reader's"


def test_an_answer_of_no_log_dirs_takes_the_whole_unpack_too():
    empty = _encode(4, [], throttle=5)
    assert _ours(decode_response(empty, 4)) == (5, 0, []) == _kafka_pythons(empty, 4)
    assert _ours(_decode_known(_encode(4, [], throttle=6), 4)) == (6, 0, [])


@pytest.mark.parametrize("version", [4, 5])
def test_each_fixed_byte_of_a_known_shape_is_checked(version):
    rng = random.Random(13)
    names = ["/data/one", "/data/two"]
    body = _encode(version, _dirs(rng, names))
    decode_response(body, version)
    assert _decode_known(body, version) is not None
    cordoned = 1 if version >= 5 else 0
    count_at = 6
    first_size_at = count_at + 1 + 2
    first_topics_at = first_size_at + 1 + len(names[0])
    first_tags_at = first_topics_at + 1 + 16 + cordoned
    second_size_at = first_tags_at + 1 + 2
    last_tags_at = len(body) - 1
    for where, value in [
        (count_at, 2),  # one log dir instead of two
        (count_at, 0),  # a null array
        (first_size_at, 9),  # a shorter name
        (second_size_at, 11),  # a longer name
        (first_topics_at, 2),  # one topic listed
        (first_topics_at, 0),  # a null topic array
        (first_tags_at, 1),  # a tagged field
        (last_tags_at, 1),  # a tagged field of the answer
    ]:
        changed = bytearray(body)
        assert changed[where] != value
        changed[where] = value
        assert _decode_known(bytes(changed), version) is None, (where, value)


@pytest.mark.parametrize("version", [1, 2, 4, 5])
@pytest.mark.parametrize(
    "header_tags", [b"\x00", b"\x01\x05\x02ab", b"\x02\x01\x00\x81\x01\x01z"], ids=["none", "one", "two"]
)
@pytest.mark.parametrize("body", [b"", b"rest of the answer"], ids=["empty", "body"])
def test_the_header_read_in_place_from_the_parsers_buffer_is_read_as_from_a_stream(version, header_tags, body):
    from kafka.protocol.frame import KafkaBytes

    from app.kafka.log_dirs_wire import LogDirsRequest

    request = LogDirsRequest()
    request.API_VERSION = version
    request.with_header(correlation_id=77, client_id="x")
    decoder = request.header.get_response_class()
    frame = b"\x00\x00\x00\x4d" + (header_tags if version >= 2 else b"") + body
    stream = io.BytesIO(frame)
    from_stream = decoder.parse_header(stream)
    in_place = KafkaBytes(len(frame))
    in_place.write(frame)
    in_place.seek(0)
    from_buffer = decoder.parse_header(in_place)
    assert from_buffer.correlation_id == from_stream.correlation_id == 77
    assert in_place.read() == stream.read() == body
