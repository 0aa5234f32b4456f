"""``throttle-report``: the history report from the command line, or as spark-submit's main file."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from spark.analysis.backtest import LimitSet, LimitSetError, check_names, read_limit_set
from spark.analysis.forecast import FORECAST_WINDOW_SECONDS
from spark.job import EmptyHistory, run_report
from spark.page.units import human_bytes, human_duration
from spark.reading.cache import UnusablePath
from spark.report import Report
from spark.session import report_session


def _instant(text: str) -> datetime:
    """ISO-8601 date or date-time; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date or date-time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# The masters Spark 4 accepts (SparkContext refuses any other, after starting its JVM).
_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+")


def _master(text: str) -> str:
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a Spark master: {text!r} (local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL)")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="throttle-report",
        description="Violation episodes, time throttled or paused, per-broker summaries and fill forecasts "
        "from the throttle service's history, as Parquet, CSV and one HTML page.",
    )
    parser.add_argument("--input", required=True, metavar="DIR", help="the history folder (date=YYYY-MM-DD/ partitions)")
    parser.add_argument("--output", required=True, metavar="DIR", help="where the report goes (replaced)")
    parser.add_argument("--since", type=_instant, metavar="T", help="first instant to include (ISO-8601; UTC unless a zone is given)")
    parser.add_argument("--until", type=_instant, metavar="T", help="first instant to leave out")
    parser.add_argument("--master", type=_master, metavar="URL", help="Spark master (default: spark-submit's, else local[*])")
    parser.add_argument(
        "--cache", metavar="DIR", help="keep each file of the history parsed in DIR, with what the report derives from it, and parse a file again only when it changes (a local or HDFS path)"
    )
    parser.add_argument(
        "--max-gap", type=_seconds, metavar="SECONDS", help="observations further apart than this split episodes (default: 3 x the recorded check interval)"
    )
    parser.add_argument(
        "--forecast-window", type=_seconds, default=FORECAST_WINDOW_SECONDS, metavar="SECONDS", help="history each fill-rate fit uses (default: 3600)"
    )
    parser.add_argument(
        "--limits",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a candidate set of limits to try on the history (a properties file with the service's limit settings; "
        "the set is named after the file); repeat for more sets",
    )
    return parser


def _limit_sets(files: list[Path]) -> list[LimitSet]:
    """The sets of --limits, or exit 2 naming each problem (as the service does at start-up)."""
    try:
        sets = [read_limit_set(path) for path in files]
        check_names(sets)
    except LimitSetError as exc:
        for line in str(exc).splitlines():
            print(f"throttle-report: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    return sets


def _progress(started: float):
    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", flush=True)

    return say


def summary_table(report: Report) -> str:
    """The terminal's closing table: one line per broker, then the totals."""
    header = (
        "broker", "log dirs", "hard episodes", "soft episodes", "ongoing", "time in hard breach", "time fenced", "lowest available", "soonest hard limit",
    )  # fmt: skip
    lines = [header]
    for broker in report.tables["brokers"]:
        lowest = broker["min_usable_bytes"]
        lines.append(
            (
                f"{broker['broker_id']}" + ("" if broker["present_at_end"] else " (gone)"),
                str(broker["log_dirs"]),
                str(broker["hard_episodes"]),
                str(broker["soft_episodes"]),
                str(broker["ongoing_episodes"]),
                human_duration(broker["hard_breach_seconds"]) or "0 s",
                human_duration(broker.get("fenced_seconds")) or "0 s",
                human_bytes(lowest) if lowest is not None else "-",
                broker["soonest_hard_limit_at"] or "-",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    rendered = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]
    rendered.insert(1, "  ".join("-" * width for width in widths))
    days = report.tables["time_in_states"]
    throttle = sum(d["throttle_seconds"] for d in days)
    pause = sum(d["pause_seconds"] for d in days)
    fallback = sum(d["source_fallback_seconds"] for d in days)
    rendered.append("")
    rendered.append(
        f"{report.rows:,} rows, {report.skipped_lines:,} lines skipped; time in THROTTLE {human_duration(throttle) or '0 s'}, "
        f"PAUSE {human_duration(pause) or '0 s'}, on the fallback {human_duration(fallback) or '0 s'}"
    )
    for tried in report.tables.get("backtest", []):
        rendered.append(
            f"limits {tried['limit_set']}: {tried['hard_episodes']:,} hard / {tried['soft_episodes']:,} soft episodes, "
            f"THROTTLE {human_duration(tried['throttle_seconds']) or '0 s'}, PAUSE {human_duration(tried['pause_seconds']) or '0 s'}, "
            f"first fired {tried['first_fired_at'] or 'never'}"
        )
    rendered.append(f"report: {report.output}/report.html  (tables: {report.output}/<name>.csv and {report.output}/parquet/)")
    return "\n".join(rendered)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.since is not None and args.until is not None and args.since >= args.until:
        parser.error(f"--since {args.since.isoformat()} is not before --until {args.until.isoformat()}: no instant is in that range")
    limit_sets = _limit_sets(args.limits)
    started = time.perf_counter()
    say = _progress(started)
    say("starting Spark")
    try:
        spark = report_session(args.master)
    except Exception as exc:  # Spark has printed its log; one line says what failed
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"throttle-report: Spark did not start on {args.master or 'its default master'}: {cause}", file=sys.stderr)
        raise SystemExit(1) from None
    say(f"Spark {spark.version} on {spark.sparkContext.master}")
    try:
        report = run_report(
            spark, args.input, args.output, args.since, args.until, args.max_gap, args.forecast_window, progress=say, limit_sets=limit_sets, cache=args.cache
        )
    except (EmptyHistory, UnusablePath) as exc:
        print(f"throttle-report: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    finally:
        spark.stop()
    say(f"done in {report.seconds['total']:.1f} s")
    print()
    print(summary_table(report))


if __name__ == "__main__":
    main()
