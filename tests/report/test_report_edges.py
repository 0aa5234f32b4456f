"""The report at the edges of a history: a fill and a free before the forecast, a history that
ends while the service sees no volume, limits changed by a restart, a volume that stopped
reporting its bytes, and lines whose values have the wrong type.

Rounds every 60 s from 2026-06-01 10:00:00 UTC (i = 0..69); rounds 65-69 observe nothing (the
cluster unreachable when the report is made). Until round 29 the limits are hard 10 MiB and
soft 20 MiB; from round 30 (the service restarted) hard 8 MiB and no soft limit. Volumes of
100 MiB:
- F (1, /data/f) idles at 64 MiB, fills 2 MiB per round from round 30 to 54, is freed back to
  64 MiB at round 55 and idles again;
- G (1, /data/g) fills 0.5 MiB per round, with a rise of 64 KiB (noise) every tenth round;
- U (2, /data/u) is in hard breach from round 50 to the last round that observed volumes (64);
- S (3, /data/s) sits at 15 MiB from round 20: under the soft limit until it is removed;
- H (3, /data/h) is at 5 MiB from round 25 to 39: in breach of both hard limits;
- X (4, /data/x): broker 4 leaves after round 20;
- J (5, /data/j) breaches at rounds 10-14, then reports no bytes (unjudged) at rounds 15-19.
"""

from __future__ import annotations

import csv
import json
from datetime import timedelta
from pathlib import Path

import pytest

from spark.cli import summary_table
from spark.job import run_report

from .synthetic import HARD, SOFT, MiB, append_raw, at, volume_row, write_rounds

START = at(2026, 6, 1, 10, 0, 0)
ROUNDS = 70
FAILED = set(range(65, 70))
LAST_OBSERVING = 64
RESTART = 30
KiB = 1024


def t(i: int) -> str:
    return (START + timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def limits(i: int) -> tuple[int, int | None]:
    return (HARD, SOFT) if i < RESTART else (8 * MiB, None)


def f(i):
    if 30 <= i <= 54:
        return 64 * MiB - 2 * MiB * (i - 29)
    return 64 * MiB


def g(i):
    return 90 * MiB - i * MiB // 2 + (MiB // 2 + 64 * KiB if i % 10 == 0 and i > 0 else 0)


def volumes() -> dict:
    return {
        (1, "/data/f"): f,
        (1, "/data/g"): g,
        (2, "/data/u"): lambda i: 5 * MiB if i >= 50 else 50 * MiB,
        (3, "/data/s"): lambda i: 15 * MiB if i >= 20 else 50 * MiB,
        (3, "/data/h"): lambda i: 5 * MiB if 25 <= i <= 39 else 50 * MiB,
        (4, "/data/x"): lambda i: 30 * MiB if i <= 20 else None,
        (5, "/data/j"): lambda i: 5 * MiB if 10 <= i <= 14 else -1 if 15 <= i <= 19 else 50 * MiB,
    }


def wrong_typed_lines() -> str:
    """Rows as the writer would write them but for one value of the wrong type each, at an
    instant no round has (were they kept, they would make a round of their own)."""
    moment = START + timedelta(minutes=12, seconds=30)
    lines = []
    for field, value in (("broker_id", "x"), ("round_complete", "yes"), ("soft_limit", "none"), ("usable_bytes", 1.5)):
        row = volume_row(moment, 1, "/data/f", 64 * MiB, "OPEN")
        row[field] = value
        lines.append(json.dumps(row) + "\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    write_rounds(history, START, ROUNDS, volumes(), outage=FAILED, outage_state="THROTTLE", limits=limits)
    append_raw(history, START + timedelta(minutes=12, seconds=30), wrong_typed_lines())
    output = tmp_path_factory.mktemp("report")
    return run_report(spark, str(history), f"{output}/"), output  # as a shell completes a folder


def read_csv(output: Path, name: str) -> list[dict]:
    with (output / f"{name}.csv").open() as handle:
        return list(csv.DictReader(handle))


def test_lines_with_a_value_of_the_wrong_type_are_skipped_and_counted(report):
    result, output = report
    assert result.skipped_lines == 4
    expected_rows = sum(1 for i in range(ROUNDS) if i not in FAILED for usable in volumes().values() if usable(i) is not None) + len(FAILED)
    assert result.rows == expected_rows
    assert sum(int(day["rounds"]) for day in read_csv(output, "time_in_states")) == ROUNDS  # no round of their own
    assert result.volumes == 7


def episodes_of(output: Path, log_dir: str) -> list[tuple]:
    return [
        (e["limit"], e["start"], e["end"], e["ongoing"], e["end_reason"], float(e["level"]))
        for e in read_csv(output, "episodes")
        if e["log_dir"] == log_dir
    ]


def test_a_history_that_ends_in_rounds_that_observed_nothing_keeps_its_breaches_ongoing(report):
    result, output = report
    # ended at the last round that observed volumes, ongoing: the service stopped seeing the cluster
    assert episodes_of(output, "/data/u") == [("hard", t(50), t(LAST_OBSERVING), "true", "unobserved", 8 * MiB)]
    assert result.episode_counts["ongoing"] == 1


def test_brokers_seen_by_the_last_round_that_observed_volumes_are_present_at_the_end(report):
    _, output = report
    present = {row["broker_id"]: row["present_at_end"] for row in read_csv(output, "brokers")}
    assert present == {"1": "true", "2": "true", "3": "true", "4": "false", "5": "true"}


def test_a_limit_removed_or_changed_ends_the_episode_as_limit_changed_not_recovered(report):
    _, output = report
    # the soft limit removed while the volume was still under it
    assert episodes_of(output, "/data/s") == [("soft", t(20), t(RESTART), "false", "limit-changed", SOFT)]
    # the hard limit lowered while in breach of both: one episode per level
    assert episodes_of(output, "/data/h") == [
        ("hard", t(25), t(RESTART), "false", "limit-changed", HARD),
        ("hard", t(RESTART), t(40), "false", "recovered", 8 * MiB),
        ("soft", t(25), t(RESTART), "false", "limit-changed", SOFT),
    ]


def test_an_episode_followed_by_rounds_without_the_volumes_bytes_does_not_end_recovered(report):
    _, output = report
    assert episodes_of(output, "/data/j") == [
        ("hard", t(10), t(14), "false", "unjudged", HARD),
        ("soft", t(10), t(14), "false", "unjudged", SOFT),
    ]


def forecast_of(output: Path) -> dict[str, dict]:
    return {row["log_dir"]: row for row in read_csv(output, "forecast")}


def test_the_forecast_rests_on_the_observations_since_the_volume_last_gained_space(report):
    _, output = report
    forecast = forecast_of(output)
    # freed at round 55 and idle since: no fill, no projection (the fill before the free is history)
    idle = forecast["/data/f"]
    assert (idle["trend_start"], idle["trend_observations"], float(idle["trend_seconds"])) == (t(55), "10", 540.0)
    assert float(idle["fill_rate_bytes_per_second"]) == 0.0
    assert idle["seconds_to_hard_limit"] == "" and idle["projected_at"] == ""


def test_rises_within_the_noise_do_not_restart_the_trend(report):
    _, output = report
    filling = forecast_of(output)["/data/g"]
    window = range(LAST_OBSERVING - 60, LAST_OBSERVING + 1)  # the last hour before the last observation
    assert (filling["trend_start"], filling["trend_observations"], float(filling["trend_seconds"])) == (t(window[0]), "61", 3600.0)
    # The rises every 10 rounds are noise: the median of the slopes across half the trend reads
    # the fill beneath them, 0.5 MiB a round.
    rate = MiB / 2 / 60
    assert float(filling["fill_rate_bytes_per_second"]) == pytest.approx(rate, rel=1e-6)
    headroom = g(LAST_OBSERVING) - 8 * MiB
    assert float(filling["seconds_to_hard_limit"]) == pytest.approx(headroom / rate, rel=1e-6)


def test_no_forecast_for_a_volume_no_longer_present(report):
    _, output = report
    forecast = forecast_of(output)
    assert "/data/x" not in forecast
    assert set(forecast) == {"/data/f", "/data/g", "/data/u", "/data/s", "/data/h", "/data/j"}
    # U is in breach at the last round that observed it: at its limit now
    assert (float(forecast["/data/u"]["seconds_to_hard_limit"]), forecast["/data/u"]["projected_at"]) == (0.0, t(LAST_OBSERVING))
    soonest = {row["broker_id"]: row["soonest_hard_limit_at"] for row in read_csv(output, "brokers")}
    assert soonest["2"] == t(LAST_OBSERVING) and soonest["4"] == ""


def test_the_paths_printed_have_no_double_slash(report):
    result, output = report
    assert result.output == str(output)
    printed = summary_table(result)
    assert f"{output}/report.html" in printed and "//" not in printed
