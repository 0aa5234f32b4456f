"""The architecture of docs/architecture.md holds: the import contracts in pyproject.toml
(layers from the server down to shared utilities; the server's own layers, the API and the edge
without the runtime's internals; no domain package imports the server, the web framework or the
metrics library; the report's layers, its page without Spark) are kept by the code, and the API
reaches the running service through its facade only."""

import ast
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
    assert "6 kept, 0 broken" in result.stdout


def test_a_domain_module_importing_the_web_framework_breaks_the_contracts(tmp_path):
    # The contracts would catch it: the same tree, with one domain module importing FastAPI.
    tree = tmp_path / "tree"
    run_command(["cp", "-r", ROOT / "app", ROOT / "spark", ROOT / "pyproject.toml", tree.mkdir() or tree], 60, check=True)
    policy = tree / "app" / "decision" / "policy.py"
    policy.write_text("from fastapi import Request  # noqa\nfrom app.server.api.state import service_state  # noqa\n" + policy.read_text())
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "app.decision.policy -> fastapi" in result.stdout and "BROKEN" in result.stdout, result.stdout


def test_a_route_importing_the_observation_loop_breaks_the_contracts(tmp_path):
    tree = tmp_path / "tree"
    run_command(["cp", "-r", ROOT / "app", ROOT / "spark", ROOT / "pyproject.toml", tree.mkdir() or tree], 60, check=True)
    route = tree / "app" / "server" / "api" / "routes" / "throttle.py"
    route.write_text("from app.server.runtime.loop import ObservationLoop  # noqa\n" + route.read_text())
    result = lint_imports(tree)
    assert result.returncode != 0
    assert "app.server.api.routes.throttle -> app.server.runtime.loop" in result.stdout, result.stdout


# What the facade (app/server/runtime/service.py) keeps for the wiring and the tests: the API
# reads the decision through view() and acts through the facade's methods.
INTERNALS = {"decider", "loop", "cache", "holder", "publisher", "intake"}


def internals_reached(package: Path) -> list[str]:
    """Every attribute access in ``package``'s modules that names one of the INTERNALS."""
    found = []
    for module in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in INTERNALS:
                found.append(f"{module.relative_to(package)}:{node.lineno} .{node.attr}")
    return found


def test_the_api_never_reaches_into_the_decider_its_cache_or_the_loop():
    assert internals_reached(ROOT / "app" / "server" / "api") == []


def test_a_route_reaching_into_the_decider_is_found(tmp_path):
    package = ROOT / "app" / "server" / "api"
    copy = tmp_path / "api"
    run_command(["cp", "-r", package, copy], 60, check=True)
    route = copy / "routes" / "health.py"
    route.write_text(route.read_text() + "\n\ndef peek(state):\n    return state.decider.cache.brokers()\n")
    found = [f.split(" ")[-1] for f in internals_reached(copy)]
    assert found == [".cache", ".decider"]

