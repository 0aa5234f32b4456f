"""The fill-rate estimator on synthetic series: Theil-Sen over the trend since the last gain."""

import pytest

from app.decision.fill_rate import GAIN_NOISE_MAX_BYTES, fill_rate, seconds_to_limit, theil_sen_slope, trend_start

GiB = 1024**3
MiB = 1024**2
TOTAL = 100 * GiB  # noise: min(0.1% = 102 MiB, 64 MiB) = 64 MiB


def series(rate: float, count: int, interval: float = 5.0, start: float = 50 * GiB):
    times = [i * interval for i in range(count)]
    return times, [start - rate * t for t in times]


def test_a_linear_fill_is_read_exactly():
    times, usable = series(2 * MiB, 8)
    assert fill_rate(times, usable, TOTAL, 3600) == pytest.approx(2 * MiB, rel=1e-9)


def test_a_retention_drop_restarts_the_trend_so_the_saw_tooth_reads_as_its_fill_rate():
    # 1 MiB/s of fill; every 30 s retention frees 200 MiB (a net loss over the period).
    times = [i * 5.0 for i in range(20)]
    usable = [50 * GiB - MiB * t + 200 * MiB * (t // 30) for t in times]
    assert trend_start(usable, TOTAL) == 18  # the drop at t = 90 s
    # Without the restart a fit across the teeth would read the net -5.7 MiB/s of freeing.
    assert fill_rate(times, usable, TOTAL, 3600) is None  # 2 observations since the last drop
    assert fill_rate(times[:18], usable[:18], TOTAL, 3600) == pytest.approx(MiB, rel=1e-9)


def test_a_rise_within_the_noise_does_not_restart_the_trend():
    times, usable = series(MiB, 8)
    usable[4] += GAIN_NOISE_MAX_BYTES // 2
    assert trend_start(usable, TOTAL) == 0
    assert fill_rate(times, usable, TOTAL, 3600) == pytest.approx(MiB, rel=0.02)


@pytest.mark.parametrize("position", [1, 3, 6])
def test_a_single_outlier_moves_the_rate_by_at_most_five_percent(position):
    times, usable = series(MiB, 8)
    usable[position] -= 5 * GiB  # a wild reading: 5 GiB less than the trend
    assert fill_rate(times, usable, TOTAL, 3600) == pytest.approx(MiB, rel=0.05)


def test_least_squares_would_be_thrown_by_the_same_outlier():
    times, usable = series(MiB, 8)
    usable[6] -= 5 * GiB
    n = len(times)
    mean_t, mean_u = sum(times) / n, sum(usable) / n
    slope = sum((t - mean_t) * (u - mean_u) for t, u in zip(times, usable)) / sum((t - mean_t) ** 2 for t in times)
    assert -slope > 20 * MiB  # what the estimator avoids


def test_a_stop_reads_as_zero_once_half_the_observations_are_flat():
    times, usable = series(MiB, 8)
    stopped = usable[:3] + [usable[2]] * 5  # filled for 10 s, then stopped for 25 s
    assert fill_rate(times, stopped, TOTAL, 3600) == 0.0


def test_observations_older_than_the_window_are_left_out():
    times = [i * 5.0 for i in range(8)]
    usable = [50 * GiB - 10 * MiB * min(t, 15) - MiB * max(t - 15, 0) for t in times]  # 10 MiB/s, then 1 MiB/s
    assert fill_rate(times, usable, TOTAL, window_seconds=20) == pytest.approx(MiB, rel=1e-9)


def test_too_few_observations_give_no_rate():
    assert fill_rate([0.0, 5.0], [10 * GiB, 9 * GiB], TOTAL, 3600) is None
    assert theil_sen_slope([1.0, 1.0], [0.0, 1.0]) is None


def test_seconds_to_the_limit():
    assert seconds_to_limit(110 * MiB, 100 * MiB, MiB) == pytest.approx(10)
    assert seconds_to_limit(100 * MiB, 100 * MiB, MiB) == 0.0
    assert seconds_to_limit(110 * MiB, 100 * MiB, -MiB) is None
    assert seconds_to_limit(110 * MiB, 100 * MiB, None) is None
