"""Change points of one series (sgemm.watch.steps): steps found at their commit with their size, a stray figure
is no step, the standard error counts the correlation of neighbouring commits (the false notices and power over
many simulated machine histories are tests/tools/simulate/test_simulate_watch.py's)."""

import numpy as np
import pytest

from sgemm.watch.steps import (MIN_POINTS, MIN_SERIES, MIN_STEP, WINDOW, difference_variance, find_steps, lag_one,
                               machine_phi, scan, series_sd, watch_series)


def series(before: int, after: int, step: float, sd: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    levels = np.r_[np.ones(before), np.full(after, 1 + step)]
    return list(levels * np.exp(rng.normal(0, sd, before + after)))


@pytest.mark.parametrize("step", [0.01, 0.02])
def test_a_step_is_found_at_its_commit_with_its_size(step):
    values = series(15, 15, step, 0.001, seed=4)
    [found] = find_steps(values)
    assert found.after.start == 15 and found.slower
    assert found.ratio == pytest.approx(1 + step, abs=0.002)
    low, high = found.interval
    assert low < found.ratio < high and high - low < 0.005


def test_a_step_down_is_found_as_faster():
    [found] = find_steps(series(12, 12, -0.02, 0.001, seed=2))
    assert not found.slower and found.after.start == 12


def test_a_step_smaller_than_the_minimum_is_not_one_however_quiet():
    assert find_steps(series(15, 15, MIN_STEP / 2, 0.00005, seed=1)) == []


def test_a_single_stray_figure_is_no_step():
    values = series(20, 0, 0.0, 0.0005, seed=3)
    values[9] *= 1.05
    assert find_steps(values) == []


def test_the_newest_commits_cannot_show_a_step_until_enough_follow_it():
    values = series(MIN_SERIES, MIN_POINTS - 1, 0.05, 0.0005, seed=5)
    assert all(step.after.start != MIN_SERIES for step in find_steps(values))
    assert len(find_steps(series(MIN_SERIES, MIN_POINTS, 0.05, 0.0005, seed=5))) == 1


def test_too_short_a_series_has_no_steps():
    assert find_steps(series(MIN_SERIES // 2, MIN_SERIES // 2 - 1, 0.05, 0.0005, seed=8)) == []
    assert len(find_steps(series(MIN_SERIES // 2, MIN_SERIES // 2, 0.05, 0.0005, seed=8))) == 1


def test_a_step_and_its_undoing_are_both_found_once_each_is_clear():
    values = series(20, 20, 0.03, 0.0005, seed=7) + series(0, 20, 0.0, 0.0005, seed=17)
    assert [(s.after.start, s.slower) for s in find_steps(values[:40])] == [(20, True)]
    found = find_steps(values)
    assert [s.slower for s in found] == [False] and found[0].after.start == 40


def test_only_the_trailing_window_is_read():
    values = series(20, 60, 0.05, 0.0005, seed=9)
    assert find_steps(values) == []
    assert find_steps(values[:50])[0].after.start == 20


def test_the_difference_variance_is_the_iid_one_without_correlation_and_grows_with_it():
    assert difference_variance(10, 30, 0.0) == pytest.approx(1 / 10 + 1 / 30)
    rng = np.random.default_rng(1)
    x = np.zeros((20000, 40))
    x[:, 0] = rng.standard_normal(20000)
    for t in range(1, 40):
        x[:, t] = 0.5 * x[:, t - 1] + np.sqrt(0.75) * rng.standard_normal(20000)
    empirical = np.var(x[:, 30:].mean(axis=1) - x[:, :30].mean(axis=1))
    assert difference_variance(30, 10, 0.5) == pytest.approx(empirical, rel=0.05)


def test_a_box_whose_commits_move_together_is_read_as_such():
    rng = np.random.default_rng(2)
    x = np.zeros((200, 80))
    for t in range(1, 80):
        x[:, t] = 0.5 * x[:, t - 1] + np.sqrt(0.75) * rng.standard_normal(200)
    phi = machine_phi([list(np.exp(0.002 * row)) for row in x])
    assert 0.4 < phi < 0.6
    assert abs(np.median(lag_one(rng.standard_normal((200, 80))))) < 0.05


def test_correlated_noise_widens_the_threshold():
    """A stretch of AR(1) noise that first differences read as a step, the long-run error does not."""
    rng = np.random.default_rng(3)
    x = np.zeros(40)
    for t in range(1, 40):
        x[t] = 0.9 * x[t - 1] + np.sqrt(1 - 0.81) * rng.standard_normal()
    logs = 0.004 * x
    assert scan(logs, 0.9).z < 0.7 * scan(logs, 0.0).z


def test_a_series_spread_is_read_over_its_last_windows():
    values = series(WINDOW + 30, 0, 0.0, 0.002, seed=10)
    assert series_sd(values) == pytest.approx(0.002, rel=0.2)
    [found] = watch_series(series(40, 12, 0.02, 0.002, seed=11))
    assert found.after.start == 40 and found.first_bad_range[0] <= 40 <= found.first_bad_range[1]


def test_a_real_steps_interval_is_wider_under_correlation():
    values = series(30, 10, 0.02, 0.001, seed=12)
    [iid] = find_steps(values)
    [correlated] = find_steps(values, phi_floor=0.5)
    assert correlated.interval[1] - correlated.interval[0] > 1.5 * (iid.interval[1] - iid.interval[0])
