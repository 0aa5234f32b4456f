"""The Go programs the tests run, built from the Go module proxy into .cache/tools/bin by
`make test-tools`: kustomize (the real one) and compose-config (Compose's own loader,
devtools/composeconfig)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from devtools.commands import run_command

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT / ".cache/tools/bin"


def tool(name: str) -> str:
    """The program from .cache/tools/bin (what `make test-tools` installs), else from PATH."""
    local = TOOLS / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    assert found, f"{name} is needed: `make test-tools` builds it into {TOOLS}"
    return found


def kustomize_build(directory: Path) -> list[dict]:
    result = run_command([tool("kustomize"), "build", directory], 120)
    assert result.returncode == 0, result.stderr
    return [document for document in yaml.safe_load_all(result.stdout) if document]
