"""The Spark schema of the history, declared from the one field list the writer uses."""

from __future__ import annotations

from pyspark.sql import types as T

from app.history.schema import HISTORY_FIELDS

CORRUPT_RECORD = "_corrupt_record"

_SPARK_TYPES = {
    "timestamp": T.TimestampType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
}

HISTORY_SCHEMA = T.StructType([T.StructField(field.name, _SPARK_TYPES[field.kind], nullable=True) for field in HISTORY_FIELDS])

# What the reader asks for: the history fields, and the raw text of lines that do not parse.
READ_SCHEMA = T.StructType([*HISTORY_SCHEMA.fields, T.StructField(CORRUPT_RECORD, T.StringType(), nullable=True)])
