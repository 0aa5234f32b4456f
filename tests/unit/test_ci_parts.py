"""The test command's timer (.ci/parts.py) and the dev cluster's port pool per test process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from devtools.devcluster.cluster import _worker_share

PARTS = Path(__file__).resolve().parents[2] / ".ci" / "parts.py"


def parts(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, PARTS, *arguments], cwd=cwd, capture_output=True, text=True, timeout=60)


def rows(stdout: str) -> dict[str, str]:
    """The table's rows by part name: the time and the result."""
    table = stdout.split("Time per part", 1)[1].splitlines()[1:]
    return {line[4:].split("  ", 1)[0].strip(): line[4:].split("  ", 1)[1].strip() for line in table}


def test_every_part_timed_and_a_failure_stops_the_later_groups_with_a_nonzero_exit(tmp_path: Path):
    result = parts("first=echo one", "second=exit 3", "+beside=echo two", "later=touch ran", cwd=tmp_path)
    assert result.returncode != 0
    table = rows(result.stdout)
    assert table["first"].endswith("ok") and table["beside"].endswith("ok")
    assert table["second"].endswith("FAILED (exit 3)")
    assert table["later"] == "-  not run" and not (tmp_path / "ran").exists()
    assert "one" in result.stdout and "two" in result.stdout


def test_parts_of_a_group_run_at_the_same_time_and_a_lane_in_order(tmp_path: Path):
    # "b" waits for "a" to write its file, which only works if they run at the same time;
    # "c" runs after "b" in b's lane and sees what b wrote
    result = parts(
        "a=sleep 0.5; echo x > a",
        "+b=while [ ! -s a ]; do sleep 0.1; done; cp a b",
        ">c=cat b",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    table = rows(result.stdout)
    assert all(table[name].endswith("ok") for name in ("a", "b", "c"))
    assert "total" in table


def test_a_failed_part_leaves_the_rest_of_its_lane_unrun(tmp_path: Path):
    result = parts("a=sleep 0.3", "+b=exit 1", ">c=touch c", cwd=tmp_path)
    assert result.returncode != 0
    assert rows(result.stdout)["c"] == "-  not run" and not (tmp_path / "c").exists()


def test_module_times_from_a_junit_report(tmp_path: Path):
    (tmp_path / "written.xml").write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.integration.test_a" name="t1" time="2.5"><properties><property name="worker" value="gw1"/></properties></testcase>'
        '<testcase classname="tests.integration.test_a.TestX" name="t2" time="1.0"/>'
        '<testcase classname="tests.integration.test_b" name="t3" time="7.0"/>'
        "</testsuite></testsuites>"
    )
    (tmp_path / "r.xml").write_text("a stale report of an earlier run")  # removed before the parts run
    result = parts("--modules", "r.xml", "write=cp written.xml r.xml", cwd=tmp_path)
    assert result.returncode == 0
    lines = [line.split() for line in result.stdout.splitlines() if line.strip().startswith("tests.integration.")]
    assert lines == [["tests.integration.test_b", "7.0", "s", "1", "tests"], ["tests.integration.test_a", "3.5", "s", "2", "tests", "gw1"]]


def test_the_test_processes_take_ports_from_parts_of_the_pool_that_do_not_overlap():
    pool = (10000, 32768)
    assert _worker_share(pool, {}) == pool
    assert _worker_share(pool, {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"}) == pool
    shares = [_worker_share(pool, {"PYTEST_XDIST_WORKER": f"gw{i}", "PYTEST_XDIST_WORKER_COUNT": "3"}) for i in range(3)]
    assert shares[0][0] == pool[0] and all(lo < hi for lo, hi in shares)
    assert all(shares[i][1] <= shares[i + 1][0] for i in range(2)) and shares[-1][1] <= pool[1]
    assert min(hi - lo for lo, hi in shares) >= (pool[1] - pool[0]) // 3
