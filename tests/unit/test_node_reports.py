"""PUT /nodes/{node_id}/volumes and the mutation factor (in-process, manual clock): the node
token, the bounds, the strict body, the rate limit, and what a metadata volume in breach
publishes in /quotas, /throttle-factor and /volumes."""

from __future__ import annotations

import json

import pytest

from app.clock import ManualClock
from app.server.app import create_app
from app.settings import load_settings
from app.settings.loading import ConfigurationError

from .asgi import run_scenario

ADMIN = "s3cret-admin-token-0123"
NODE = "s3cret-node-token-4567"
NODE_AUTH = {"Authorization": f"Bearer {NODE}", "Content-Type": "application/json"}
GiB = 1024**3
VALIDITY = 300.0


def make_app(tmp_path, clock, **overrides):
    values = dict(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_bytes="100",
        data_dir=str(tmp_path),
        admin_token=ADMIN,
        node_token=NODE,
    )
    values.update(overrides)
    settings = load_settings(environ={}, **{k: v for k, v in values.items() if v is not None})
    return create_app(settings, clock=clock, observe=False)


def report(usable, total=10 * GiB, holds=("metadata",), roles=("controller",), log_dir="/var/lib/kafka/meta"):
    return {"roles": list(roles), "volumes": [{"log_dir": log_dir, "total_bytes": total, "usable_bytes": usable, "holds": list(holds)}]}


def run(tmp_path, scenario, **overrides):
    clock = ManualClock()
    return run_scenario(make_app(tmp_path, clock, **overrides), clock, scenario)


def test_a_report_with_the_node_token_is_taken_and_listed_as_a_metadata_volume(tmp_path):
    async def scenario(client, loop, clock):
        answer = await client.put("/nodes/1000/volumes", json=report(5 * GiB), headers=NODE_AUTH)
        assert answer.status_code == 204, answer.text
        volumes = (await client.get("/volumes")).json()
        assert volumes["reporting_nodes"] == [1000]
        [entry] = volumes["volumes"]
        assert entry["broker_id"] == 1000 and entry["holds"] == ["metadata"] and entry["observed_by"] == "node-report"
        assert entry["usable_bytes"] == 5 * GiB and entry["status"] == "ok"
        table = (await client.get("/quotas")).json()
        assert table["mutation_factor"] == 1.0 and table["factor"] == 1.0

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("headers", "detail"),
    [
        ({}, "send Authorization: Bearer <node token>"),
        ({"Authorization": f"Bearer {ADMIN}"}, "the bearer token is not the node token"),
        ({"Authorization": "Bearer wrong-token-0123456789"}, "the bearer token is not the node token"),
    ],
)
def test_a_report_without_the_node_token_is_refused_401_and_the_admin_token_is_not_it(tmp_path, headers, detail):
    async def scenario(client, loop, clock):
        answer = await client.put("/nodes/1/volumes", json=report(GiB), headers=headers)
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == "Bearer"
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["detail"] == detail
        assert (await client.get("/volumes")).json()["volumes"] == []

    run(tmp_path, scenario)


def test_the_node_token_does_not_change_quotas(tmp_path):
    async def scenario(client, loop, clock):
        answer = await client.put("/quotas/overrides", params={"user": "a"}, json={"produce": 1e6}, headers=NODE_AUTH)
        assert answer.status_code == 403

    run(tmp_path, scenario)


def test_without_the_node_token_the_endpoint_answers_404(tmp_path):
    async def scenario(client, loop, clock):
        answer = await client.put("/nodes/1/volumes", json=report(GiB), headers=NODE_AUTH)
        assert answer.status_code == 404 and answer.headers["content-type"] == "application/problem+json"
        assert "throttle.service.node.token" in answer.json()["detail"]

    run(tmp_path, scenario, node_token=None)


def test_a_body_over_16_kib_is_refused_413_before_it_is_read(tmp_path):
    async def scenario(client, loop, clock):
        body = b'{"roles": ["broker"], "volumes": []}'
        fits = await client.put("/nodes/1/volumes", content=body + b" " * (16384 - len(body)), headers=NODE_AUTH)
        assert fits.status_code == 204, fits.text
        clock.advance(1.0)
        over = await client.put("/nodes/1/volumes", content=body + b" " * (16385 - len(body)), headers=NODE_AUTH)
        assert over.status_code == 413 and over.headers["content-type"] == "application/problem+json"

    run(tmp_path, scenario)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/nodes/x/volumes", report(GiB), "node_id"),
        ("/nodes/-1/volumes", report(GiB), "node_id"),
        ("/nodes/2147483648/volumes", report(GiB), "node_id"),
        ("/nodes/1/volumes", {**report(GiB), "extra": 1}, "extra"),
        ("/nodes/1/volumes", {"roles": [], "volumes": []}, "roles"),
        ("/nodes/1/volumes", {"roles": ["voter"], "volumes": []}, "roles.0"),
        ("/nodes/1/volumes", report(GiB, log_dir="relative/dir"), "volumes.0.log_dir"),
        ("/nodes/1/volumes", report(-1), "volumes.0.usable_bytes"),
        ("/nodes/1/volumes", report(1.5), "volumes.0.usable_bytes"),
        ("/nodes/1/volumes", report(True), "volumes.0.usable_bytes"),
        ("/nodes/1/volumes", report("5"), "volumes.0.usable_bytes"),
        ("/nodes/1/volumes", report(GiB, holds=("logs",)), "volumes.0.holds.0"),
        ("/nodes/1/volumes", report(GiB, holds=()), "volumes.0.holds"),
        ("/nodes/1/volumes", report(2 * GiB, total=GiB), "volumes.0"),
        ("/nodes/1/volumes", report(GiB, holds=("data",)), "body"),  # a controller-only node holds no data
        ("/nodes/1/volumes", {"roles": ["broker"], "volumes": report(GiB)["volumes"] * 2}, "body"),
        ("/nodes/1/volumes", {"roles": ["broker"], "volumes": [report(GiB, log_dir=f"/d{i}")["volumes"][0] for i in range(65)]}, "volumes"),
    ],
)
def test_an_invalid_report_is_a_422_naming_the_field(tmp_path, path, body, field):
    async def scenario(client, loop, clock):
        answer = await client.put(path, json=body, headers=NODE_AUTH)
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert field in [e["field"] for e in answer.json()["errors"]]
        assert (await client.get("/volumes")).json()["volumes"] == []

    run(tmp_path, scenario)


def test_a_duplicate_key_is_a_422(tmp_path):
    async def scenario(client, loop, clock):
        body = b'{"roles": ["broker"], "roles": ["controller"], "volumes": []}'
        answer = await client.put("/nodes/1/volumes", content=body, headers=NODE_AUTH)
        assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "roles"

    run(tmp_path, scenario)


def test_a_node_reporting_past_its_burst_gets_429_with_retry_after_then_one_report_per_quarter_second(tmp_path):
    async def scenario(client, loop, clock):
        for _ in range(4):  # the burst: four reports back to back
            assert (await client.put("/nodes/1/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        clock.advance(0.1)
        again = await client.put("/nodes/1/volumes", json=report(GiB), headers=NODE_AUTH)
        assert again.status_code == 429 and again.headers["retry-after"] == "1"
        assert again.headers["content-type"] == "application/problem+json"
        assert "250 ms" in again.json()["detail"]
        other = await client.put("/nodes/2/volumes", json=report(GiB), headers=NODE_AUTH)
        assert other.status_code == 204  # the limit is per node
        clock.advance(0.15)  # a token every 0.25 s
        assert (await client.put("/nodes/1/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        assert (await client.put("/nodes/1/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 429

    run(tmp_path, scenario)


METADATA_LIMITS = dict(metadata_limit_min_available_bytes=str(GiB), metadata_soft_limit_min_available_bytes=str(3 * GiB))


def test_a_metadata_volume_at_its_hard_limit_sets_mutation_factor_0_and_leaves_produce_alone(tmp_path):
    async def scenario(client, loop, clock):
        before = (await client.get("/quotas")).headers["etag"]
        assert (await client.put("/nodes/1000/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        table = await client.get("/quotas")
        assert table.json()["mutation_factor"] == 0.0 and table.json()["factor"] == 1.0
        assert table.headers["etag"] != before  # the shims' long-polls wake
        decision = (await client.get("/throttle-factor")).json()
        assert decision["mutation_factor"] == 0.0 and decision["factor"] == 1.0 and decision["state"] == "OPEN"
        [breaching] = decision["metadata"]["breaching"]
        assert breaching["broker_id"] == 1000 and breaching["holds"] == ["metadata"] and breaching["reason"] == "hard limit"
        assert decision["metadata"]["limits"] == {"kind": "min-available-bytes", "hard": GiB, "soft": 3 * GiB, "hysteresis": 0.0}

    run(tmp_path, scenario, **METADATA_LIMITS)


def test_between_soft_and_hard_the_mutation_factor_ramps(tmp_path):
    async def scenario(client, loop, clock):
        await client.put("/nodes/1000/volumes", json=report(2 * GiB), headers=NODE_AUTH)
        decision = (await client.get("/throttle-factor")).json()
        assert decision["mutation_factor"] == pytest.approx(0.5)
        assert [v["broker_id"] for v in decision["metadata"]["ramping"]] == [1000]

    run(tmp_path, scenario, **METADATA_LIMITS)


def test_a_metadata_volume_that_holds_data_lowers_the_cluster_factor_too(tmp_path):
    async def scenario(client, loop, clock):
        shared = report(GiB, holds=("data", "metadata"), roles=("broker", "controller"))
        assert (await client.put("/nodes/2/volumes", json=shared, headers=NODE_AUTH)).status_code == 204
        table = (await client.get("/quotas")).json()
        assert table["mutation_factor"] == 0.0 and table["factor"] == 0.0 and table["state"] == "PAUSE"
        clock.advance(1.0)
        assert (await client.put("/nodes/2/volumes", json=report(5 * GiB, holds=("data", "metadata"), roles=("broker", "controller")), headers=NODE_AUTH)).status_code == 204
        table = (await client.get("/quotas")).json()
        assert table["mutation_factor"] == 1.0 and table["factor"] == 1.0

    run(tmp_path, scenario, **METADATA_LIMITS)


def test_with_observation_off_a_data_only_volume_a_node_reports_changes_no_factor(tmp_path):
    async def scenario(client, loop, clock):
        data = report(0, holds=("data",), roles=("broker",), log_dir="/var/lib/kafka/data")
        assert (await client.put("/nodes/2/volumes", json=data, headers=NODE_AUTH)).status_code == 204
        table = (await client.get("/quotas")).json()
        assert table["mutation_factor"] == 1.0 and table["factor"] == 1.0

    run(tmp_path, scenario, **METADATA_LIMITS)


def test_without_metadata_limits_a_full_metadata_volume_changes_nothing(tmp_path):
    async def scenario(client, loop, clock):
        before = await client.get("/quotas")
        assert (await client.put("/nodes/1000/volumes", json=report(0, holds=("data", "metadata"), roles=("broker", "controller")), headers=NODE_AUTH)).status_code == 204
        after = await client.get("/quotas")
        assert after.json()["mutation_factor"] == 1.0 and after.json()["factor"] == 1.0
        assert after.headers["etag"] == before.headers["etag"]

    run(tmp_path, scenario)


def test_a_node_that_stops_reporting_is_forgotten_after_the_validity_duration(tmp_path):
    async def scenario(client, loop, clock):
        await client.put("/nodes/1000/volumes", json=report(GiB), headers=NODE_AUTH)
        await client.put("/nodes/1001/volumes", json=report(5 * GiB), headers=NODE_AUTH)
        clock.advance(VALIDITY / 2)
        await client.put("/nodes/1001/volumes", json=report(5 * GiB), headers=NODE_AUTH)
        clock.advance(VALIDITY / 2)
        assert (await client.get("/quotas")).json()["mutation_factor"] == 0.0  # exactly validity old: still valid
        clock.advance(0.001)
        assert (await client.get("/quotas")).json()["mutation_factor"] == 1.0
        assert (await client.get("/volumes")).json()["reporting_nodes"] == [1001]
        clock.advance(VALIDITY)
        decision = (await client.get("/throttle-factor")).json()
        # no metadata volume in the view any more: the fallback applies to mutations, not to produce
        assert decision["metadata"]["source"] == "fallback" and decision["mutation_factor"] == 0.0 and decision["factor"] == 1.0

    run(tmp_path, scenario, throttle_factor_fallback="0.0", **METADATA_LIMITS)


def test_before_any_node_reports_the_mutation_factor_is_initial_then_the_fallback(tmp_path):
    async def scenario(client, loop, clock):
        decision = (await client.get("/throttle-factor")).json()
        assert decision["metadata"]["source"] == "initial" and decision["mutation_factor"] == 1.0
        clock.advance(VALIDITY + 0.001)
        decision = (await client.get("/throttle-factor")).json()
        assert decision["metadata"]["source"] == "fallback" and decision["mutation_factor"] == 0.5

    run(tmp_path, scenario, throttle_factor_fallback="0.5", **METADATA_LIMITS)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            dict(node_token=None, metadata_limit_min_available_bytes="100"),
            "throttle.service.metadata.limit.min.available.bytes='100': allowed: metadata limits only with throttle.service.node.token set",
        ),
        (
            dict(metadata_limit_min_available_bytes="100", metadata_limit_min_available_ratio="0.1"),
            "throttle.service.metadata.limit.min.available.bytes='100': allowed: exactly one hard limit",
        ),
        (
            dict(metadata_soft_limit_min_available_ratio="0.2"),
            "throttle.service.metadata.soft.limit.min.available.ratio='0.2': allowed: exactly one hard limit",
        ),
        (
            dict(metadata_limit_min_available_bytes="100", metadata_soft_limit_min_available_bytes="50"),
            "throttle.service.metadata.soft.limit.min.available.bytes='50': allowed: a value strictly greater than the hard limit",
        ),
        (dict(metadata_limit_min_available_ratio="1.5"), "throttle.service.metadata.limit.min.available.ratio='1.5'"),
        (dict(node_token="short"), "throttle.service.node.token='<hidden>'"),
        (dict(node_token=ADMIN), "throttle.service.node.token='<hidden>': allowed: a token other than throttle.service.admin.token"),
    ],
)
def test_bad_metadata_settings_stop_start_up_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(ConfigurationError) as raised:
        make_app(tmp_path, ManualClock(), **overrides)
    assert message in str(raised.value)


def test_each_inconsistent_entry_is_named_at_its_place_with_its_input():
    """The entries are checked in one pass by the body, and each problem still names its entry
    (volumes.<i>), its message and the entry as given, as a validator of the entry would."""
    from pydantic import ValidationError

    from app.server.api.schemas.nodes import NodeVolumesBody

    good = {"log_dir": "/a", "total_bytes": 10, "usable_bytes": 5, "holds": ["data"]}
    over = {"log_dir": "/b", "total_bytes": 10, "usable_bytes": 11, "holds": ["data"]}
    twice = {"log_dir": "/c", "total_bytes": 10, "usable_bytes": 1, "holds": ["metadata", "metadata"]}
    body = {"roles": ["broker", "controller"], "volumes": [good, over, twice]}
    with pytest.raises(ValidationError) as raised:
        NodeVolumesBody.model_validate_json(json.dumps(body))
    assert [(e["loc"], e["msg"], e["input"]) for e in raised.value.errors()] == [
        (("volumes", 1), "Value error, usable_bytes must not exceed total_bytes", over),
        (("volumes", 2), "Value error, holds lists an entry twice", twice),
    ]
    # Consistent entries: the body's own checks (reported at the body).
    for roles, volumes, message in [
        (["broker", "broker"], [good], "roles lists a role twice"),
        (["broker"], [good, good], "volumes lists a log_dir twice"),
        (["controller"], [good], "only a node with the broker role holds data"),
    ]:
        with pytest.raises(ValidationError) as raised:
            NodeVolumesBody.model_validate_json(json.dumps({"roles": roles, "volumes": volumes}))
        assert [(e["loc"], e["msg"]) for e in raised.value.errors()] == [((), f"Value error, {message}")]
    assert NodeVolumesBody.model_validate_json(json.dumps({"roles": ["broker"], "volumes": [good, {**good, "log_dir": "/d", "holds": ["data", "metadata"]}]})).json_keys() == 2 + 4 * 2
