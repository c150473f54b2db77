"""The adaptive paired comparison: SAME inside the region, DIFFERENT outside, UNKNOWN when the rounds or the time
run out; the first look spends for the rounds it holds, so the looks together spend at most 1 - confidence; an
outlier round set aside and timed again."""

import math
import random

import pytest

from sgemm.bisect.compare import (Answer, CompareSchedule, Halves, Region, RegionWithoutOutliers, Round, answer,
    compare)
from sgemm.rounds.evidence import MIN_ROUNDS, Noise


def rounds_of(*ratios):
    return [Round(r) for r in ratios]


def test_regions():
    within = Region.within(0.0025)
    assert within.low == pytest.approx(1 / 1.0025) and within.high == 1.0025
    slower = Region.good_side_of(math.sqrt(1.01), 1.01)
    assert (slower.low, slower.high) == (0.0, math.sqrt(1.01))
    faster = Region.good_side_of(math.sqrt(0.98), 0.98)
    assert (faster.low, faster.high) == (math.sqrt(0.98), math.inf)


def test_no_verdict_before_the_first_look():
    assert answer(rounds_of(1.01, 1.01), Region.within(0.0025), CompareSchedule()) is None


def test_same_different_and_unknown():
    region, schedule = Region.within(0.0025), CompareSchedule(max_rounds=5)
    same = answer(rounds_of(1.0001, 0.9999, 1.0000), region, schedule)
    assert same.verdict is Answer.SAME and region.low < same.interval[0] < same.interval[1] < region.high
    different = answer(rounds_of(1.0101, 1.0099, 1.0100), region, schedule)
    assert different.verdict is Answer.DIFFERENT and different.ratio == pytest.approx(1.01, abs=1e-5)
    straddling = rounds_of(1.003, 1.001, 1.004, 1.000, 1.002)
    assert answer(straddling[:4], region, schedule) is None
    assert answer(straddling, region, schedule).verdict is Answer.UNKNOWN


def test_identical_rounds_are_not_certainty():
    # no spread at all: the timer's resolution over a block still bounds the interval away from a point
    outcome = answer(rounds_of(1.0, 1.0, 1.0), Region.within(0.0025), CompareSchedule())
    assert outcome.verdict is Answer.SAME and outcome.interval[0] < 1.0 < outcome.interval[1]


def test_compare_stops_at_the_first_settled_look_and_keeps_earlier_rounds():
    made, seen = [], []

    def next_round():
        made.append(Round(1.01))
        return made[-1]

    outcome = compare(next_round, rounds_of(1.0102), Region.within(0.0025), CompareSchedule(),
                      on_round=lambda rounds: seen.append(len(rounds)))
    assert outcome.verdict is Answer.DIFFERENT and len(outcome.rounds) == MIN_ROUNDS and len(made) == 2
    assert seen == [2, 3]


def test_compare_says_unknown_when_the_time_runs_out():
    calls = iter([True, True, False])
    outcome = compare(lambda: Round(1.002), [], Region.within(0.0025), CompareSchedule(), time_left=lambda: next(calls))
    assert outcome.verdict is Answer.UNKNOWN and len(outcome.rounds) == 2
    assert "time allowed ran out" in outcome.why and math.isfinite(outcome.interval[0])


@pytest.mark.parametrize("truth", [1.0, 1.004])
def test_the_error_rate_over_looks_stays_within_the_confidence(truth):
    # Rounds whose ratio sits inside the region (SAME is right) or outside it (DIFFERENT is right), spread 0.1%:
    # the wrong verdict comes at most 5% of the time, looks included.
    region, schedule = Region.within(0.0025), CompareSchedule()
    rng = random.Random(7)
    wrong = 0
    for _ in range(400):
        outcome = compare(lambda: Round(truth * rng.gauss(1, 0.001)), [], region, schedule)
        right = Answer.SAME if region.low <= truth <= region.high else Answer.DIFFERENT
        wrong += outcome.verdict not in (right, Answer.UNKNOWN)
    assert wrong <= 0.05 * 400


def test_the_bad_end_sets_an_outlier_round_aside_and_is_decided_on_the_others():
    # a 1% step, 0.3% noise (the noise file's), and one disturbed round 3% the other way: its interval, the outlier
    # kept, straddles the threshold; set aside, the three ordinary rounds decide
    within, noise = Region.within(0.0025), Noise(0.003, 12)
    rounds = rounds_of(1.0100, 0.9700, 1.0105, 1.0095)
    assert answer(rounds, within, CompareSchedule(), noise) is None
    outcome = RegionWithoutOutliers(within).answer(rounds, CompareSchedule(), noise)
    assert outcome.verdict is Answer.DIFFERENT and outcome.ratio == pytest.approx(1.01, abs=1e-3)
    assert len(outcome.rounds) == 4 and "1 outlier round set aside" in outcome.why


def test_a_candidate_is_decided_past_an_outlier_round_and_times_a_round_more_for_it():
    halves, pool = Halves(1.01), Noise(0.003, 30)
    bad = rounds_of(1.0100, 0.9700, 1.0102, 1.0098)
    outcome = halves.answer(bad, CompareSchedule(), pool)
    assert outcome.verdict is Answer.DIFFERENT and "1 outlier round set aside" in outcome.why
    # a commit right on half the step never settles: one outlier among its rounds buys it one round more
    middle = math.sqrt(1.01)
    made = iter([Round(middle * 1.04)] + [Round(middle)] * 20)
    outcome = compare(lambda: next(made), [], halves, CompareSchedule(max_rounds=5), noise=pool)
    assert outcome.verdict is Answer.UNKNOWN and len(outcome.rounds) == 6


@pytest.mark.parametrize("noise", [None, Noise(0.003, 12)])
def test_setting_outliers_aside_keeps_the_bad_ends_error_at_the_threshold_within_its_confidence(noise):
    # rounds right at the threshold's edge, 0.3% noise, 5% of them ten times that: DIFFERENT (a step beyond the
    # threshold) is wrong here, and must come at most as often as the confidence allows on one side
    region, schedule = RegionWithoutOutliers(Region.within(0.0025)), CompareSchedule()
    rng = random.Random(11)

    def next_round():
        return Round(1.0025 * math.exp(rng.gauss(0, 0.003 * (10 if rng.random() < 0.05 else 1))))

    wrong = sum(compare(next_round, [], region, schedule, noise=noise).verdict is Answer.DIFFERENT
                for _ in range(600))
    assert wrong <= 0.025 * 600
