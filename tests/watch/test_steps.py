"""Change points of one series (sgemm.watch.steps): steps found at their commit with their size, a stray figure
is no step (the false alarms and power over many simulated series are tests/tools/simulate/test_simulate_watch.py's)."""

import numpy as np
import pytest

from sgemm.watch.steps import MIN_POINTS, MIN_STEP, find_steps, noise


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
    values = series(15, MIN_POINTS - 1, 0.05, 0.0005, seed=5)
    assert find_steps(values) == []
    assert len(find_steps(series(15, MIN_POINTS, 0.05, 0.0005, seed=5))) == 1


def test_too_short_a_series_has_no_steps():
    assert find_steps([1.0, 1.1, 1.2]) == []


def test_noise_is_read_through_a_step():
    values = series(15, 15, 0.05, 0.002, seed=6)
    assert noise(values) == pytest.approx(0.002, rel=0.5)


def test_two_steps_back_to_back_are_both_found():
    values = series(10, 10, 0.02, 0.0005, seed=7) + list(np.full(10, 1.0))
    found = find_steps(values)
    assert [(s.after.start, s.slower) for s in found] == [(10, True), (20, False)]

