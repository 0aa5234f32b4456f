"""The report's forecast and the live decision agree on the same observations: the service, with a
horizon, observes volumes round by round and writes its history as it does in production
(``round_lines``, one file per hour); the report, asked for the window the service fits on,
gives every volume the fill rate and time to the hard limit the service wrote in its last round
(the one estimator, app/decision/fill_rate.py, run live and replayed offline).

The volumes: a linear fill; a saw-tooth (retention frees 200 MiB every 8 rounds); a fill with
one wild reading; a fill that stopped (30 s before the end: most of the window); a flat volume; and one whose broker misses rounds (its
observation is kept and repeats in the history, once made)."""

from __future__ import annotations

import csv
from datetime import UTC, datetime

import pytest

from app.decision.decider import ThrottleDecider
from app.decision.policy import LimitKind, StoragePolicy
from app.history.files import file_for
from app.history.rows import round_lines
from app.observation.model import ObservationRound, VolumeObservation
from spark.job import run_report

MiB = 1024**2
GiB = 1024**3
TOTAL = 100 * GiB
POLICY = StoragePolicy(LimitKind.MIN_AVAILABLE_BYTES, 1 * GiB)
HORIZON = 120.0
WINDOW = HORIZON / 4  # what the service fits on; 13 rounds at 2.5 s, fewer than its 16 at most
CHECK = 2.5
ROUNDS = 60
START = datetime(2026, 11, 26, 9, 0, tzinfo=UTC).timestamp()


def usable(volume: str, i: int) -> int:
    t = i * CHECK
    if volume == "linear":
        return int(40 * GiB - 3 * MiB * t)
    if volume == "saw-tooth":
        return int(40 * GiB - 2 * MiB * t + 200 * MiB * (i // 8))
    if volume == "outlier":
        return int(40 * GiB - MiB * t - (5 * GiB if i == ROUNDS - 4 else 0))
    if volume == "stop":
        return int(40 * GiB - 4 * MiB * min(t, (ROUNDS - 12) * CHECK))
    if volume == "flat":
        return 40 * GiB
    return int(2 * GiB - 5 * MiB * t // 7)  # "missing": its broker misses every third round


VOLUMES = ("linear", "saw-tooth", "outlier", "stop", "flat", "missing")


@pytest.fixture(scope="module")
def live_and_report(spark, tmp_path_factory):
    history = tmp_path_factory.mktemp("history")
    decider = ThrottleDecider(POLICY, 300.0, 1.0, started_at=START - 1, horizon_seconds=HORIZON)
    broker = {volume: index + 1 for index, volume in enumerate(VOLUMES)}
    last_seen: dict[str, VolumeObservation] = {}
    for i in range(ROUNDS):
        at = START + i * CHECK
        answered = [v for v in VOLUMES if not (v == "missing" and i % 3 == 2)]
        for volume in answered:
            last_seen[volume] = VolumeObservation(broker[volume], f"/data/{volume}", TOTAL, usable(volume, i), at)
        missing = {} if len(answered) == len(VOLUMES) else {broker["missing"]: "timed out"}
        round_ = ObservationRound(at - 0.5, at, tuple(broker.values()), tuple(last_seen[v] for v in answered), missing)
        decider.apply_round(round_)
        decision = decider.decision(at)
        path = file_for(history, at)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as handle:
            handle.write(round_lines(round_, decision, CHECK))
    output = tmp_path_factory.mktemp("report")
    run_report(spark, str(history), str(output), forecast_window_seconds=WINDOW)
    with (output / "forecast.csv").open() as handle:
        forecast = {row["log_dir"].removeprefix("/data/"): row for row in csv.DictReader(handle)}
    live = {volume.log_dir.removeprefix("/data/"): state.time_to_full for volume, state in ((s.observation, s) for s in decider.volumes(at))}
    return live, forecast


def number(text: str) -> float | None:
    return float(text) if text else None


@pytest.mark.parametrize("volume", VOLUMES)
def test_the_report_gives_the_fill_rate_and_time_to_the_hard_limit_the_service_computed(live_and_report, volume):
    live, forecast = live_and_report
    estimate, row = live[volume], forecast[volume]
    assert estimate is not None and estimate.fill_rate is not None
    # The CSV holds six decimals: equal to that precision (the Parquet table holds the doubles).
    assert number(row["fill_rate_bytes_per_second"]) == pytest.approx(estimate.fill_rate, abs=1e-6)
    if estimate.seconds_to_hard_limit is None:
        assert row["seconds_to_hard_limit"] == ""
    else:
        assert number(row["seconds_to_hard_limit"]) == pytest.approx(estimate.seconds_to_hard_limit, abs=1e-6)


def test_the_figures_are_what_the_series_say(live_and_report):
    live, _ = live_and_report
    assert live["linear"].fill_rate == pytest.approx(3 * MiB, rel=1e-6)
    assert live["saw-tooth"].fill_rate == pytest.approx(2 * MiB, rel=1e-6)  # the trend since the last free
    assert live["outlier"].fill_rate == pytest.approx(MiB, rel=1e-6)  # the wild reading ignored
    assert live["stop"].fill_rate == 0.0 and live["flat"].fill_rate == 0.0
    assert live["missing"].fill_rate == pytest.approx(5 * MiB / 7, rel=1e-3)  # its repeated (kept) observations left out
