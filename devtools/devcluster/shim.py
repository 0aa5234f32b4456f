"""The broker shim for local clusters: build its jar, and the broker properties that load it.

The same properties are what docker-compose.yml passes to its brokers (as KAFKA_* variables),
so the local stack and the compose stack poll the service in the same way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..commands import run_command

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIM_DIR = REPO_ROOT / "shim"
SHIM_JAR = SHIM_DIR / "target" / "kafka-throttle-shim.jar"
# Maven resolves its plugins on a first build: minutes on a cold cache, never an hour.
BUILD_TIMEOUT_SECONDS = 20 * 60
CALLBACK_CLASS = "io.kafkathrottle.shim.ServiceQuotaCallback"

# How often the brokers of the local stacks ask the service for its table: a long-poll that
# the service answers at once on a change, retried after 1 s when the service is away.
LOCAL_SHIM_PROPERTIES = {
    "client.quota.callback.service.poll.interval.ms": "1000",
    "client.quota.callback.service.long.poll.wait.ms": "30000",
}


def build_shim(quiet: bool = True) -> Path:
    """The shim jar, built with Maven when missing or older than its sources."""
    sources = [SHIM_DIR / "pom.xml", *(SHIM_DIR / "src" / "main").rglob("*.java")]
    if SHIM_JAR.exists() and SHIM_JAR.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return SHIM_JAR
    if shutil.which("mvn") is None:
        raise RuntimeError("building the broker shim needs Maven (mvn) and a JDK 17 on the PATH")
    command = ["mvn", "-B", "-f", str(SHIM_DIR / "pom.xml"), "-DskipTests", "package"]
    if quiet:  # the output drained while Maven runs, shown if it fails
        result = run_command([command[0], "-q", *command[1:]], BUILD_TIMEOUT_SECONDS, merge_stderr=True)
        tail = "\n".join(result.stdout.splitlines()[-30:])
    else:  # Maven writes to this process's own output
        result = subprocess.run(command, stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_SECONDS)
        tail = ""
    if result.returncode != 0:
        raise RuntimeError(f"building the broker shim failed ({' '.join(command)}):\n{tail}")
    return SHIM_JAR


def shim_broker_config(service_url: str, **overrides: str) -> dict[str, str]:
    """Broker properties that install the shim and point it at the service."""
    return {
        "client.quota.callback.class": CALLBACK_CLASS,
        "client.quota.callback.service.url": service_url,
        **LOCAL_SHIM_PROPERTIES,
        **overrides,
    }
