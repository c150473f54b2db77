"""The statistics bisect's pooled, sequential decisions rest on (sgemm.rounds.evidence)."""

import math

import pytest

from sgemm.rounds.evidence import (Noise, log_likelihood_ratio, ordinary, pooled_noise, robust_sd, spread_bound,
    wider_than)


def test_groups_are_pooled_each_about_its_own_mean_and_with_a_noise_entry():
    # two commits at different ratios, the same spread: their difference is no part of it
    pooled = pooled_noise([[0.0, 0.002], [0.010, 0.012]], 1e-9)
    assert pooled.df == 2 and pooled.sd == pytest.approx(math.sqrt(2 * 2 * 0.001 ** 2 / 2))
    with_file = pooled_noise([[0.0, 0.002]], 1e-9, Noise(0.003, 8))
    assert with_file.df == 9 and with_file.sd == pytest.approx(math.sqrt((2 * 0.001 ** 2 + 8 * 0.003 ** 2) / 9))
    assert pooled_noise([[0.1]], 1e-9) is None


def test_an_outlier_round_is_left_out_before_the_spread_is_pooled():
    groups = [[0.0, 0.001, -0.001], [0.010, 0.011, 0.009], [0.0, 0.001, 0.050]]
    plain, kept = pooled_noise(groups, 1e-9), pooled_noise(groups, 1e-9, outlier_reach=0.005)
    assert kept.sd < plain.sd / 3 and kept.df == plain.df - 1


def test_a_wider_spread_is_told_from_a_pooled_one():
    assert wider_than(Noise(0.01, 4), Noise(0.001, 30), 0.99)
    assert not wider_than(Noise(0.0012, 4), Noise(0.001, 30), 0.99)


def test_the_spread_taken_as_known_is_its_upper_bound():
    assert spread_bound(Noise(0.001, 4), 0.9) > spread_bound(Noise(0.001, 40), 0.9) > 0.001


def test_no_one_round_decides_the_sequential_test():
    step, sd = math.log(1.01), 0.003
    bound = math.log(999)
    assert log_likelihood_ratio([0.01, 0.01, 0.01], step, sd, 2.0) > bound  # three rounds at the step: bad
    assert log_likelihood_ratio([0.0, 0.0, 0.0], step, sd, 2.0) < -bound
    # an outlier round among three at the step does not make them the good end's; unclipped it would
    assert log_likelihood_ratio([0.01, 0.01, -0.5], step, sd, 2.0) > -bound
    assert log_likelihood_ratio([0.01, 0.01, -0.5], step, sd, 1e9) < -bound


def test_ordinary_figures_are_those_near_their_median():
    assert ordinary([0.0, 0.001, -0.001, 0.05], 0.003) == [0.0, 0.001, -0.001]
    assert ordinary([0.0, 0.05], 0.0) == [0.0, 0.05]  # no reach: every figure is kept


def test_a_robust_sd_is_not_moved_by_one_outlier_and_needs_enough_deviations():
    values = [0.001 * z for z in (-1.2, -0.6, -0.3, 0.0, 0.2, 0.5, 0.7, 1.1, 40.0)]
    assert 0.0005 < robust_sd([values]) < 0.0012
    assert robust_sd([values[:4]], at_least=8) == 0.0
