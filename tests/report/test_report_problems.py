"""The report on odd input, what its charts claim and what a reader sees first, on one
history written here: odd lines after good ones, a hard limit lowered and raised again, a soft
limit removed, a volume filling towards its hard limit with room to spare, volumes in steady
breach at the end, and more ended episodes than the page shows."""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest

from spark import job as report_job

from .synthetic import CHECK_INTERVAL, HARD, SOFT, MiB, append_raw, at, no_volume_row, volume_row, write_rounds

START = at(2026, 7, 1, 10, 0, 0)
ROUNDS = 120
OUTAGE = {70, 71, 72}
LOWERED = range(40, 60)  # the hard limit at 5 MiB, else 10 MiB
SOFT_REMOVED_FROM = 90
PAGE_ROWS = 3


def limits(i: int) -> tuple[int, int | None]:
    return (5 * MiB if i in LOWERED else HARD), (SOFT if i < SOFT_REMOVED_FROM else None)


def volumes() -> dict:
    return {
        (1, "/data/a"): lambda i: 8 * MiB,  # in breach but while the hard limit is lowered
        (2, "/data/b"): lambda i: 90 * MiB - i * MiB // 2,  # filling: the hard limit in about 40 min
        (3, "/data/c"): lambda i: 15 * MiB,  # little headroom, flat
        (4, "/data/d"): lambda i: 5 * MiB if i % 20 < 3 else 50 * MiB,  # many short episodes
        (9, "/data/z"): lambda i: 5 * MiB if i >= 100 else 50 * MiB,  # in steady breach at the end
    }


def moment(minutes: float):
    return START + timedelta(minutes=minutes)


def odd_lines() -> str:
    """Half a minute after the last round of the outage (PAUSE on the fallback): lines that,
    were they kept, would stretch the PAUSE and the fallback, add a log dir "5" to broker 1,
    count time on a source no column has, and move the history's end to a day later."""
    base = no_volume_row(moment(72.5), "PAUSE", "fallback")
    volume = volume_row(moment(72.5), 1, "/data/a", 8 * MiB, "PAUSE", source="fallback")
    odd = [
        {**volume, "log_dir": 5},
        {**base, "source": ["observed"]},
        {**volume, "volume_status": {"v": "ok"}},
        {**volume, "volume_factor": "x"},
        {**base, "cluster_factor": "zero"},
        {**base, "source": "manual"},
        {**base, "time": (START + timedelta(days=1)).date().isoformat()},
    ]
    return "".join(json.dumps(row) + "\n" for row in odd)


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    write_rounds(history, START, ROUNDS, volumes(), outage=OUTAGE, outage_state="PAUSE", limits=limits)
    append_raw(history, moment(72.5), odd_lines())
    # One line of a state no writer of this version writes, after the 120 good rounds.
    append_raw(history, moment(ROUNDS - 0.5), json.dumps({**no_volume_row(moment(ROUNDS - 0.5), "OPEN", "observed"), "state": "DRAINING"}) + "\n")
    output = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(report_job, "PAGE_ROWS", PAGE_ROWS)
        return report_job.run_report(spark, str(history), str(output)), output


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_a_line_of_an_unknown_state_is_skipped_and_the_page_is_written(report):
    result, output = report
    assert (output / "report.html").exists()
    assert result.skipped_by_reason["state: not allowed"] == 1


def test_values_of_the_wrong_type_are_skipped_not_kept_as_rounds(report):
    result, output = report
    assert result.skipped_lines == 8
    assert result.skipped_by_reason == {
        "source: not allowed": 2,
        "unreadable": 2,
        "log_dir: not text": 1,
        "volume_status: not allowed": 1,
        "time: not an instant": 1,
        "state: not allowed": 1,
    }
    assert result.volumes == 5  # no log dir "5"
    (day,) = read_csv(output, "time_in_states")
    assert float(day["source_fallback_seconds"]) == len(OUTAGE) * CHECK_INTERVAL  # not 30 s more
    assert float(day["covered_seconds"]) == (ROUNDS - 1) * CHECK_INTERVAL  # the history is not stretched to the next day
    sources = ("observed", "last_valid", "fallback", "initial")
    assert sum(float(day[f"source_{s}_seconds"]) for s in sources) == float(day["covered_seconds"])


def test_the_charts_draw_each_limit_as_it_was_in_force(report):
    result, _ = report
    (chart,) = [s for s in result.series if s.log_dir == "/data/a"]
    assert [level for _, level in chart.hard] == [HARD, 5 * MiB, HARD]
    assert [level for _, level in chart.soft] == [SOFT, None]


def test_the_charted_volumes_are_those_forecast_to_reach_the_hard_limit_soonest(report):
    result, _ = report
    charted = [s.log_dir for s in result.series]
    # At or below it already (0 s) first, the lower one first; then /data/b, filling towards it
    # with the most room of all; then by least headroom (/data/d dipped lowest; /data/c, flat,
    # is left out, though the least-headroom rule alone would have charted it and not /data/b).
    assert charted[:2] == ["/data/z", "/data/a"] and charted[2] == "/data/b" and "/data/c" not in charted
    (filling,) = [s for s in result.series if s.log_dir == "/data/b"]
    assert filling.projected is not None and filling.projected[1] == HARD
    assert all(s.projected is None for s in result.series if s.log_dir != "/data/b")


def test_every_ongoing_episode_is_on_the_page_before_the_ended_ones(report):
    result, output = report
    episodes = read_csv(output, "episodes")
    ongoing = [e for e in episodes if e["ongoing"] == "true"]
    assert {(e["log_dir"], e["limit"]) for e in ongoing} >= {("/data/a", "hard"), ("/data/z", "hard")}
    assert len(episodes) > PAGE_ROWS + len(ongoing)
    shown = result.tables["episodes"]
    assert [row["ongoing"] for row in shown] == [True] * len(ongoing) + [False] * PAGE_ROWS
    page = (output / "report.html").read_text()
    assert f"Still in breach at the end: {len(ongoing)}" in page
    assert f"Ended: {len(episodes) - len(ongoing)} episodes (the first {PAGE_ROWS} shown)" in page


DOCS = Path(__file__).resolve().parents[2] / "docs" / "history-and-report.md"
PUBLISHED = json.loads((Path(__file__).with_name("published_columns.json")).read_text())


def documented_columns() -> dict[str, tuple[list[str], str]]:
    """Per table of docs/history-and-report.md's "Output columns": its columns in order, and
    the text of its section (for the notes of renamed columns)."""
    section = DOCS.read_text().split("### Output columns", 1)[1].split("\n### ", 1)[0].split("\n**", 1)[0]
    tables = {}
    for part in section.split("#### `")[1:]:
        name, body = part.split("`", 1)
        tables[name] = ([line.split("`")[1] for line in body.splitlines() if line.startswith("| `")], body)
    return tables


def test_the_columns_of_every_table_are_the_documented_ones_and_a_changed_one_says_what_it_was(report):
    _, output = report
    documented = documented_columns()
    assert set(documented) == {"episodes", "time_in_states", "brokers", "forecast"}
    for name, (columns, section) in documented.items():
        with (output / f"{name}.csv").open() as handle:
            header = next(csv.reader(handle))
        assert header == columns, f"{name}: the columns differ from docs/history-and-report.md"
        assert set(header) <= set(PUBLISHED[name]), f"{name}: a new column, not in tests/report/published_columns.json"
        for gone in set(PUBLISHED[name]) - set(header):
            assert f"was `{gone}`" in section, f"{name}: `{gone}` is gone without a note of what it became"
