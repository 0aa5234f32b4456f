"""``throttle-report`` as an operator runs it: the installed console script, from any folder.

The forecast's fit runs in Spark's Python workers. Spark starts them with the ``python3`` first
on the PATH unless told otherwise; that Python need not have the report's packages (here it is
a stand-in that refuses to run), and the workers then found the report's modules only when the
command was started from the project's folder."""

from __future__ import annotations

import csv
import os
import re
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from spark.cli import main
from spark.job import run_report
from spark.reading.cache import UnusablePath

from .synthetic import MiB, at, write_rounds

START = at(2026, 7, 1, 8, 0, 0)
ROUNDS = 40


def filling(i: int) -> int:
    return 80 * MiB - i * MiB  # 1 MiB per 60 s round: a forecast with a time to the hard limit


def test_the_console_script_reports_from_any_folder_whatever_python3_the_path_has(tmp_path):
    history, output, elsewhere, fake_bin = (tmp_path / name for name in ("history", "report", "elsewhere", "bin"))
    write_rounds(history, START, ROUNDS, {(1, "/data/a"): filling, (2, "/data/b"): lambda i: 70 * MiB}, outage=set())
    elsewhere.mkdir()
    fake_bin.mkdir()
    fake = fake_bin / "python3"
    fake.write_text("#!/bin/sh\necho 'a python3 without the report (PATH)' >&2\nexit 3\n")
    fake.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in ("PYSPARK_PYTHON", "PYTHONPATH")}
    env["PATH"] = f"{fake_bin}{os.pathsep}{env.get('PATH', '')}"
    script = Path(sys.executable).parent / "throttle-report"

    finished = subprocess.run(
        [str(script), "--input", str(history), "--output", str(output), "--master", "local[1]"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert finished.returncode == 0, finished.stderr[-3000:]
    with (output / "forecast.csv").open() as handle:
        forecast = {(row["broker_id"], row["log_dir"]): row for row in csv.DictReader(handle)}
    expected_full = START + timedelta(minutes=70)  # 80 MiB at round 0, 1 MiB a round, hard limit 10 MiB
    assert forecast[("1", "/data/a")]["projected_at"].startswith(expected_full.strftime("%Y-%m-%dT%H:%M")), forecast
    assert (output / "report.html").is_file()


def test_paths_the_report_cannot_use_are_refused_in_one_line_before_any_work(spark, tmp_path):
    """A missing history, a file where the output or the cache folder must be, a folder under
    a file, the history's own folder as the output or the cache, and the output's as the
    cache: each refused with the path and why."""
    history = tmp_path / "history"
    write_rounds(history, START, 3, {(1, "/data/a"): filling}, outage=set())
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    cases = [
        (dict(input_path=str(tmp_path / "no-such-history"), output_path=str(tmp_path / "out1")), "the history .*no-such-history does not exist"),
        (dict(input_path=str(history), output_path=str(a_file)), "the output .*a-file is a file, not a folder"),
        (dict(input_path=str(history), output_path=str(a_file / "report")), "the output .*a-file/report cannot be made a folder: .*not a directory"),
        (dict(input_path=str(history), output_path=str(tmp_path / "out2"), cache=str(a_file)), "the cache .*a-file is a file, not a folder"),
        (dict(input_path=str(history), output_path=str(history) + "/"), "the output .*history/ is the history's folder"),
        (dict(input_path=str(history), output_path=str(tmp_path / "out3"), cache=str(history)), "the cache .*history is the history's folder"),
        (dict(input_path=str(history), output_path=str(tmp_path / "out4"), cache=str(tmp_path / "out4")), "the cache .*out4 is the output's folder"),
    ]
    for arguments, message in cases:
        with pytest.raises(UnusablePath, match=message):
            run_report(spark, **arguments)
    assert sorted(p.name for p in history.iterdir()) == ["date=2026-07-01"]  # nothing written into the history
    assert a_file.read_text() == "not a folder\n"


def test_since_not_before_until_is_refused_by_the_command_line(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--input", "h", "--output", "o", "--since", "2026-07-02", "--until", "2026-07-01T12:00"])
    assert exited.value.code == 2
    assert "--since 2026-07-02T00:00:00+00:00 is not before --until 2026-07-01T12:00:00+00:00" in capsys.readouterr().err


def test_a_master_spark_does_not_know_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--input", "h", "--output", "o", "--master", "local[0]"])
    assert exited.value.code == 2
    assert "not a Spark master: 'local[0]'" in capsys.readouterr().err


def test_spark_that_cannot_start_ends_the_command_with_one_line_saying_so(tmp_path):
    """No usable Java (JAVA_HOME pointing nowhere): exit 1 and a line naming the master, not a
    Python traceback."""
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    script = Path(sys.executable).parent / "throttle-report"
    finished = subprocess.run(
        [str(script), "--input", str(tmp_path), "--output", str(tmp_path / "out"), "--master", "local[1]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 1, finished.stderr[-2000:]
    last = finished.stderr.strip().splitlines()[-1]
    assert last.startswith("throttle-report: Spark did not start on local[1]: "), finished.stderr[-2000:]
    assert "Traceback" not in finished.stderr


def test_a_run_without_limits_leaves_no_backtest_of_an_earlier_run_in_its_output(spark, tmp_path):
    """The output is replaced: the tables of --limits written by an earlier run into the same
    folder go; files the report does not write stay."""
    from app.decision.policy import LimitKind, StoragePolicy
    from spark.analysis.backtest import LimitSet

    history, output = tmp_path / "history", tmp_path / "report"
    write_rounds(history, START, 20, {(1, "/data/a"): filling}, outage=set())
    tighter = LimitSet("tighter", StoragePolicy(LimitKind.MIN_AVAILABLE_RATIO, 0.2, 0.4))
    run_report(spark, str(history), str(output), limit_sets=[tighter])
    assert (output / "backtest.csv").is_file() and (output / "parquet" / "backtest_episodes").is_dir()
    (output / "notes.txt").write_text("mine\n")

    run_report(spark, str(history), str(output))

    assert sorted(p.name for p in output.iterdir()) == ["brokers.csv", "episodes.csv", "forecast.csv", "notes.txt", "parquet", "report.html", "time_in_states.csv"]
    assert sorted(p.name for p in (output / "parquet").iterdir()) == ["brokers", "episodes", "forecast", "time_in_states"]


def test_a_cache_in_use_by_another_run_is_refused_and_a_dead_runs_lock_is_taken_over(spark, tmp_path):
    """Two runs on one cache at once (a scheduled report and one by hand): the second stops
    and names the first, instead of deleting the files the first is staging or reading. A lock
    whose run has ended (killed) does not block; a run leaves no lock, also when it fails."""
    from spark.job import EmptyHistory

    history, cache = tmp_path / "history", tmp_path / "cache"
    write_rounds(history, START, 10, {(1, "/data/a"): filling}, outage=set())
    cache.mkdir()
    other_run = subprocess.Popen(["sleep", "60"])
    try:
        write_lock(cache, f"{socket.gethostname()} {other_run.pid} 2026-07-01T08:00:00+00:00")
        with pytest.raises(UnusablePath, match=re.escape(f"the cache {cache} is in use by another run of the report ({socket.gethostname()} {other_run.pid} ")):
            run_report(spark, str(history), str(tmp_path / "second"), cache=str(cache))
        assert not (tmp_path / "second" / "report.html").exists()
        assert sorted(p.name for p in cache.iterdir()) == ["lock"]  # the first run's folder untouched
    finally:
        other_run.kill()
        other_run.wait()

    (cache / "lock").write_bytes(b"")  # a run stopped before it wrote its name: who holds it is unknown
    with pytest.raises(UnusablePath, match=re.escape(f"the cache {cache} is in use by another run of the report (unnamed); if no run is using it, remove ")):
        run_report(spark, str(history), str(tmp_path / "second"), cache=str(cache))
    write_lock(cache, f"{socket.gethostname()} {other_run.pid} 2026-07-01T08:00:00+00:00")

    run_report(spark, str(history), str(tmp_path / "after"), cache=str(cache))  # the killed run's lock is taken over
    assert (tmp_path / "after" / "report.html").is_file()
    assert not (cache / "lock").exists()
    with pytest.raises(EmptyHistory):
        run_report(spark, str(history), str(tmp_path / "empty"), since=at(2027, 1, 1, 0, 0), cache=str(cache))
    assert not (cache / "lock").exists()


def write_lock(folder: Path, owner: str) -> None:
    """A lock as a run writes it (Java's modified UTF-8: a 2-byte length, then the text)."""
    encoded = owner.encode()
    (folder / "lock").write_bytes(len(encoded).to_bytes(2, "big") + encoded)
