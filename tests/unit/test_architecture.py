"""The architecture of docs/architecture.md holds: the import contracts in pyproject.toml
(layers from the server down to shared utilities; no domain package imports the server, the
web framework or the metrics library; the report's layers, its page without Spark) are kept by
the code."""

import subprocess
import sys
from pathlib import Path

from devtools.commands import run_command

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(tree: Path = ROOT) -> subprocess.CompletedProcess:
    """import-linter's check of the contracts in ``tree``/pyproject.toml, on ``tree``/app."""
    command = [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"]
    return run_command(command, 120, cwd=tree, env={"PYTHONPATH": str(tree), "PATH": ""})


def test_the_import_contracts_are_kept():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_a_domain_module_importing_the_web_framework_breaks_the_contracts(tmp_path):
    # The contracts would catch it: the same tree, with one domain module importing FastAPI.
    tree = tmp_path / "tree"
    run_command(["cp", "-r", ROOT / "app", ROOT / "spark", ROOT / "pyproject.toml", tree.mkdir() or tree], 60, check=True)
    policy = tree / "app" / "decision" / "policy.py"
    policy.write_text("from fastapi import Request  # noqa\nfrom app.server.api.state import service_state  # noqa\n" + policy.read_text())
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "app.decision.policy -> fastapi" in result.stdout and "BROKEN" in result.stdout, result.stdout
