"""Frames the report computes once and reads more than once: persisted, and listed so that the
run unpersists them at its end (a long-lived session, a notebook or the tests, keeps nothing
of a report)."""

from __future__ import annotations

from pyspark.sql import DataFrame


def kept(frame: DataFrame, persisted: list[DataFrame] | None) -> DataFrame:
    """``frame`` persisted and added to ``persisted``; without a list, ``frame`` as it is."""
    if persisted is None:
        return frame
    persisted.append(frame.persist())
    return persisted[-1]


def release(persisted: list[DataFrame]) -> None:
    """Unpersist every frame ``kept`` added to ``persisted``."""
    for frame in persisted:
        frame.unpersist()
    persisted.clear()


def in_order(frame: DataFrame, *by) -> DataFrame:
    """A small table (rounds, days, brokers, volumes: a few thousand rows) sorted by ``by`` in
    one partition. ``orderBy`` would range-partition it, which samples its input in a Spark job
    of its own first, computing all that comes before the sort once more (the forecast's fit
    included); a shuffle into one partition would be a stage (and a job) of its own too: the
    last step before the sort runs in one task instead (its input is the small table's)."""
    return frame.coalesce(1).sortWithinPartitions(*by)
