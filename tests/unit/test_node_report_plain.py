"""A node report's body read straight into the report's own objects (``plain_report``, what the
report lane reads every report with): for every body, the report it reads is the one the
route's body model makes, and it reads none that the model, or the check for a key given twice,
refuses."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from app.observation.node_reports import NodeVolume
from app.server.api.schemas.nodes import (
    MAX_LOG_DIR_CHARS,
    MAX_NODE_VOLUMES,
    NodeVolumesBody,
    plain_report,
)
from app.server.edge.json_bodies import refuse_duplicate_keys
from app.server.edge.problems import InvalidRequest


def by_the_model(body: bytes) -> tuple[frozenset[str], tuple[NodeVolume, ...]] | None:
    """What the app takes from ``body``: the model's report, unless the model or the duplicate
    key check refuses it."""
    try:
        parsed = NodeVolumesBody.model_validate_json(body)
        refuse_duplicate_keys(body)
    except (ValidationError, InvalidRequest, ValueError):
        return None
    report = parsed.report(7, 1.0)
    return report.roles, report.volumes


def entry(log_dir="/var/lib/kafka/data-0", total=100, usable=50, holds=("data",)):
    return {"log_dir": log_dir, "total_bytes": total, "usable_bytes": usable, "holds": list(holds)}


def body(roles=("broker",), volumes=None):
    return {"roles": list(roles), "volumes": [entry()] if volumes is None else volumes}


GOOD = [
    body(),
    body(roles=("controller",), volumes=[entry("/meta", holds=("metadata",))]),
    body(roles=("broker", "controller"), volumes=[entry("/m", holds=("metadata", "data")), entry("/d")]),
    body(roles=("controller", "broker"), volumes=[entry("/m", holds=("data", "metadata"))]),
    body(volumes=[]),
    body(volumes=[entry(f"/d{i}") for i in range(MAX_NODE_VOLUMES)]),
    body(volumes=[entry("/" + "x" * (MAX_LOG_DIR_CHARS - 1))]),
    body(volumes=[entry("/dätä/ünïcode"), entry("/d", total=0, usable=0), entry("/e", total=2**63 - 1, usable=2**63 - 1)]),
    body(volumes=[entry("/mnt/with:colon")]),  # not shown by the cheap proof: checked again
]
BAD = [
    body(roles=()),
    body(roles=("broker", "broker")),
    body(roles=("broker", "controller", "broker")),
    body(roles=("observer",)),
    body(roles=("controller",)),  # data without the broker role
    body(volumes=[entry(f"/d{i}") for i in range(MAX_NODE_VOLUMES + 1)]),
    body(volumes=[entry("/")]),
    body(volumes=[entry("relative/dir")]),
    body(volumes=[entry("/" + "x" * MAX_LOG_DIR_CHARS)]),
    body(volumes=[entry(total=-1, usable=0)]),
    body(volumes=[entry(total=2**63, usable=0)]),
    body(volumes=[entry(total=100.0)]),
    body(volumes=[entry(total=True)]),
    body(volumes=[entry(total="100")]),
    body(volumes=[entry(usable=None)]),
    body(volumes=[entry(usable=101)]),
    body(volumes=[entry(holds=())]),
    body(volumes=[entry(holds=("data", "data"))]),
    body(volumes=[entry(holds=("metadata", "metadata"))]),
    body(volumes=[entry(holds=("data", "metadata", "data"))]),
    body(volumes=[entry(holds=("logs",))]),
    body(volumes=[entry("/d"), entry("/d")]),
    body(volumes=[{**entry(), "extra": 1}]),
    {**body(), "extra": 1},
    {"roles": ["broker"]},
    {"volumes": []},
    body(volumes=[{k: v for k, v in entry().items() if k != "holds"}]),
    body(volumes=[{**entry(), "holds": "data"}]),
    body(volumes=[[1, 2, 3, 4]]),
    body(volumes={"log_dir": "/d"}),
    [],
    None,
]
RAW = [
    b"",
    b"{",
    b"not json",
    b'{"roles": ["broker"], "volumes": [], "roles": ["broker"]}',
    b'{"roles": ["broker"], "volumes": [{"log_dir": "/a", "log_dir": "/b", "total_bytes": 1, "usable_bytes": 1, "holds": ["data"]}]}',
    b'{"roles": ["broker"], "volumes": [{"log_dir": "/a\\":", "total_bytes": 1, "usable_bytes": 1, "holds": ["data"], "holds" : ["data"]}]}',
    b'{"roles" : ["broker"] ,\n "volumes":[ ]}',
    b'{"roles": ["\\u0062roker"], "volumes": [{"log_dir": "/a", "total_bytes": 1, "usable_bytes": 1, "holds": ["d\\u0061ta"]}]}',
    b'{"roles": ["broker"], "volumes": []} trailing',
    json.dumps(body(), indent=2).encode(),
    json.dumps(body(), separators=(",", ":")).encode(),
]


@pytest.mark.parametrize("raw", [json.dumps(b).encode() for b in GOOD + BAD] + RAW)
def test_a_body_is_read_as_the_model_reads_it(raw):
    assert plain_report(raw) == by_the_model(raw)


def test_the_plain_bodies_are_read_and_the_others_are_not():
    assert all(plain_report(json.dumps(b).encode()) is not None for b in GOOD)
    assert all(plain_report(json.dumps(b).encode()) is None for b in BAD)


def test_random_bodies_are_read_as_the_model_reads_them():
    rng = random.Random(43)
    values = {
        "log_dir": ["/a", "/b", "/", "x", "/a:b", "/" + "y" * MAX_LOG_DIR_CHARS, 1],
        "total_bytes": [0, 10, 100, -1, 2**63, 1.5, "5", None],
        "usable_bytes": [0, 5, 100, 101, -3, True],
        "holds": [["data"], ["metadata"], ["data", "metadata"], ["metadata", "data"], ["data", "data"], [], ["x"], "data"],
    }
    read = 0
    for _ in range(3000):
        volumes = []
        for _ in range(rng.choice([0, 1, 2, 3])):
            item = {name: rng.choice(options) for name, options in values.items()}
            if rng.random() < 0.05:
                del item[rng.choice(list(item))]
            if rng.random() < 0.05:
                item["other"] = 1
            volumes.append(item)
        roles = rng.choice([["broker"], ["controller"], ["broker", "controller"], ["broker", "broker"], [], ["x"]])
        raw = json.dumps({"roles": roles, "volumes": volumes}).encode()
        if rng.random() < 0.1:  # a key given twice
            raw = raw.replace(b'"roles": ', b'"roles": ["broker"], "roles": ', 1)
        expected = by_the_model(raw)
        assert plain_report(raw) == expected, raw
        read += expected is not None
    assert read > 300  # a good share of them plain


def test_the_volumes_read_are_the_report_s_own_objects_with_their_holds_as_a_set():
    roles, volumes = plain_report(json.dumps(body(roles=("broker", "controller"), volumes=[entry("/m", holds=("metadata", "data"))])).encode())
    assert roles == frozenset({"broker", "controller"})
    [volume] = volumes
    assert type(volume) is NodeVolume and volume.holds == frozenset({"data", "metadata"})
    assert volume.holds_data and volume.holds_metadata
    with pytest.raises(AttributeError):
        volume.log_dir = "/x"  # still frozen
