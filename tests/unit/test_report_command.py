"""``throttle-report``, the installed console script: without PySpark (a plain `pip install .`)
it says in one line how to install it; with PySpark it is the report's command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from devtools.commands import run_command

SCRIPT = Path(sys.executable).with_name("throttle-report")


def run(*args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    assert SCRIPT.exists(), f"{SCRIPT}: make install installs the console scripts"
    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return run_command([SCRIPT, *args], 60, env=env)


def without_pyspark(directory: Path) -> Path:
    """A PYTHONPATH on which `import pyspark` fails as it does where PySpark is not installed."""
    package = directory / "pyspark"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pyspark'\", name='pyspark')\n")
    return directory


def test_without_pyspark_it_says_in_one_line_how_to_install_it(tmp_path):
    shadow = without_pyspark(tmp_path / "path")
    for args in (["--input", str(tmp_path), "--output", str(tmp_path / "report")], ["--help"]):
        result = run(*args, pythonpath=shadow)
        assert result.returncode == 1, result.stderr
        assert result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert "pip install 'kafka-throttle-service[report]'" in line


def test_with_pyspark_it_is_the_reports_command_line():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: throttle-report")
