"""The node view takes reports only from nodes the cluster knows: the brokers the latest round
registered (active or fenced), and at most UNLISTED_NODES others at once (controller-only
voters, nodes starting); any other node id is refused with 409, and a place held by an
unlisted node is freed once its report expires."""

from __future__ import annotations

from app.observation.model import ObservationRound, VolumeObservation
from app.server.runtime.node_admission import UNLISTED_NODES

from .test_node_reports import GiB, NODE_AUTH, VALIDITY, report, run as run_unobserved

OBSERVING = {"storage_check_interval": "PT30S", "kafka_admin_bootstrap_servers": "127.0.0.1:1"}  # rounds applied by the tests


def run(tmp_path, scenario):
    return run_unobserved(tmp_path, scenario, **OBSERVING)


def registered(clock, active=(1, 2, 3), fenced=(4,)) -> ObservationRound:
    now = clock()
    observations = tuple(VolumeObservation(b, "/data", 10 * GiB, 5 * GiB, now) for b in active)
    return ObservationRound(now, now, active, observations, fenced_brokers=fenced)


def broker_report(usable=5 * GiB):
    return report(usable, holds=("metadata", "data"), roles=("broker",), log_dir="/data")


def test_a_report_from_a_node_id_the_cluster_does_not_know_is_refused_409_beyond_the_margin(tmp_path):
    async def scenario(client, loop, clock):
        loop.apply_round(registered(clock))
        for node_id in (1, 2, 3, 4):  # active and fenced brokers
            assert (await client.put(f"/nodes/{node_id}/volumes", json=broker_report(), headers=NODE_AUTH)).status_code == 204
        unlisted = list(range(3000, 3000 + UNLISTED_NODES))  # controllers and nodes starting
        for node_id in unlisted:
            assert (await client.put(f"/nodes/{node_id}/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        refused = await client.put("/nodes/9999/volumes", json=report(GiB), headers=NODE_AUTH)
        assert refused.status_code == 409 and refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["title"] == "Unknown node" and "node 9999 is not a broker the cluster has registered" in refused.json()["detail"]
        clock.advance(1.5)
        again = await client.put(f"/nodes/{unlisted[0]}/volumes", json=report(GiB), headers=NODE_AUTH)
        assert again.status_code == 204, "a node holding a place keeps it"
        assert (await client.put("/nodes/2/volumes", json=broker_report(), headers=NODE_AUTH)).status_code == 204
        view = (await client.get("/volumes")).json()
        assert set(view["reporting_nodes"]) == {1, 2, 3, 4, *unlisted}

    run(tmp_path, scenario)


def test_a_thousand_invented_node_ids_leave_the_view_at_its_bound_and_a_place_is_freed_when_its_report_expires(tmp_path):
    async def scenario(client, loop, clock):
        loop.apply_round(registered(clock, active=(1,), fenced=()))
        statuses = [(await client.put(f"/nodes/{n}/volumes", json=report(GiB), headers=NODE_AUTH)).status_code for n in range(100, 1_100)]
        assert statuses.count(204) == UNLISTED_NODES and statuses.count(409) == 1_000 - UNLISTED_NODES
        assert len(loop.decider.metadata) == UNLISTED_NODES
        assert len((await client.get("/volumes")).json()["reporting_nodes"]) == UNLISTED_NODES
        clock.advance(VALIDITY + 1)
        loop.apply_round(registered(clock, active=(1,), fenced=()))  # the round evicts the expired reports
        assert len(loop.decider.metadata) == 0
        assert (await client.put("/nodes/20000/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        assert (await client.put("/nodes/20001/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204

    run(tmp_path, scenario)


def test_a_broker_a_round_lists_is_taken_even_when_the_margin_is_full(tmp_path):
    async def scenario(client, loop, clock):
        for node_id in range(3000, 3000 + UNLISTED_NODES):  # before any round: every node is unlisted
            assert (await client.put(f"/nodes/{node_id}/volumes", json=report(GiB), headers=NODE_AUTH)).status_code == 204
        assert (await client.put("/nodes/7/volumes", json=broker_report(), headers=NODE_AUTH)).status_code == 409
        loop.apply_round(registered(clock, active=(7,), fenced=()))
        assert (await client.put("/nodes/7/volumes", json=broker_report(), headers=NODE_AUTH)).status_code == 204

    run(tmp_path, scenario)


def test_with_observation_off_no_round_lists_the_brokers_and_a_thousand_nodes_are_taken(tmp_path):
    async def scenario(client, loop, clock):
        statuses = {(await client.put(f"/nodes/{n}/volumes", json=report(GiB), headers=NODE_AUTH)).status_code for n in range(1, 1001)}
        assert statuses == {204} and len(loop.decider.metadata) == 1000

    run_unobserved(tmp_path, scenario)
