"""The SparkSession of the report: local[*] by default, any master through --master or spark-submit."""

from __future__ import annotations

import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# Days and timestamps in the report are UTC, whatever the machine's time zone. Timestamps
# in Parquet as microseconds since the epoch (not the legacy INT96, which costs a calendar
# conversion for every value written and read). Local files without Hadoop's ".<name>.crc"
# side files (HDFS and object stores keep their checksums out of sight anyway).
_ALWAYS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    # The parsed lines' free texts are variants, read back from the scratch Parquet whole:
    # pushed into the scan, extracting them fails in interpreted evaluation
    # (CLASS_NOT_OVERRIDE_EXPECTED_METHOD, ScalarCastHelper; Spark 4.3).
    "spark.sql.variant.pushVariantIntoScan": "false",
}
# The report's windows over rounds and volumes (a few thousand rows) run in one partition on
# purpose; Spark would warn about each of them on the terminal.
_QUIET_LOGGERS = ("org.apache.spark.sql.execution.window.WindowExec",)
# For a local master started here (spark-submit brings its own settings): the JVM is
# started by this process, so its memory and collector can still be chosen (the throughput
# collector: about 10% less CPU than G1 for this batch job). The JIT compiles the strict
# reader's generated checks although their method is over HotSpot's 8,000-byte limit for
# compiling (DontCompileHugeMethods): left interpreted, they cost more CPU than parsing the
# JSON (BENCHMARKS.md, the cache section). The JIT stops at its quick first tier (C1): a run
# is seconds to minutes of a JVM started for it, spent mostly planning queries in the driver,
# and the optimising tier's compiling (on the same few cores) paid for itself in no run
# measured (2 days of 100 x 4 from the cache: 41-47 s against 54-77 s; parsed: no slower).
# That tier's code cache is 48 MiB by default, which a run parsing 2 days of 100 x 4 filled
# (the JVM then stops compiling, and what runs after is interpreted): 256 MiB.
_LOCAL = {
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": (
        "-XX:+UseParallelGC -XX:-DontCompileHugeMethods -XX:TieredStopAtLevel=1"
        " -XX:ReservedCodeCacheSize=256m"
    ),
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # List the history's date folders in the driver: with one machine's cores, a Spark job
    # to list a few hundred folders in parallel costs more than it saves.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
    # A file costs a task about what reading this many bytes costs (Spark's default, 4 MiB,
    # makes a task of every small file): the cached history is a few small Parquet files per
    # history file and table, packed so into a task per core instead of one per file.
    "spark.sql.files.openCostInBytes": str(64 * 1024),
}


def local_cores(master: str) -> int:
    """The cores a local master runs tasks on: local[N] (or local[N,F]) N, local[*] every
    core of the machine, local 1."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\d+)?\])?", master)
    if found is None or found[1] is None:
        return 1
    return os.cpu_count() or 1 if found[1] == "*" else int(found[1])


def _local_settings(master: str) -> dict[str, str]:
    """_LOCAL, and as many shuffle partitions as the master has cores: the report's shuffles
    after the parse carry a few thousand rows each (rounds, volumes, episodes), and each
    partition is a task (2 instead of 8 on local[2]: a run from the cache 54 s against 65-77 s)."""
    return {**_LOCAL, "spark.sql.shuffle.partitions": str(local_cores(master))}


def _use_this_python_in_workers() -> None:
    """A local master's Python workers (the report's own queries start none; a user's settings
    or a later query may) run this Python, which has the report's packages, unless
    PYSPARK_PYTHON names another. PySpark's default is the
    ``python3`` first on the PATH, which need not have them: the workers then imported the
    report's modules only when started from the project's folder. (PySpark reads the variable,
    not ``spark.pyspark.python``, when the driver is this process.)"""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def launched_by_spark_submit() -> bool:
    # spark-submit starts the Python driver with the gateway to its JVM already open.
    return "PYSPARK_GATEWAY_PORT" in os.environ


# Spark's Kafka source (--input kafka://...), resolved by Spark from Maven Central when the
# session starts (spark.jars.packages) into KAFKA_IVY (the first run downloads about 6 MB).
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
_KAFKA_ARTIFACT = "spark-sql-kafka-0-10_{scala}"
# What the Kafka source depends on that PySpark ships already: not downloaded a second time.
_SHIPPED = (
    "org.apache.hadoop:hadoop-client-runtime", "org.apache.hadoop:hadoop-client-api", "org.slf4j:slf4j-api", "org.xerial.snappy:snappy-java",
    "at.yawk.lz4:lz4-java", "org.lz4:lz4-java", "com.github.luben:zstd-jni", "com.google.code.findbugs:jsr305",
    "org.scala-lang.modules:scala-parallel-collections_{scala}",
)  # fmt: skip
# Ivy's own settings would look in ~/.m2 first, where a pom without its jar (left by Maven)
# stops the resolution: Maven Central only.
_IVY_SETTINGS = """<ivysettings>
  <settings defaultResolver="central"/>
  <caches defaultCacheDir="{cache}"/>
  <resolvers><ibiblio name="central" m2compatible="true" root="{root}/"/></resolvers>
</ivysettings>
"""


def kafka_ivy_home() -> Path:
    """Where the Kafka source's jars are kept between runs ($XDG_CACHE_HOME, else ~/.cache)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "throttle-report" / "ivy"


def scala_version() -> str:
    """The Scala version PySpark's jars are built for (2.13 for Spark 4)."""
    jars = Path(pyspark.__file__).parent / "jars"
    for jar in sorted(jars.glob("spark-core_*.jar")):
        found = re.match(r"spark-core_(\d+\.\d+)-", jar.name)
        if found:
            return found[1]
    return "2.13"


def _release(version: str) -> tuple[int, ...] | None:
    return (
        tuple(int(part) for part in version.split("."))
        if re.fullmatch(r"\d+(\.\d+)*", version)
        else None
    )


def _published(artifact: str, version: str) -> bool | None:
    """Whether Maven Central has the artifact at that version; None when it cannot be asked."""
    url = f"{MAVEN_CENTRAL}/org/apache/spark/{artifact}/{version}/{artifact}-{version}.pom"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=15):
            return True
    except urllib.error.HTTPError as exc:
        return False if exc.code == 404 else None
    except OSError:
        return None


def _newest_published(artifact: str, ceiling: str) -> str | None:
    """The newest release on Maven Central of the same major version, not newer than ``ceiling``."""
    try:
        with urllib.request.urlopen(
            f"{MAVEN_CENTRAL}/org/apache/spark/{artifact}/maven-metadata.xml", timeout=15
        ) as answer:
            listed = re.findall(r"<version>([^<]+)</version>", answer.read().decode())
    except OSError:
        return None
    return newest_release(listed, ceiling)


def newest_release(versions: list[str], ceiling: str) -> str | None:
    """The newest of ``versions`` of the same major version as ``ceiling`` and not newer than
    it; previews and release candidates are not releases."""
    top = _release(ceiling)
    releases = [
        r
        for r in map(_release, versions)
        if r is not None and top is not None and r[0] == top[0] and r <= top
    ]
    return ".".join(map(str, max(releases))) if releases else None


def kafka_package(say=print) -> str:
    """The Kafka source for this PySpark: its own version, else (not on Maven Central yet) the
    newest release of the same major version before it, said in one line. The choice is kept
    beside the jars, so later runs ask nothing."""
    artifact = _KAFKA_ARTIFACT.format(scala=scala_version())
    version = pyspark.__version__
    chosen = kafka_ivy_home() / f"{artifact}-for-{version}"
    if chosen.exists():
        return chosen.read_text().strip()
    use = version
    if _published(artifact, version) is False:
        use = _newest_published(artifact, version) or version
        if use != version:
            say(
                f"Spark's Kafka source {version} is not on Maven Central; using {use}, the newest release before it"
            )
    package = f"org.apache.spark:{artifact}:{use}"
    if _published(artifact, use):
        chosen.parent.mkdir(parents=True, exist_ok=True)
        chosen.write_text(package + "\n")
    return package


def kafka_settings(package: str) -> dict[str, str]:
    """Settings that make Spark fetch ``package`` (group:artifact:version) from Maven Central as
    it starts, into kafka_ivy_home()."""
    home = kafka_ivy_home()
    home.mkdir(parents=True, exist_ok=True)
    settings_file = home / "ivysettings.xml"
    text = _IVY_SETTINGS.format(cache=home / "cache", root=MAVEN_CENTRAL)
    if not settings_file.exists() or settings_file.read_text() != text:
        settings_file.write_text(text)
    return {
        "spark.jars.packages": package,
        "spark.jars.ivy": str(home),
        "spark.jars.ivySettings": str(settings_file),
        "spark.jars.excludes": ",".join(
            shipped.format(scala=scala_version()) for shipped in _SHIPPED
        ),
    }


def report_session(
    master: str | None, extra: dict[str, str] | None = None, kafka_source: str | None = None
) -> SparkSession:
    """``master`` None: the one spark-submit chose, else local[*]. ``kafka_source``: Spark's
    Kafka source to fetch as the JVM starts (spark-submit's JVM runs already: give it ``--packages``)."""
    builder = SparkSession.builder.appName("throttle-report")
    settings = dict(_ALWAYS)
    if kafka_source is not None and not launched_by_spark_submit():
        settings.update(kafka_settings(kafka_source))
    if master is not None or not launched_by_spark_submit():
        master = master or DEFAULT_MASTER
        builder = builder.master(master)
        if master.startswith("local"):
            settings = {**_local_settings(master), **settings}
            _use_this_python_in_workers()
    for key, value in {**settings, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - log4j's levels are set through PySpark's JVM gateway
    if jvm is None:
        raise RuntimeError("the Spark session has stopped")
    log4j = jvm.org.apache.logging.log4j
    for logger in _QUIET_LOGGERS:
        log4j.core.config.Configurator.setLevel(logger, log4j.Level.ERROR)
    return spark
