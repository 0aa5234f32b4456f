"""One SparkSession for every report test (in each test process): local[2], few shuffle
partitions, no UI, no generated code (tests/small_spark.py says why)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from spark.session import report_session
from tests.small_spark import SMALL_HISTORY_CONF


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = report_session("local[2]", SMALL_HISTORY_CONF)
    yield session
    session.stop()
