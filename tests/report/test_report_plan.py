"""The shape of the report's plans where it decides the job's cost on a large history: every
row goes through the episodes' sort once, the episodes are not sorted by sampling, and the
forecast reads the rows once."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from spark.analysis.brokers import volume_summary
from spark.analysis.episodes import violation_episodes
from spark.analysis.forecast import fill_inputs
from spark.analysis.gaps import HistoryEnd
from spark.reading.history import read_history

from .synthetic import MiB, at, write_rounds

START = at(2026, 5, 1, 12, 0, 0)
END = HistoryEnd(*[(START + timedelta(minutes=29)).timestamp()] * 2)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("history")
    write_rounds(folder, START, 30, {(1, "/data/a"): lambda i: 5 * MiB if 10 <= i <= 20 else 50 * MiB}, outage=set())
    return read_history(spark, str(folder), str(tmp_path_factory.mktemp("parsed") / "copy"))


def physical_plan(table) -> str:
    """The plan that would run, without the plans of the cached tables it reads (Spark shows
    how each cached table was computed under its InMemoryRelation)."""
    kept, cached_at = [], None
    for line in table._jdf.queryExecution().executedPlan().toString().splitlines():
        depth = len(line) - len(line.lstrip(" :+-"))
        if cached_at is not None and depth > cached_at:
            continue
        cached_at = depth if "InMemoryRelation" in line else None
        kept.append(line)
    return "\n".join(kept)


def test_every_row_goes_through_the_episode_sort_once_and_the_episodes_are_not_range_sorted(history):
    """An orderBy on the episodes would sample its input, and with no shuffle between the
    episodes and the sort by volume and time, sampling would run that sort a second time. The
    lookup of the episodes' last log dir error shuffles only the rows with an error."""
    volumes = volume_summary(history.rows)
    episodes = violation_episodes(history.rows, volumes, END)
    plan = physical_plan(episodes)
    assert "rangepartitioning" not in plan
    assert len(re.findall(r"Exchange hashpartitioning\(volume_id#\d+, \d+\)", plan)) == 1
    lookup = plan[plan.index("Exchange hashpartitioning(volume_id#", plan.index("BroadcastExchange")) :]
    assert "isnotnull(log_dir_error" in lookup.split("FileScan")[0]
    assert episodes.count() == 2  # the hard and the soft episode: the plan is the one that runs


def test_the_forecast_reads_the_rows_once(history):
    volumes = volume_summary(history.rows).persist()
    volumes.count()
    plan = physical_plan(fill_inputs(history.rows, volumes, END, 3600.0))
    assert plan.count("FileScan parquet") == 1  # the windows' ends come from the cached volume summary
    volumes.unpersist()
