"""The Spark settings of the tests' own sessions, which read histories of a few hundred rows.

Expressions are evaluated as they are, without generated code: for so few rows, generating,
compiling and then JIT-compiling code for every query costs far more than the rows (the JIT's
compiler threads took half the JVM's CPU; a report run took 0.7x the time and CPU without it,
five runs of the same history in a fresh JVM each way). The plans and their results are the
same either way; the report run by operators keeps code generation, which pays for itself on
real histories, and the tests that run the installed ``throttle-report`` run it so."""

from __future__ import annotations

SMALL_HISTORY_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
