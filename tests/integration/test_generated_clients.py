"""Clients that openapi-generator makes from the committed openapi/openapi.json, in Java (the
native library: java.net.http.HttpClient), Go and TypeScript (typescript-fetch), drive every
operation of the running service: the programs in generated_clients/ call each one and print
what it answered. Each also sets the largest quota the document allows and 123456789 and reads
them back from the table exactly (a client that took quotas for float32 would not).

The generator runs as its Maven plugin (Maven keeps it in its local repository); the generated
sources, the compiled programs and the TypeScript compiler (from npm) are kept in .cache/ and
rebuilt only when the document, a program or the build files change. The Go client needs no
module beyond the standard library."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from app.settings.model import QUOTA_MAX
from devtools.commands import run_command

from .conftest import ROOT

SOURCES = Path(__file__).parent / "generated_clients"
BUILD = ROOT / ".cache" / "generated-clients"
TOKEN = "generated-clients-admin-token"
DRIVER_CLASS = "io.kafkathrottle.clientcheck.DriveEveryOperation"

# What the service answers each call of the programs, whichever language made the call.
EXPECTED = {
    "healthz": "ok",
    "readyz": 200,
    "metrics": True,
    "throttle_factor": 1.0,
    "volumes": 0,
    "default_produce": 1000000,
    "override_level": "user, default client-id",
    "override_limits": [2097152, 4194304],
    "group": ["analytics", ["bob", "carol"], ["etl"], 5242880, 50],
    "table_overrides": 1,
    "table_groups": 1,
    "resolved_carol": ["group", "analytics", 5242880],
    "resolved_alice": ["user, default client-id", 4194304],
    "put_without_token": "401 application/problem+json",
    "put_below_floor": "422 application/problem+json",
    "max_quota": [QUOTA_MAX, 123456789],
    "max_quota_exact": True,
    "delete_override_again": "404 application/problem+json",
    "delete_group_again": "404 application/problem+json",
    "overrides_after": 0,
    "groups_after": 0,
}


def _fingerprint() -> str:
    digest = hashlib.sha256((ROOT / "openapi" / "openapi.json").read_bytes())
    for path in sorted(p for p in SOURCES.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(SOURCES)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _run(command: list[str], cwd: Path, timeout: float) -> None:
    result = run_command(command, timeout, cwd=cwd)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"


def _build() -> None:
    for stale in ("java", "maven", "go", "typescript/client", "typescript/out"):
        shutil.rmtree(BUILD / stale, ignore_errors=True)
    # Generates the three clients and compiles the Java one with DriveEveryOperation (see pom.xml).
    _run(["mvn", "-B", "-ntp", "-q", "-f", str(SOURCES / "pom.xml"), f"-Dclients.build={BUILD}", "compile"], ROOT, 15 * 60)
    go = BUILD / "go"
    for name in ("go.mod", "main.go"):
        shutil.copy(SOURCES / "go" / name, go / name)
    _run(["go", "build", "-mod=mod", "-o", str(go / "drive"), "."], go, 10 * 60)
    typescript = BUILD / "typescript"
    for name in ("drive.ts", "tsconfig.json", "package.json", "package-lock.json"):
        shutil.copy(SOURCES / "typescript" / name, typescript / name)
    _run(["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline", "--cache", str(ROOT / ".cache" / "npm")], typescript, 10 * 60)
    _run([str(typescript / "node_modules" / ".bin" / "tsc"), "-p", str(typescript)], typescript, 5 * 60)


@pytest.fixture(scope="module")
def generated_clients() -> dict[str, list[str]]:
    """The command that runs each language's program, given the base URL and the token."""
    stamp = BUILD / ".fingerprint"
    fingerprint = _fingerprint()
    if not stamp.exists() or stamp.read_text() != fingerprint:
        stamp.unlink(missing_ok=True)
        _build()
        stamp.write_text(fingerprint)
    classpath = f"{BUILD / 'maven' / 'classes'}:{(BUILD / 'java-classpath.txt').read_text().strip()}"
    return {
        "java": ["java", "-cp", classpath, DRIVER_CLASS],
        "go": [str(BUILD / "go" / "drive")],
        "typescript": ["node", str(BUILD / "typescript" / "out" / "drive.js")],
    }


@pytest.mark.parametrize("language", ["java", "go", "typescript"])
def test_a_generated_client_drives_every_operation(language, generated_clients, start_service):
    service = start_service(
        storage_check_interval="PT0S",
        storage_per_volume_limit_min_available_ratio="0.05",
        admin_token=TOKEN,
        produce="1000000",
    )
    result = run_command([*generated_clients[language], service.base_url, TOKEN], 120)
    assert result.returncode == 0, f"{result.stderr[-4000:]}\nservice log:\n{service.log()[-3000:]}"
    assert json.loads(result.stdout.strip().splitlines()[-1]) == EXPECTED
