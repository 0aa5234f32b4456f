"""The report kept in the cache (``--cache DIR``): a run over the same history files as the last
report made from the cache, with the same options and the same code, hands back that report's
tables and page without computing them again, and so without a Spark job.

The files are known by the cache's keys (``cache.HistoryFile.key``: place, size and
modification time), so a history that is unchanged costs a listing of its folders; a file that
grew (the current hour), came or went, or an option that differs (``--since``, ``--until``,
``--max-gap``, ``--forecast-window``, ``--limits``), or another version of the report's code or
of Spark, makes the report again, from the cached files' shares as before.

Layout: ``DIR/reports/<key>/`` holds the tables as the report wrote them (``parquet/<name>/``
and ``<name>.csv``) and ``report.json`` (``report.report_json``: what the page and the terminal
show), staged first and moved into place whole; only the last report is kept."""

from __future__ import annotations

from collections.abc import Sequence

import pyspark
from pyspark.sql import SparkSession

from spark.reading.cache import CACHE_VERSION, REPORTS, FileSystem, HistoryFile, source_digest
from spark.reading.cache import staging_folder as new_staging_folder
from spark.report import Report, report_from_json, report_json

_JSON = "report.json"
# The code a report comes from: the report's own, the history format's and the decision's
# (the forecast's estimator, the limits' policy).
_CODE = ("spark", "app.history", "app.decision")


def report_key(files: Sequence[HistoryFile], options: Sequence[str]) -> str:
    """A key over the history's ``files`` (in order), the run's ``options`` (as text) and the code."""
    return "r" + source_digest(
        _CODE,
        CACHE_VERSION,
        pyspark.__version__,
        *[f.key for f in files],
        "options",
        *options,
    )


def _folder(cache: str, key: str) -> str:
    return f"{cache.rstrip('/')}/{REPORTS}/{key}"


def _copy_tables(fs: FileSystem, source: str, target: str, names: Sequence[str]) -> None:
    for name in names:
        fs.copy(f"{source}/parquet/{name}", f"{target}/parquet/{name}")
        fs.copy(f"{source}/{name}.csv", f"{target}/{name}.csv")


def kept_report(spark: SparkSession, cache: str, key: str) -> Report | None:
    """The report kept under ``key``; None when the cache holds none, or one it cannot read or
    whose tables are not all there (files removed by hand)."""
    fs = FileSystem(spark, cache)
    folder = _folder(cache, key)
    text = fs.read_bytes(f"{folder}/{_JSON}")
    if text is None:
        return None
    try:
        report = report_from_json(text.decode())
    except (ValueError, KeyError, TypeError):
        return None
    complete = all(
        fs.exists(f"{folder}/parquet/{name}") and fs.exists(f"{folder}/{name}.csv")
        for name in report.table_sizes
    )
    return report if complete else None


def copy_kept_tables(
    spark: SparkSession, cache: str, key: str, names: Sequence[str], output: str
) -> None:
    """The tables ``names`` of the report kept under ``key``, copied into ``output``."""
    _copy_tables(FileSystem(spark, cache), _folder(cache, key), output, names)


def keep_report(spark: SparkSession, cache: str, key: str, report: Report, output: str) -> None:
    """Keep ``report`` (its tables as written in ``output``) under ``key``, in place of the
    report kept before."""
    fs = FileSystem(spark, cache)
    staged = new_staging_folder(cache.rstrip("/"))
    _copy_tables(fs, output, staged, list(report.table_sizes))
    fs.write_bytes(f"{staged}/{_JSON}", report_json(report).encode())
    fs.move(staged, _folder(cache, key))
    for other in fs.names(f"{cache.rstrip('/')}/{REPORTS}"):
        if other != key:
            fs.delete(_folder(cache, other))
