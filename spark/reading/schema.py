"""The Spark schema of the history, declared from the one field list the writer uses."""

from __future__ import annotations

from pyspark.sql import types as T

from app.history.schema import HISTORY_FIELDS

_SPARK_TYPES = {
    "timestamp": T.TimestampType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "double": T.DoubleType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
}

HISTORY_SCHEMA = T.StructType([T.StructField(field.name, _SPARK_TYPES[field.kind], nullable=True) for field in HISTORY_FIELDS])

# The fields the report uses; the JSON reader converts only these (the others in a line are
# stepped over, not converted, and a bad value there does not cost the row).
UNUSED_FIELDS = frozenset({"volume_factor", "cluster_factor"})
REPORT_SCHEMA = T.StructType([f for f in HISTORY_SCHEMA.fields if f.name not in UNUSED_FIELDS])

# Where the JSON reader puts a line it could not convert whole: one that does not parse, or
# whose values do not fit the declared types ("broker_id":"x"). Spark fills the other fields
# of such a line as best it can; the report keeps none of it.
UNPARSED_LINE = "unparsed_line"
# What the JSON reader asks for: the report's fields, timestamps as text (a cast to timestamp
# parses ISO-8601 several times faster than the reader's timestamp pattern), and the line
# when it did not convert.
READ_SCHEMA = T.StructType(
    [
        *[
            T.StructField(f.name, T.StringType() if isinstance(f.dataType, T.TimestampType) else f.dataType, nullable=True)
            for f in REPORT_SCHEMA.fields
        ],
        T.StructField(UNPARSED_LINE, T.StringType(), nullable=True),
    ]
)
TIMESTAMP_FIELDS = tuple(f.name for f in REPORT_SCHEMA.fields if isinstance(f.dataType, T.TimestampType))
