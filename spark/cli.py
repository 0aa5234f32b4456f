"""``throttle-report``: the history report from the command line, or as spark-submit's main file."""

from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from spark.analysis.backtest import LimitSet, LimitSetError, read_limit_sets
from spark.analysis.forecast import FORECAST_WINDOW_SECONDS
from spark.job import EmptyHistory, run_report
from spark.page.units import human_bytes, human_duration
from spark.reading.cache import UnusablePath
from spark.reading.topic import BadTopic, TopicInput, is_topic, parse_topic, read_client_config
from spark.report import Report
from spark.session import kafka_package, report_session


def _instant(text: str) -> datetime:
    """ISO-8601 date or date-time; without a zone it is UTC."""
    try:
        moment = datetime.fromisoformat(text)  # a trailing Z is UTC
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO-8601 date or date-time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# The masters Spark 4 accepts (SparkContext refuses any other, after starting its JVM).
_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?|local-cluster\[\d+,\d+,\d+\]|spark://\S+|yarn|k8s://\S+"
)


def _master(text: str) -> str:
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a Spark master: {text!r} (local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL)"
        )
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
    parser.add_argument(
        "--input",
        required=True,
        metavar="DIR|kafka://HOST:PORT/TOPIC",
        help="the history folder (date=YYYY-MM-DD/ partitions), or the history topic: kafka://HOST:PORT[,HOST:PORT...]/TOPIC "
        "(time-retained, not compacted; --since/--until pick its records by time)",
    )
    parser.add_argument(
        "--output", required=True, metavar="DIR", help="where the report goes (replaced)"
    )
    parser.add_argument(
        "--since",
        type=_instant,
        metavar="T",
        help="first instant to include (ISO-8601; UTC unless a zone is given)",
    )
    parser.add_argument("--until", type=_instant, metavar="T", help="first instant to leave out")
    parser.add_argument(
        "--master",
        type=_master,
        metavar="URL",
        help="Spark master (default: spark-submit's, else local[*])",
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        help="keep each file of the history parsed in DIR, with what the report derives from it, and parse a file again only when it changes; "
        "the last report is kept there too, and a run over the same files with the same options copies it (a local or HDFS path)",
    )
    parser.add_argument(
        "--max-gap",
        type=_seconds,
        metavar="SECONDS",
        help="observations further apart than this split episodes (default: 3 x the recorded check interval)",
    )
    parser.add_argument(
        "--forecast-window",
        type=_seconds,
        default=FORECAST_WINDOW_SECONDS,
        metavar="SECONDS",
        help="history each fill-rate fit uses (default: 3600)",
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
    parser.add_argument(
        "--kafka-config",
        type=Path,
        metavar="FILE",
        help="with a topic: the Kafka client's properties (security.protocol, sasl.*, ssl.*), as the Kafka tools' --command-config takes them",
    )
    parser.add_argument(
        "--kafka-package",
        metavar="GROUP:ARTIFACT:VERSION",
        help="with a topic: Spark's Kafka source to fetch from Maven Central (default: org.apache.spark:spark-sql-kafka-0-10_<scala>:<PySpark's version>)",
    )
    return parser


def _topic(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TopicInput | None:
    """The --input topic with its client properties; None for a folder (exit 2 on a bad one)."""
    if not is_topic(args.input):
        if args.kafka_config is not None or args.kafka_package is not None:
            parser.error(
                "--kafka-config and --kafka-package go with --input kafka://HOST:PORT/TOPIC"
            )
        return None
    if args.cache is not None:
        parser.error(
            "--cache keeps a folder's files parsed; a topic is read again on every run: leave --cache out"
        )
    try:
        return parse_topic(
            args.input,
            read_client_config(args.kafka_config) if args.kafka_config is not None else None,
        )
    except BadTopic as exc:
        parser.error(str(exc))


def _limit_sets(files: list[Path]) -> list[LimitSet]:
    """The sets of --limits, or exit 2 naming each problem (as the service does at start-up)."""
    try:
        sets = read_limit_sets(files)
    except LimitSetError as exc:
        for line in str(exc).splitlines():
            print(f"throttle-report: {line}", file=sys.stderr)
        raise SystemExit(2) from None
    return sets


def _progress(started: float):
    def say(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", flush=True)

    return say


_BROKER_HEADER = (
    "broker", "log dirs", "hard episodes", "soft episodes", "ongoing", "time in hard breach", "time fenced", "lowest available", "soonest hard limit",
)  # fmt: skip


def _duration(seconds: float | None) -> str:
    return human_duration(seconds) or "0 s"


def _broker_line(broker: dict) -> tuple[str, ...]:
    lowest = broker["min_usable_bytes"]
    return (
        f"{broker['broker_id']}" + ("" if broker["present_at_end"] else " (gone)"),
        str(broker["log_dirs"]),
        str(broker["hard_episodes"]),
        str(broker["soft_episodes"]),
        str(broker["ongoing_episodes"]),
        _duration(broker["hard_breach_seconds"]),
        _duration(broker.get("fenced_seconds")),
        human_bytes(lowest) if lowest is not None else "-",
        broker["soonest_hard_limit_at"] or "-",
    )


def _aligned(lines: list[tuple[str, ...]]) -> list[str]:
    """The lines in columns, a rule under the first (the header)."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    rendered = [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines
    ]
    rendered.insert(1, "  ".join("-" * width for width in widths))
    return rendered


def _totals_line(report: Report) -> str:
    days = report.tables["time_in_states"]
    throttle, pause, fallback = (
        sum(d[name] for d in days)
        for name in ("throttle_seconds", "pause_seconds", "source_fallback_seconds")
    )
    return (
        f"{report.rows:,} rows, {report.skipped_lines:,} lines skipped; time in THROTTLE {_duration(throttle)}, "
        f"PAUSE {_duration(pause)}, on the fallback {_duration(fallback)}"
    )


def _backtest_line(tried: dict) -> str:
    return (
        f"limits {tried['limit_set']}: {tried['hard_episodes']:,} hard / {tried['soft_episodes']:,} soft episodes, "
        f"THROTTLE {_duration(tried['throttle_seconds'])}, PAUSE {_duration(tried['pause_seconds'])}, "
        f"first fired {tried['first_fired_at'] or 'never'}"
    )


def summary_table(report: Report) -> str:
    """The terminal's closing table: one line per broker, then the totals."""
    rendered = _aligned(
        [_BROKER_HEADER, *(_broker_line(broker) for broker in report.tables["brokers"])]
    )
    rendered += [
        "",
        _totals_line(report),
        *(_backtest_line(tried) for tried in report.tables.get("backtest", [])),
    ]
    rendered.append(
        f"report: {report.output}/report.html  (tables: {report.output}/<name>.csv and {report.output}/parquet/)"
    )
    return "\n".join(rendered)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.since is not None and args.until is not None and args.since >= args.until:
        parser.error(
            f"--since {args.since.isoformat()} is not before --until {args.until.isoformat()}: no instant is in that range"
        )
    topic = _topic(parser, args)
    limit_sets = _limit_sets(args.limits)
    started = time.perf_counter()
    say = _progress(started)
    package = (args.kafka_package or kafka_package(say)) if topic is not None else None
    say("starting Spark" + (f" with {package}" if package else ""))
    try:
        spark = report_session(args.master, kafka_source=package)
    except Exception as exc:  # noqa: BLE001 - Spark has printed its log; one line says what failed
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(
            f"throttle-report: Spark did not start on {args.master or 'its default master'}: {cause}",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    say(f"Spark {spark.version} on {spark.sparkContext.master}")
    try:
        report = run_report(
            spark,
            topic or args.input,
            args.output,
            args.since,
            args.until,
            args.max_gap,
            args.forecast_window,
            progress=say,
            limit_sets=limit_sets,
            cache=args.cache,
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
