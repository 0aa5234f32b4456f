"""The report on a synthetic history whose answers are known by construction, row by row.

Rounds every 60 s from 2026-03-14 23:00:30 UTC to 2026-03-15 01:00:30 (i = 0..120), so the
gap limit is 180 s. Hard limit 10 MiB, soft 20 MiB, volumes of 100 MiB:
- rounds 5-7 observe nothing (cluster unreachable; the fallback 0.0 pauses);
- A (1, /data/a) breaches over midnight, rounds 50-70, and is back at round 71;
- B (1, /data/b) breaches 10-20, is not observed 21-29 (a gap), breaches again 30-35;
- C (2, /data/c): broker 2 disappears after round 40, in breach since round 30;
- D (3, /data/d) ramps (soft) 60-79, breaches (hard) 80-89, ramps 90-99, is fine from 100;
- E (3, /data/e) fills at 0.8 MiB per round: soft from round 98, hard from 110, still at the end;
- G (1, /data/g) is flat at 80 MiB for an hour, then fills at 0.5 MiB per round (forecast).
"""

from __future__ import annotations

import csv
import re
from datetime import timedelta
from pathlib import Path

import pytest

from spark.job import run_report

from .browser import Chromium
from .page_checks import check_layout, inline_svgs
from .synthetic import HARD, SOFT, MiB, append_raw, at, write_rounds

START = at(2026, 3, 14, 23, 0, 30)
ROUNDS = 121


def t(i: int) -> str:
    """The CSV text of round i's time."""
    return (START + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def volumes() -> dict:
    def a(i):
        return 5 * MiB if 50 <= i <= 70 else 50 * MiB

    def b(i):
        if 21 <= i <= 29:
            return None
        return 5 * MiB if 10 <= i <= 20 or 30 <= i <= 35 else 50 * MiB

    def c(i):
        return None if i > 40 else 5 * MiB if i >= 30 else 50 * MiB

    def d(i):
        return 5 * MiB if 80 <= i <= 89 else 15 * MiB if 60 <= i <= 99 else 50 * MiB

    def e(i):
        return 98 * MiB - (8 * MiB * i) // 10

    def g(i):
        return 80 * MiB - (MiB // 2) * max(0, i - 60)

    return {(1, "/data/a"): a, (1, "/data/b"): b, (2, "/data/c"): c, (3, "/data/d"): d, (3, "/data/e"): e, (1, "/data/g"): g}


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    write_rounds(history, START, ROUNDS, volumes(), outage={5, 6, 7})
    # A bad line in the middle of a file, a row with an unreadable time, a row without fields,
    # and the truncated last line a killed process leaves.
    append_raw(history, START + timedelta(minutes=1), "this is not json\n")
    append_raw(history, START + timedelta(minutes=2), '{"time": "yesterday", "broker_id": 1}\n{}\n')
    append_raw(history, START + timedelta(minutes=120), '{"time": "2026-03-15T01:00:30.000Z", "broker_id": 3, "log_d')
    # a line cut after its state (a kill, then a restart that ended the line): not half a row either
    cut = '{"time": "2026-03-15T00:30:30.000Z", "broker_id": 9, "log_dir": "/data/x", "total_bytes": 100, "usable_bytes": 1, '
    append_raw(history, START + timedelta(minutes=90), cut + '"volume_status": "breaching", "state": "PAUSE", "source": "obs\n')
    output = tmp_path_factory.mktemp("report")
    return run_report(spark, str(history), str(output)), output


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_corrupt_and_truncated_lines_are_skipped_and_counted(report):
    result, _ = report
    volume_rows = sum(1 for i in range(ROUNDS) if i not in {5, 6, 7} for f in volumes().values() if f(i) is not None)
    assert result.rows == volume_rows + 3  # and one row per outage round
    assert result.skipped_lines == 5
    assert result.volumes == 6  # nothing of broker 9's cut line


EPISODE_COLUMNS = ("broker_id", "log_dir", "limit", "start", "end", "duration_seconds", "ongoing", "end_reason", "worst_usable_bytes")


def episode(broker, log_dir, limit, first, end, duration, ongoing, reason, worst):
    return (str(broker), log_dir, limit, t(first), t(end), str(duration), str(ongoing).lower(), reason, str(worst))


def test_episodes_row_by_row(report):
    _, output = report
    rows = [tuple(row[c] for c in EPISODE_COLUMNS) for row in read_csv(output, "episodes")]
    assert rows == [
        # over midnight, one episode: ends at the first observation back within the limit
        episode(1, "/data/a", "hard", 50, 71, 1260, False, "recovered", 5 * MiB),
        episode(1, "/data/a", "soft", 50, 71, 1260, False, "recovered", 5 * MiB),
        # a gap of 10 rounds splits the breach in two; the first ends at its last observation
        episode(1, "/data/b", "hard", 10, 20, 600, False, "gap", 5 * MiB),
        episode(1, "/data/b", "hard", 30, 36, 360, False, "recovered", 5 * MiB),
        episode(1, "/data/b", "soft", 10, 20, 600, False, "gap", 5 * MiB),
        episode(1, "/data/b", "soft", 30, 36, 360, False, "recovered", 5 * MiB),
        # the broker disappeared: ended at its last observation, not ongoing
        episode(2, "/data/c", "hard", 30, 40, 600, False, "volume-gone", 5 * MiB),
        episode(2, "/data/c", "soft", 30, 40, 600, False, "volume-gone", 5 * MiB),
        # soft first, then hard inside it
        episode(3, "/data/d", "hard", 80, 90, 600, False, "recovered", 5 * MiB),
        episode(3, "/data/d", "soft", 60, 100, 2400, False, "recovered", 5 * MiB),
        # still in breach at the end of the history
        episode(3, "/data/e", "hard", 110, 120, 600, True, "ongoing", 2 * MiB),
        episode(3, "/data/e", "soft", 98, 120, 1320, True, "ongoing", 2 * MiB),
    ]
    levels = {(row["log_dir"], row["limit"]): float(row["level"]) for row in read_csv(output, "episodes")}
    assert levels[("/data/d", "hard")] == HARD and levels[("/data/d", "soft")] == SOFT


def test_time_in_states_per_day_splits_at_midnight(report):
    _, output = report
    days = {row["day"]: row for row in read_csv(output, "time_in_states")}
    assert list(days) == ["2026-03-14", "2026-03-15"]
    first, second = days["2026-03-14"], days["2026-03-15"]
    # Round 59 (23:59:30) holds until 00:00:30: 30 s on each day; the last round holds nothing.
    assert (first["rounds"], first["incomplete_rounds"], float(first["covered_seconds"])) == ("60", "3", 3570.0)
    assert (float(first["open_seconds"]), float(first["throttle_seconds"]), float(first["pause_seconds"])) == (1500.0, 0.0, 2070.0)
    assert (float(first["source_fallback_seconds"]), float(first["source_observed_seconds"])) == (180.0, 3390.0)
    assert (second["rounds"], float(second["covered_seconds"])) == ("61", 3630.0)
    assert (float(second["open_seconds"]), float(second["throttle_seconds"]), float(second["pause_seconds"])) == (0.0, 1740.0, 1890.0)
    assert float(second["source_fallback_seconds"]) == 0.0


def test_fill_rate_is_the_services_estimate_over_the_last_hour_and_projects_the_hard_limit(report):
    _, output = report
    forecast = {row["log_dir"]: row for row in read_csv(output, "forecast")}
    g = forecast["/data/g"]
    # Only the last hour counts: the flat first hour would halve the slope.
    assert (g["trend_start"], g["trend_observations"], float(g["trend_seconds"])) == (t(60), "61", 3600.0)
    assert float(g["fill_rate_bytes_per_second"]) == pytest.approx(MiB / 2 / 60, rel=1e-9)
    assert float(g["seconds_to_hard_limit"]) == pytest.approx(40 * MiB / (MiB / 2 / 60), rel=1e-9)  # 4800 s
    assert g["projected_at"] == "2026-03-15T02:20:30.000Z"
    e = forecast["/data/e"]
    assert float(e["fill_rate_bytes_per_second"]) == pytest.approx(0.8 * MiB / 60, rel=1e-4)
    assert float(e["seconds_to_hard_limit"]) == 0.0  # already below
    # A recovered at round 71 and D at round 100 (space gained): flat since, like B; no projection
    assert (forecast["/data/a"]["trend_start"], forecast["/data/a"]["trend_observations"]) == (t(71), "50")
    assert (forecast["/data/d"]["trend_start"], forecast["/data/d"]["trend_observations"]) == (t(100), "21")
    for flat in ("/data/a", "/data/b", "/data/d"):
        assert float(forecast[flat]["fill_rate_bytes_per_second"]) == 0.0 and forecast[flat]["seconds_to_hard_limit"] == ""
    # broker 2 left: no forecast for C
    assert "/data/c" not in forecast
    # the nearest limit first
    assert [row["log_dir"] for row in read_csv(output, "forecast")] == ["/data/e", "/data/g", "/data/a", "/data/b", "/data/d"]


def test_broker_summary_row_by_row(report):
    _, output = report
    columns = ("broker_id", "log_dirs", "last_seen", "present_at_end", "hard_episodes", "soft_episodes", "ongoing_episodes", "hard_breach_seconds", "min_usable_bytes")
    rows = [tuple(row[c] for c in columns) for row in read_csv(output, "brokers")]
    assert rows == [
        ("1", "3", t(120), "true", "3", "3", "0", "2220", str(5 * MiB)),
        ("2", "1", t(40), "false", "1", "1", "0", "600", str(5 * MiB)),
        ("3", "2", t(120), "true", "2", "2", "2", "1200", str(2 * MiB)),
    ]
    soonest = {row["broker_id"]: row["soonest_hard_limit_at"] for row in read_csv(output, "brokers")}
    assert soonest == {"1": "2026-03-15T02:20:30.000Z", "2": "", "3": t(120)}  # E is already there; broker 2 left


def test_the_tables_are_also_written_as_parquet(report, spark):
    _, output = report
    for name in ("episodes", "time_in_states", "brokers", "forecast"):
        assert spark.read.parquet(str(output / "parquet" / name)).count() == len(read_csv(output, name))
    # timestamps as microseconds since the epoch, not the legacy INT96
    jvm = spark.sparkContext._jvm
    (part,) = (output / "parquet" / "episodes").glob("part-*.parquet")
    footer = jvm.org.apache.parquet.hadoop.ParquetFileReader.readFooter(spark.sparkContext._jsc.hadoopConfiguration(), jvm.org.apache.hadoop.fs.Path(str(part)))
    schema = footer.getFileMetaData().getSchema().toString()
    assert "int64 start (TIMESTAMP(MICROS,true))" in schema and "int96" not in schema


def test_the_csv_files_hold_plain_decimals_and_the_output_no_checksum_files(report):
    _, output = report
    for name in ("episodes", "time_in_states", "brokers", "forecast"):
        text = (output / f"{name}.csv").read_text()
        assert re.findall(r"\d[eE][+-]?\d", text) == [], name  # 10485760, not 1.048576E7
        assert re.findall(r"\d\.\d{7,}", text) == [], name  # to the microsecond at most: no float noise
        assert re.findall(r"\d\.0*(?=[,\n])", text) == [], name  # 600, not 600.0
    levels = {(row["log_dir"], row["limit"]): row["level"] for row in read_csv(output, "episodes")}
    assert levels[("/data/d", "hard")] == str(HARD)
    assert sorted(path.name for path in output.rglob("*.crc")) == []


def test_the_html_page_charts_the_volumes_nearest_the_hard_limit_and_the_state_timeline(report):
    result, output = report
    page = (output / "report.html").read_text()
    # /data/e at the hard limit at the end (0 s to it), /data/g filling towards it, then the
    # least headroom (each of a, b, c, d dipped to 5 MiB; by broker and log dir).
    assert [s.log_dir for s in result.series] == ["/data/e", "/data/g", "/data/a", "/data/b"]
    assert page.count('data-chart="volume"') == 4 and page.count('data-chart="timeline"') == 1
    assert "broker 3 · /data/e" in page and 'class="state PAUSE"' in page and 'class="fallback"' in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page and "<script" not in page


def test_since_and_until_keep_only_that_period_and_max_gap_overrides_the_check_interval(spark, tmp_path):
    history = tmp_path / "history"
    write_rounds(history, START, ROUNDS, volumes(), outage=set())
    since, until = START + timedelta(minutes=9), START + timedelta(minutes=100)
    report = run_report(spark, str(history), str(tmp_path / "out"), since=since, until=until, max_gap_seconds=1200)
    assert (report.first, report.last) == (since.timestamp(), (until - timedelta(minutes=1)).timestamp())
    episodes = {(e["log_dir"], e["limit"]): e for e in read_csv(tmp_path / "out", "episodes")}
    # B's 10-round gap is shorter than 1200 s: one episode
    assert [(e["start"], e["end"], e["end_reason"]) for e in read_csv(tmp_path / "out", "episodes") if e["log_dir"] == "/data/b"] == [
        (t(10), t(36), "recovered"),
        (t(10), t(36), "recovered"),
    ]
    # D ramps from round 60 to 99, the last round inside the period: ongoing
    assert (episodes[("/data/d", "soft")]["end"], episodes[("/data/d", "soft")]["ongoing"]) == (t(99), "true")
    assert episodes[("/data/c", "hard")]["end_reason"] == "volume-gone"
    assert ("/data/e", "hard") not in episodes and episodes[("/data/e", "soft")]["start"] == t(98)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = Chromium(tmp_path_factory.mktemp("chromium") / "profile")
    yield chromium
    chromium.close()


def test_every_inline_svg_of_the_page_is_well_formed_xml(report):
    _, output = report
    svgs = inline_svgs((output / "report.html").read_text())
    assert [svg.get("data-chart") for svg in svgs] == ["volume"] * 4 + ["timeline", "days"]


def test_the_page_renders_at_1280_px_and_prints_with_no_text_overlapping_and_every_table_within_the_page(report, browser, tmp_path):
    _, output = report
    measured = check_layout(output / "report.html", browser, shots=tmp_path)
    screen = measured["screen"]
    assert [chart["kind"] for chart in screen["charts"]] == ["volume"] * 4 + ["timeline", "days"]
    assert sum(len(chart["lines"]) for chart in screen["charts"]) >= 4  # the data lines are drawn
    # every column of every table is on the page, the key ones included
    headers = {table["name"]: [h["text"] for h in table["headers"]] for table in measured["print"]["tables"]}
    assert {"fill rate", "fitted on", "time to the hard limit", "projected (UTC)"} <= set(headers["forecast"])
    assert {"duration", "end reason"} <= set(headers["episodes"]) and "time in hard breach" in headers["brokers"]
    png = (tmp_path / "screen.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 50_000  # charts and tables, not a blank page
    assert measured["print"]["pdf"].startswith(b"%PDF")


def test_the_page_shows_durations_in_human_units_with_the_exact_seconds_in_a_tooltip(report):
    _, output = report
    page = (output / "report.html").read_text()
    assert '<td class="num" title="1260 s">21 min</td>' in page  # A's episodes
    assert '<td class="num" title="4800 s">1 h 20 min</td>' in page  # G's time to the hard limit
    assert re.findall(r">\d+\.\d+<", page) == []  # no raw numbers of seconds (or any other) in a cell
