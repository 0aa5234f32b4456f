"""Prometheus' own tools for the tests: Debian's `prometheus` package (/usr/bin/prometheus and
/usr/bin/promtool), which .ci/run installs when it is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from devtools.commands import run_command


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is needed (Debian's prometheus package: apt-get install prometheus; .ci/run installs it)"
    return path


def promtool(*args: str | Path, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_command([binary("promtool"), *args], 120, input=stdin, cwd=cwd)
