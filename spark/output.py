"""Writing the report: each table as Parquet and as one CSV file, and the HTML page.

Everything goes through Hadoop's FileSystem API, so ``--output`` may be a local folder or
shared storage (hdfs://, s3a://, ...) alike when the job runs on a cluster."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

# Decimal places of the numbers in the CSV files: seconds to the microsecond (the history's
# resolution), bytes per second and ratios to a millionth.
CSV_DECIMALS = 6


def plain_decimal(column: str) -> Column:
    """A double as the CSV shows it: rounded to CSV_DECIMALS places, without an exponent or
    trailing zeros (10485760, 2420.398 and 0.05, where Spark would write 1.048576E7,
    2420.3980000019073 and 0.05)."""
    fixed = F.col(column).try_cast(T.DecimalType(38, CSV_DECIMALS)).cast("string")
    return F.regexp_replace(fixed, r"\.?0+$", "").alias(column)


def for_csv(table: DataFrame) -> DataFrame:
    return table.select(
        *[
            plain_decimal(f.name)
            if isinstance(f.dataType, (T.DoubleType, T.FloatType))
            else F.col(f.name)
            for f in table.schema.fields
        ]
    )


class ReportOutput:
    def __init__(self, spark: SparkSession, directory: str) -> None:
        self._spark = spark
        self.directory = directory.rstrip("/") or "/"
        # Hadoop's FileSystem: the one Spark itself writes with, reached through PySpark's JVM gateway
        context = spark.sparkContext
        jvm, jsc = context._jvm, context._jsc  # noqa: SLF001
        if jvm is None or jsc is None:
            raise RuntimeError("the Spark session has stopped")
        self._Path = jvm.org.apache.hadoop.fs.Path
        self._fs = self._Path(self.directory).getFileSystem(jsc.hadoopConfiguration())

    def path(self, name: str) -> str:
        return f"{self.directory.rstrip('/')}/{name}"

    def write_table(self, name: str, table: DataFrame) -> None:
        """``<out>/parquet/<name>/`` and ``<out>/<name>.csv`` (one file, with a header)."""
        table.write.mode("overwrite").parquet(self.path(f"parquet/{name}"))
        staging = self.path(f"_csv_{name}")
        for_csv(table).coalesce(1).write.mode("overwrite").option("header", True).csv(staging)
        (part,) = [
            s.getPath()
            for s in self._fs.listStatus(self._Path(staging))
            if s.getPath().getName().endswith(".csv")
        ]
        target = self._Path(self.path(f"{name}.csv"))
        self._fs.delete(target, False)
        self._fs.rename(part, target)
        self._fs.delete(self._Path(staging), True)

    def remove_tables(self, names: list[str]) -> None:
        """Remove the tables ``names`` (a run before this one wrote them, this run does not)."""
        for name in names:
            self.delete(f"{name}.csv")
            self.delete(f"parquet/{name}")

    def delete(self, name: str) -> None:
        self._fs.delete(self._Path(self.path(name)), True)

    def write_text(self, name: str, text: str) -> None:
        stream = self._fs.create(self._Path(self.path(name)), True)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()
