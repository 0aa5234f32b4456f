"""One SparkSession for every report test: local[2], few shuffle partitions, no UI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.session import report_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = report_session("local[2]", {"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "1g", "spark.default.parallelism": "2"})
    yield session
    session.stop()
