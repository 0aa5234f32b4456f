"""The report page as people see it, on reports made up to stress its layout: long log dir
names, limits a hair apart, a month of days, hundreds of rows; and a history of ten minutes.
Rendered in headless Chromium at 1280 px and printed to PDF (no Spark here: the page is
drawn from the collected tables)."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from itertools import pairwise

import pytest

from spark.page.html_report import render_page
from spark.page.ticks import byte_ticks, duration_ticks, time_ticks
from spark.page.units import human_duration
from spark.report import Report, StateBucket, VolumeSeries

from .browser import Chromium
from .page_checks import check_layout, inline_svgs

GiB = 1024**3
TiB = 1024**4
DAY = 86400
START = datetime(2026, 2, 20, 7, 13, 41, tzinfo=UTC).timestamp()


def stamp(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def long_log_dir(i: int) -> str:
    return f"/var/lib/kafka/data-volume-with-a-rather-long-mount-point-name-{i}"


def month_report() -> Report:
    first, last = START, START + 35 * DAY + 3 * 3600
    report = Report("/srv/history", "/srv/report", 10_000_000, 3, first, last, None, 3600.0, volumes=100)
    report.episode_counts = {"hard": 120, "soft": 80, "ongoing": 2}
    steps = 360
    for n in range(4):
        points = [(first + (last - first) * i / steps, int((0.052 + 0.004 * math.sin(i / 7 + n)) * TiB)) for i in range(steps)]
        middle = (first + last) / 2
        hard = [(first, 0.05 * TiB)] if n else [(first, 0.05 * TiB), (middle, 0.045 * TiB), (middle + 3 * DAY, 0.05 * TiB)]
        soft = [(first, 0.051 * TiB)] if n != 1 else [(first, 0.051 * TiB), (middle, None)]
        projected = (last + 4 * DAY, 0.05 * TiB) if n == 2 else None
        report.series.append(VolumeSeries(n + 1, long_log_dir(n), TiB, hard, soft, points, projected))
    width = (last - first) / steps
    states = ("OPEN", "THROTTLE", "PAUSE")
    report.timeline = [StateBucket(first + i * width, first + (i + 1) * width, states[i % 3], i % 11 == 0, 100) for i in range(steps)]
    days = []
    for d in range(36):
        covered = DAY if 0 < d < 35 else 3 * 3600.0
        days.append(
            {
                "day": datetime.fromtimestamp(first + d * DAY, tz=UTC).date(),
                "rounds": 2880,
                "incomplete_rounds": 12,
                "covered_seconds": covered,
                "open_seconds": covered / 2,
                "throttle_seconds": covered / 4,
                "pause_seconds": covered / 4,
                "source_observed_seconds": covered - 600.25,
                "source_last_valid_seconds": 300.125,
                "source_fallback_seconds": 300.125,
                "source_initial_seconds": 0.0,
            }
        )
    episodes = [
        {
            "broker_id": 1 + i % 25,
            "log_dir": long_log_dir(i % 4),
            "limit": "hard" if i % 2 else "soft",
            "limit_kind": "min-available-ratio",
            "level": 0.05,
            "start": stamp(first + i * 3000),
            "end": stamp(first + i * 3000 + 329216.9617),
            "duration_seconds": 329216.9617,
            "ongoing": i < 2,
            "end_reason": ("unobserved", "limit-changed", "volume-gone", "recovered")[i % 4],
            "worst_usable_bytes": 53 * GiB + i,
            "worst_available_ratio": 0.0517,
            "total_bytes": TiB,
            "observations": 10_000 + i,
            "log_dir_error": "KAFKA_STORAGE_ERROR" if i == 3 else None,
        }
        | ({"worst_usable_bytes": None, "worst_available_ratio": None} if i == 3 else {})
        for i in range(200)
    ]
    forecast = [
        {
            "broker_id": 1 + i % 25,
            "log_dir": long_log_dir(i % 4),
            "trend_start": stamp(last - 3600),
            "last_observed": stamp(last),
            "trend_observations": 121,
            "trend_seconds": 3600.0,
            "usable_bytes": 600 * GiB,
            "total_bytes": TiB,
            "hard_limit_bytes": 0.05 * TiB,
            "fill_rate_bytes_per_second": (-1) ** i * 123456.789,
            "seconds_to_hard_limit": 4_123_456.5 if i % 2 == 0 else None,
            "projected_at": stamp(last + 4_123_456.5) if i % 2 == 0 else None,
        }
        for i in range(100)
    ]
    brokers = [
        {
            "broker_id": b,
            "log_dirs": 4,
            "first_seen": stamp(first),
            "last_seen": stamp(last),
            "observations": 400_000,
            "min_usable_bytes": 51 * GiB,
            "min_available_ratio": 0.0498,
            "present_at_end": b != 7,
            "hard_episodes": 12,
            "soft_episodes": 8,
            "ongoing_episodes": 1,
            "hard_breach_seconds": 1_234_567.891,
            "soft_breach_seconds": 2_345_678.912,
            "soonest_hard_limit_at": stamp(last + 4_123_456.5),
            "fastest_fill_rate_bytes_per_second": 123456.789,
        }
        for b in range(1, 26)
    ]
    report.tables = {"time_in_states": days, "episodes": episodes, "forecast": forecast, "brokers": brokers}
    report.table_sizes = {"time_in_states": 36, "episodes": 1200, "forecast": 100, "brokers": 25}
    return report


def ten_minute_report() -> Report:
    first, last = START, START + 600
    report = Report("/srv/history", "/srv/report", 40, 0, first, last, 180.0, 3600.0, volumes=1)
    points = [(first + 15 * i, int(40 * GiB - i * 0.5 * GiB)) for i in range(41)]
    report.series = [VolumeSeries(1, "/data", 100 * GiB, [(first, 10 * GiB)], [(first, 20 * GiB)], points, (last + 300, 10 * GiB))]
    report.timeline = [StateBucket(first, last, "OPEN", False, 40)]
    day = {"day": datetime.fromtimestamp(first, tz=UTC).date(), "rounds": 40, "incomplete_rounds": 0, "covered_seconds": 600.0}
    day |= {"open_seconds": 600.0, "throttle_seconds": 0.0, "pause_seconds": 0.0, "source_observed_seconds": 600.0}
    day |= {"source_last_valid_seconds": 0.0, "source_fallback_seconds": 0.0, "source_initial_seconds": 0.0}
    report.tables = {"time_in_states": [day], "episodes": [], "forecast": [], "brokers": []}
    report.table_sizes = {"time_in_states": 1, "episodes": 0, "forecast": 0, "brokers": 0}
    return report


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = Chromium(tmp_path_factory.mktemp("chromium") / "profile")
    yield chromium
    chromium.close()


@pytest.mark.parametrize("made_up", [month_report, ten_minute_report])
def test_the_page_prints_without_overlapping_text_or_tables_wider_than_the_page(made_up, browser, tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render_page(made_up()))
    measured = check_layout(page, browser, shots=tmp_path)
    assert measured["print"]["pdf"].startswith(b"%PDF")


def test_every_inline_svg_is_well_formed_xml():
    for made_up in (month_report, ten_minute_report):
        svgs = inline_svgs(render_page(made_up()))
        assert len(svgs) == len(made_up().series) + 2


def texts(svg, css: str) -> list[str]:
    return [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if t.get("class") == css]


def test_time_axes_tick_on_round_times_and_write_each_date_once():
    volume, *_, timeline, days = inline_svgs(render_page(month_report()))
    for svg in (volume, timeline):
        assert texts(svg, "date") == ["2026"]  # a month: ticks on days, the year once
        assert all(re.fullmatch(r"\d\d-\d\d", label) for label in texts(svg, "tick"))
    assert texts(days, "date") == ["2026"]
    short = inline_svgs(render_page(ten_minute_report()))  # 07:13:41 to 07:23:41
    for svg in short[0], short[1]:
        minutes = [int(label[:2]) * 60 + int(label[3:]) for label in texts(svg, "tick")]
        (step,) = {b - a for a, b in pairwise(minutes)}
        assert step in (1, 2, 5) and all(minute % step == 0 for minute in minutes) and len(minutes) >= 2
        assert texts(svg, "date") == ["2026-02-20"]


def test_ticks_fall_on_round_values():
    first = datetime(2026, 3, 14, 23, 0, 30, tzinfo=UTC).timestamp()
    ticks = time_ticks(first, first + 7200, 7)
    assert [(tick.label, tick.date) for tick in ticks] == [("23:30", "2026-03-14"), ("00:00", "2026-03-15"), ("00:30", None), ("01:00", None)]
    assert [label for _, label in byte_ticks(100 * 1024**2)] == ["0", "20 MiB", "40 MiB", "60 MiB", "80 MiB", "100 MiB"]
    assert [label for _, label in byte_ticks(TiB)] == ["0", "250 GiB", "500 GiB", "750 GiB", "1000 GiB"]
    assert [label for _, label in duration_ticks(3630)] == ["0", "30 min", "60 min", "90 min"]
    assert [label for _, label in duration_ticks(DAY)] == ["0", "6 h", "12 h", "18 h", "24 h"]
    assert [label for _, label in duration_ticks(15 * 60)] == ["0", "5 min", "10 min", "15 min"]


def test_durations_read_in_human_units_with_the_exact_seconds_in_a_tooltip():
    assert [human_duration(s) for s in (0.4, 42, 259.6, 1260, 5100, 329216.9617)] == ["0.4 s", "42 s", "4 min 20 s", "21 min", "1 h 25 min", "3 d 19 h"]
    page = render_page(month_report())
    assert '<td class="num" title="329216.9617 s">3 d 19 h</td>' in page
    assert "329216.9617<" not in page and "329216.96<" not in page


# The smallest text of every chart as drawn: its font size times the chart's scale on screen.
SMALLEST_CHART_TEXT = """
Math.min(...[...document.querySelectorAll('svg.chart')].flatMap((svg) => {
  const scale = svg.getScreenCTM().a;
  return [...svg.querySelectorAll('text')].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale);
}))
"""


def test_chart_text_is_at_least_11_px_at_every_window_width_from_1024_to_1920(browser, tmp_path):
    # Three 600-unit charts to a row at 1400 px drew their text at 8 px, smaller than at 1280.
    page = tmp_path / "report.html"
    page.write_text(render_page(month_report()))
    sizes = {}
    for width in (1024, 1152, 1280, 1366, 1400, 1536, 1600, 1680, 1920):
        browser.load(page.as_uri(), width)
        sizes[width] = browser.evaluate(SMALLEST_CHART_TEXT)
    assert min(sizes.values()) >= 11 - 1e-6, sizes


def test_limits_are_drawn_as_the_steps_of_the_values_in_force():
    # The first volume's hard limit went from 5% to 4.5% and back; the second's soft limit was
    # removed half-way: each line follows its values, and a removed limit stops where it went.
    first_volume, second_volume = inline_svgs(render_page(month_report()))[:2]
    hard = [line.get("points") for line in first_volume.iter("{http://www.w3.org/2000/svg}polyline") if line.get("class") == "limit hard"]
    (steps,) = hard
    heights = [float(point.split(",")[1]) for point in steps.split()]
    assert len(set(heights)) == 2 and len(heights) == 6  # down, then back up: three levels, two values
    soft = [line.get("points") for line in second_volume.iter("{http://www.w3.org/2000/svg}polyline") if line.get("class") == "limit soft"]
    (until_removed,) = soft
    xs = [float(point.split(",")[0]) for point in until_removed.split()]
    assert max(xs) < 600 - 20 - 100  # ends half-way, well before the plot's right edge


def test_the_forecast_line_reaches_the_hard_limit_on_the_chart_of_a_volume_filling_towards_it():
    svgs = inline_svgs(render_page(month_report()))
    drawn = [sum(1 for line in svg.iter("{http://www.w3.org/2000/svg}line") if line.get("class") == "projection") for svg in svgs[:4]]
    assert drawn == [0, 0, 1, 0]


def test_ongoing_episodes_come_first_and_the_ended_ones_are_collapsed_with_their_count():
    page = render_page(month_report())
    ongoing_header = page.index("Still in breach at the end: 2")
    ended = page.index("<details><summary>Ended: 1,198 episodes (the first 198 shown)</summary>")
    assert ongoing_header < ended
    assert page.count('<tr class="ongoing">') == 2 and page.index('<tr class="ongoing">') < ended


def test_end_reasons_and_an_offline_log_dir_are_explained_in_words():
    page = render_page(month_report())
    for reason in ("ongoing", "unobserved", "recovered", "limit-changed", "unjudged", "gap", "volume-gone"):
        assert f"<dt>{reason}</dt><dd>" in page
    assert "log dir error: KAFKA_STORAGE_ERROR" in page
    assert 'title="the volume was never observed again while other volumes were (its broker or log dir left)">volume-gone</td>' in page


def test_the_forecast_note_names_the_estimator_the_forecast_uses():
    """The fill rate is the median of half-trend slopes (spark.analysis.forecast), not a least-squares fit."""
    page = render_page(month_report())
    assert "the median of the slopes across half of each volume's trend" in page.replace("&#x27;", "'").replace("&#39;", "'")
    assert "least squares" not in page.lower()
