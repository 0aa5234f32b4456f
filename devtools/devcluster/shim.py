"""The broker shim for local clusters: build its jar, and the broker properties that load it.

The same properties are what docker-compose.yml passes to its brokers (as KAFKA_* variables),
so the local stack and the compose stack poll the service in the same way."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHIM_DIR = REPO_ROOT / "shim"
SHIM_JAR = SHIM_DIR / "target" / "kafka-throttle-shim.jar"
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
    result = subprocess.run([command[0], "-q", *command[1:]] if quiet else command, capture_output=quiet, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout or "").splitlines()[-30:]) if quiet else ""
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
