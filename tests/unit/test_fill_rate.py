"""The fill-rate estimator on synthetic series: the median of the slopes across half the trend since
the last gain, as the live rule grows it and as the report replays it."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.decision.fill_rate import GAIN_NOISE_MAX_BYTES, FillTrend, fill_rate, half_trend_slope, replay, seconds_to_limit

GiB = 1024**3
MiB = 1024**2
TOTAL = 100 * GiB  # noise: min(0.1% = 102 MiB, 64 MiB) = 64 MiB
NOISE = 64 * MiB


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
    assert replay(((t, u, TOTAL) for t, u in zip(times, usable)), 3600).start == 90.0  # the drop at t = 90 s
    # Without the restart a fit across the teeth would read the net -5.7 MiB/s of freeing.
    assert fill_rate(times, usable, TOTAL, 3600) is None  # 2 observations since the last drop
    assert fill_rate(times[:18], usable[:18], TOTAL, 3600) == pytest.approx(MiB, rel=1e-9)


def test_a_rise_within_the_noise_does_not_restart_the_trend():
    times, usable = series(MiB, 8)
    usable[4] += GAIN_NOISE_MAX_BYTES // 2
    assert replay(((t, u, TOTAL) for t, u in zip(times, usable)), 3600).start == 0.0
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


def test_a_stop_reads_as_zero_once_three_quarters_of_the_observations_are_flat():
    times, usable = series(MiB, 8)
    stopped = usable[:2] + [usable[1]] * 6  # filled for 5 s, then stopped for 30 s
    assert fill_rate(times, stopped, TOTAL, 3600) == 0.0
    half = usable[:4] + [usable[3]] * 4  # half flat: the slopes across half the trend still see the fill
    assert 0 < fill_rate(times, half, TOTAL, 3600) < MiB


def test_observations_older_than_the_window_are_left_out():
    times = [i * 5.0 for i in range(8)]
    usable = [50 * GiB - 10 * MiB * min(t, 15) - MiB * max(t - 15, 0) for t in times]  # 10 MiB/s, then 1 MiB/s
    assert fill_rate(times, usable, TOTAL, window_seconds=20) == pytest.approx(MiB, rel=1e-9)


def test_too_few_observations_give_no_rate():
    assert fill_rate([0.0, 5.0], [10 * GiB, 9 * GiB], TOTAL, 3600) is None
    assert half_trend_slope([0.0, 2.0], [0.0, 1.0]) == 0.5


def test_the_trend_keeps_at_most_its_count_and_its_window():
    trend = FillTrend(window_seconds=20, max_observations=3)
    for t in range(8):
        assert trend.add(t * 5.0, 50 * GiB - MiB * t * 5.0, TOTAL)
    assert trend.times == [25.0, 30.0, 35.0]
    assert not trend.add(35.0, 0, TOTAL)  # not newer: the same observation again
    assert trend.times == [25.0, 30.0, 35.0] and trend.rate() == pytest.approx(MiB, rel=1e-9)
    window = FillTrend(window_seconds=12)
    for t in range(8):
        window.add(t * 5.0, 50 * GiB - MiB * t * 5.0, TOTAL)
    assert window.times == [25.0, 30.0, 35.0]


def test_a_gain_is_judged_against_the_observations_before_it_even_outside_the_window():
    # A low reading that leaves the window does not make the next ordinary one a gain.
    trend = FillTrend(window_seconds=5)
    for at, usable in [(0.0, 10 * GiB), (5.0, 5 * GiB), (10.0, 10 * GiB - MiB), (15.0, 10 * GiB - 2 * MiB)]:
        trend.add(at, usable, TOTAL)
    assert trend.times == [10.0, 15.0]
    assert replay([(0.0, 10 * GiB, TOTAL), (5.0, 5 * GiB, TOTAL), (10.0, 10 * GiB + GiB, TOTAL)], 3600).start == 10.0


def test_seconds_to_the_limit():
    assert seconds_to_limit(110 * MiB, 100 * MiB, MiB) == pytest.approx(10)
    assert seconds_to_limit(100 * MiB, 100 * MiB, MiB) == 0.0
    assert seconds_to_limit(110 * MiB, 100 * MiB, -MiB) is None
    assert seconds_to_limit(110 * MiB, 100 * MiB, None) is None


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.5, 30.0), st.integers(-200 * MiB, 300 * MiB)),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([None, 4, 16]),
)
def test_the_trend_grown_one_observation_at_a_time_gives_the_rate_of_its_observations_afresh(steps, most):
    """The trend keeps its slopes from one observation to the next; the rate is always the
    median of the slopes across half the trend it holds, computed afresh."""
    trend = FillTrend(window_seconds=60.0, max_observations=most)
    at, usable = 0.0, 50 * GiB
    seen: list[tuple[float, float]] = []
    for gap, change in steps:
        at, usable = at + gap, usable - change
        trend.add(at, usable, TOTAL)
        seen.append((at, usable))
        # The trend written plainly: since the last gain above the noise that also clears the
        # observation before the one it rises from, within the window, the last ``most``.
        start = max([k for k in range(1, len(seen)) if seen[k][1] - seen[k - 1][1] > NOISE and (k < 2 or seen[k][1] - seen[k - 2][1] > NOISE)], default=0)
        plain = [t for t, _ in seen[start:] if t >= at - 60.0][-most if most else None :]
        assert trend.times == plain
        rate = trend.rate()
        if len(trend.times) < 3:
            assert rate is None
        else:
            assert rate == 0.0 - half_trend_slope(trend.times, trend.usable)
