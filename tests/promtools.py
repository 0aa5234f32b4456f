"""Prometheus' own tools for the tests: Debian's `prometheus` package (/usr/bin/prometheus and
/usr/bin/promtool), which .ci/run installs when it is missing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def binary(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is needed (Debian's prometheus package: apt-get install prometheus; .ci/run installs it)"
    return path


def promtool(*args: str | Path, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary("promtool"), *map(str, args)], input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd
    )
