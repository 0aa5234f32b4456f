"""One SparkSession for every report test: local[2], few shuffle partitions, no UI, and
expressions evaluated as they are, without generated code.

The tests' histories are a few hundred rows: generating, compiling and then JIT-compiling
code for every query costs far more than the rows (the JIT's compiler threads took half the
JVM's CPU; a report run took 0.7x the time and CPU without generated code, five runs of the
same history in a fresh JVM each way; the report tests 11:05 against 14:43). The plans and
their results are the same either way; the report run by operators keeps code generation,
which pays for itself on real histories, and test_report_command runs it so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.session import report_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = report_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "1g",
            "spark.default.parallelism": "2",
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        },
    )
    yield session
    session.stop()
