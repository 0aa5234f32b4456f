"""A KRaft quorum of three controller-only nodes (devtools.devcluster, opt-in), each with its
metadata log on its own tmpfs, and the shim configured on every node: which processes load
the client quota callback (docs/architecture.md, "Where the callback runs in KRaft").

Needs java, Maven and root (tmpfs mounts)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devcluster import LocalKafkaCluster
from devtools.devcluster.shim import build_shim, shim_broker_config

MiB = 1024 * 1024
METADATA_MIB = 16
# Nothing listens there: the shim starts polling and falls back, which is all this needs.
UNREACHABLE_SERVICE = "http://127.0.0.1:9"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs mounts need root")


@pytest.fixture(scope="module")
def quorum() -> Iterator[LocalKafkaCluster]:
    shim = shim_broker_config(UNREACHABLE_SERVICE)
    c = LocalKafkaCluster(
        brokers=3,
        controllers=3,
        metadata_tmpfs_mib=METADATA_MIB,
        tmpfs=True,
        broker_config=shim,
        controller_config=shim,
        extra_classpath=[build_shim()],
    )
    try:
        c.start()
        yield c
    finally:
        c.stop()


def raft_states(cluster: LocalKafkaCluster) -> dict[int, str]:
    """The last raft state each controller logged (e.g. 'Leader(localId=1001, epoch=...')."""
    states = {}
    for cid in cluster.controller_ids:
        text = cluster.server_log(cid).read_text(errors="replace")
        found = re.findall(r"Completed transition to (\w+\([^)]*\))", text)
        states[cid] = found[-1] if found else ""
    return states


def test_three_controllers_form_one_quorum(quorum):
    assert quorum.controller_ids == [1000, 1001, 1002]
    text = quorum.config_path(1002).read_text()
    voters = re.search(r"controller\.quorum\.voters=(.*)", text).group(1)
    assert sorted(int(v.split("@")[0]) for v in voters.split(",")) == [1000, 1001, 1002]
    states = raft_states(quorum)
    leaders = [cid for cid, s in states.items() if s.startswith("Leader")]
    assert len(leaders) == 1, states
    for cid, state in states.items():
        if cid != leaders[0]:
            assert state.startswith("FollowerState") and f"leader={leaders[0]}," in state, states


def test_each_metadata_log_dir_is_its_own_tmpfs(quorum):
    mounts = Path("/proc/mounts").read_text()
    seen = set()
    for nid in [*quorum.controller_ids, *quorum.broker_ids]:
        path = quorum.metadata_log_dir(nid)
        assert f" {path} tmpfs " in mounts
        st = os.statvfs(path)
        assert st.f_blocks * st.f_frsize == METADATA_MIB * MiB
        assert any(path.glob("__cluster_metadata-0/*.log")), f"no metadata log in {path}"
        seen.add(os.stat(path).st_dev)
    assert len(seen) == 6  # six distinct file systems


def test_controller_only_nodes_instantiate_the_quota_callback(quorum):
    """ControllerServer builds its own QuotaFactory.QuotaManagers, so the callback is
    configured in controller-only processes too (one feed per process)."""
    for nid in [*quorum.controller_ids, *quorum.broker_ids]:
        text = quorum.server_log(nid).read_text(errors="replace")
        assert text.count(f"Throttle service shim: polling {UNREACHABLE_SERVICE}/quotas for broker {nid} ") == 1, nid


def test_a_node_whose_volume_reports_fail_says_so_once_not_once_a_report(quorum):
    """The shim reports its node's volumes once per poll interval (1 s here); an unreachable
    service is one log line for the whole episode, on controllers as on brokers."""
    nodes = [*quorum.controller_ids, *quorum.broker_ids]
    line = "volume report not taken by " + UNREACHABLE_SERVICE

    def counts() -> dict[int, int]:
        return {nid: quorum.server_log(nid).read_text(errors="replace").count(line) for nid in nodes}

    deadline = time.monotonic() + 15
    while min(counts().values()) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # three more failed reports on each node
    assert counts() == {nid: 1 for nid in nodes}
