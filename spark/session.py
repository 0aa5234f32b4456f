"""The SparkSession of the report: local[*] by default, any master through --master or spark-submit."""

from __future__ import annotations

import os
import sys

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
}
# The report's windows over rounds and volumes (a few thousand rows) run in one partition on
# purpose; Spark would warn about each of them on the terminal.
_QUIET_LOGGERS = ("org.apache.spark.sql.execution.window.WindowExec",)
# For a local master started here (spark-submit brings its own settings): the JVM is
# started by this process, so its memory and collector can still be chosen (the throughput
# collector: about 10% less CPU than G1 for this batch job); few shuffle partitions suit
# one machine. The JIT compiles the strict reader's generated checks although their method
# is over HotSpot's 8,000-byte limit for compiling (DontCompileHugeMethods): left
# interpreted, they cost more CPU than parsing the JSON (BENCHMARKS.md, the cache section).
_LOCAL = {
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC -XX:-DontCompileHugeMethods",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # List the history's date folders in the driver: with one machine's cores, a Spark job
    # to list a few hundred folders in parallel costs more than it saves.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
}


def _use_this_python_in_workers() -> None:
    """A local master's Python workers (the forecast's fit runs in them) run this Python, which
    has the report's packages, unless PYSPARK_PYTHON names another. PySpark's default is the
    ``python3`` first on the PATH, which need not have them: the workers then imported the
    report's modules only when started from the project's folder. (PySpark reads the variable,
    not ``spark.pyspark.python``, when the driver is this process.)"""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def launched_by_spark_submit() -> bool:
    # spark-submit starts the Python driver with the gateway to its JVM already open.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def report_session(master: str | None, extra: dict[str, str] | None = None) -> SparkSession:
    """``master`` None: the one spark-submit chose, else local[*]."""
    builder = SparkSession.builder.appName("throttle-report")
    settings = dict(_ALWAYS)
    if master is not None or not launched_by_spark_submit():
        master = master or DEFAULT_MASTER
        builder = builder.master(master)
        if master.startswith("local"):
            settings = {**_LOCAL, **settings}
            _use_this_python_in_workers()
    for key, value in {**settings, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    for logger in _QUIET_LOGGERS:
        log4j.core.config.Configurator.setLevel(logger, log4j.Level.ERROR)
    return spark
