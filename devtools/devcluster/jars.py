"""Fetch the Apache Kafka broker jars from Maven Central with Maven.

``ensure_kafka_jars()`` returns a directory whose ``*.jar`` files form a
complete broker classpath (``java -cp '<dir>/*' kafka.Kafka ...``).

The directory is populated by running ``mvn dependency:copy-dependencies`` on a
tiny generated POM that depends on ``org.apache.kafka:kafka_2.13`` plus the
log4j2 SLF4J binding (the kafka_2.13 POM brings ``slf4j-api`` 1.7.x and
``log4j-core`` but no SLF4J binding, so without it the broker would log
nothing). A marker file is written only after Maven succeeded, so an
interrupted download is redone on the next call; when the marker is present
no Maven process is started at all. Concurrent callers (several pytest
workers, a test and a ``python -m devtools.devcluster``) are serialised with an
``fcntl`` lock.

Stdlib only.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
from pathlib import Path

from ..commands import CommandFailed, run_command
from ._proc import die_with_parent_preexec

# The version of the local stack, docker-compose.yml and the integration suite: Strimzi 1.2's default.
KAFKA_VERSION = "4.3.1"
# The oldest Kafka line we keep: the shim is compiled against its API (shim/pom.xml) and every
# version in SMOKE_KAFKA_VERSIONS gets a real-broker smoke (tests/integration/test_kafka_versions.py).
OLDEST_KAFKA_VERSION = "4.1.2"
SMOKE_KAFKA_VERSIONS = (OLDEST_KAFKA_VERSION, "4.2.2", "4.4.0")

# The log4j2 version each Kafka release depends on (its kafka-server POM): the classpath pins
# log4j-core, log4j-api and the SLF4J binding it adds to that one version.
LOG4J_VERSIONS = {"4.1.1": "2.24.3", "4.1.2": "2.25.3", "4.2.2": "2.25.5", "4.3.1": "2.25.4", "4.4.0": "2.25.5"}
LOG4J_VERSION = LOG4J_VERSIONS[KAFKA_VERSION]


def log4j_version(version: str) -> str:
    """The log4j2 version to pair with Kafka ``version`` (the default's for a release not listed)."""
    return LOG4J_VERSIONS.get(version, LOG4J_VERSION)

# Pinned so the result does not depend on Maven's default plugin resolution.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

ENV_JARS_DIR = "KAFKA_JARS_DIR"

_MARKER = ".complete"
_BUILD_DIR = ".build"
_LOCK = ".lock"
_MVN_TIMEOUT_S = 20 * 60


def repo_root() -> Path:
    """Parent of the ``app`` package directory."""
    return Path(__file__).resolve().parents[2]


def default_cache_dir(version: str = KAFKA_VERSION) -> Path:
    env = os.environ.get(ENV_JARS_DIR)
    if env:
        return Path(env).expanduser().resolve()
    return repo_root() / ".cache" / f"kafka-{version}"


def _dependencies(version: str) -> list[tuple[str, str, str]]:
    log4j = log4j_version(version)
    return [
        ("org.apache.kafka", "kafka_2.13", version),
        # kafka_2.13 brings slf4j-api 1.7.36 (runtime) and log4j-core via
        # kafka-server, but no SLF4J -> log4j2 binding: add the SLF4J 1.x one.
        ("org.apache.logging.log4j", "log4j-slf4j-impl", log4j),
        ("org.apache.logging.log4j", "log4j-core", log4j),
        ("org.apache.logging.log4j", "log4j-api", log4j),
    ]


def _pom(version: str) -> str:
    deps = "\n".join(
        "    <dependency>\n"
        f"      <groupId>{g}</groupId>\n"
        f"      <artifactId>{a}</artifactId>\n"
        f"      <version>{v}</version>\n"
        "    </dependency>"
        for g, a, v in _dependencies(version)
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.devcluster</groupId>
  <artifactId>kafka-broker-classpath</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


def _fingerprint(version: str) -> str:
    h = hashlib.sha256(_pom(version).encode())
    h.update(DEPENDENCY_PLUGIN.encode())
    return h.hexdigest()


def _is_complete(cache_dir: Path, version: str) -> bool:
    marker = cache_dir / _MARKER
    try:
        content = marker.read_text().strip()
    except OSError:
        return False
    if content != _fingerprint(version):
        return False
    return any(cache_dir.glob(f"kafka_2.13-{version}.jar"))


def ensure_kafka_jars(version: str = KAFKA_VERSION, cache_dir: Path | str | None = None) -> Path:
    """Return a directory of jars forming the Kafka ``version`` broker classpath.

    ``cache_dir`` defaults to ``$KAFKA_JARS_DIR`` or ``<repo>/.cache/kafka-<version>``.
    Fast (no Maven call) when already populated. Raises ``RuntimeError`` with
    the tail of Maven's output when the download fails.
    """
    cache = Path(cache_dir).expanduser().resolve() if cache_dir else default_cache_dir(version)
    if _is_complete(cache, version):
        return cache
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / _LOCK, "a+") as lock_fh:
        fcntl.flock(lock_fh, fcntl.LOCK_EX)
        try:
            if _is_complete(cache, version):  # another caller did it meanwhile
                return cache
            _download(cache, version)
        finally:
            fcntl.flock(lock_fh, fcntl.LOCK_UN)
    return cache


def _download(cache: Path, version: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(
            "ensure_kafka_jars: 'mvn' not found on PATH (install Maven, e.g. apt-get install maven)"
        )
    (cache / _MARKER).unlink(missing_ok=True)
    for old in cache.glob("*.jar"):  # leftovers of an interrupted or older download
        old.unlink()
    build = cache / _BUILD_DIR
    build.mkdir(exist_ok=True)
    (build / "pom.xml").write_text(_pom(version))
    cmd = [
        mvn, "-B", "-q", "--no-transfer-progress",
        "-f", str(build / "pom.xml"),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={cache}",
    ]
    started = time.monotonic()
    try:
        res = run_command(
            cmd, _MVN_TIMEOUT_S, cwd=build, merge_stderr=True,
            # mvn must not outlive us: an orphan would keep writing into the
            # cache while the next caller (lock released) starts over.
            preexec_fn=die_with_parent_preexec(),
        )
    except CommandFailed as exc:
        raise RuntimeError(f"ensure_kafka_jars: mvn {exc}") from None
    (build / "mvn.log").write_text(res.stdout)
    if res.returncode != 0:
        raise RuntimeError(
            f"ensure_kafka_jars: mvn failed (exit {res.returncode}) fetching Kafka {version} jars "
            f"into {cache}:\n{_tail(res.stdout)}"
        )
    if not (cache / f"kafka_2.13-{version}.jar").is_file():
        raise RuntimeError(
            f"ensure_kafka_jars: mvn succeeded but kafka_2.13-{version}.jar is missing in {cache}:\n"
            f"{_tail(res.stdout)}"
        )
    (build / "elapsed_s").write_text(f"{time.monotonic() - started:.1f}\n")
    tmp = cache / (_MARKER + ".tmp")
    tmp.write_text(_fingerprint(version) + "\n")
    os.replace(tmp, cache / _MARKER)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])
