"""Verdicts: significance, the threshold in time and at equal clock, and per-pattern thresholds."""

import random

import pytest

from sgemm.verdict import Side, Verdict, compare, threshold_for


def side(time_s, clock_mhz=1980.0, spread=0.002, n=80, seed=0):
    rng = random.Random(seed)
    return Side([time_s * (1 + spread * rng.gauss(0, 1)) for _ in range(n)], None, clock_mhz)


@pytest.mark.parametrize("after, clock, expected", [
    (1.05, 1980.0, Verdict.REGRESSION),  # slower at the same clock
    (0.95, 1980.0, Verdict.IMPROVEMENT),
    (1.01, 1980.0, Verdict.SAME),  # significant but within 2%
    (1.10, 1800.0, Verdict.AMBIGUOUS),  # slower only because the clock fell: equal-clock ratio 1.0
    (1.10, 1990.0, Verdict.REGRESSION),  # slower even though the clock rose
    (0.90, 2178.0, Verdict.AMBIGUOUS),  # faster only because the clock rose
    (1.00, 1800.0, Verdict.AMBIGUOUS),  # same time on a 10% slower clock: better code, or a memory-bound case?
])
def test_verdicts(after, clock, expected):
    result = compare("case", side(1e-3, seed=1), side(after * 1e-3, clock, seed=2), threshold=0.02)
    assert result.verdict is expected, result.why
    assert result.ratio == pytest.approx(after, rel=0.005)
    assert result.ratio_at_equal_clock == pytest.approx(after * clock / 1980.0, rel=0.005)


def test_a_large_difference_in_noisy_samples_is_not_significant():
    # Two samples each: asv's test cannot reach significance, so no verdict beyond SAME, however large the ratio.
    result = compare("case", Side([1e-3, 1.2e-3], None, 1980.0), Side([1.3e-3, 1.0e-3], None, 1980.0), 0.02)
    assert not result.significant
    assert result.verdict is Verdict.SAME


def test_no_clock_on_one_side_cannot_be_judged_at_equal_clock():
    result = compare("case", side(1e-3, seed=1), side(1.05e-3, float("nan"), seed=2), 0.02)
    assert result.verdict is Verdict.AMBIGUOUS


def test_threshold_patterns_last_match_wins():
    patterns = [("fp16/*", 0.04), ("fp16/mma_naive", 0.10)]
    assert threshold_for("fp32/naive", 0.02, patterns) == 0.02
    assert threshold_for("fp16/mma_swizzled", 0.02, patterns) == 0.04
    assert threshold_for("fp16/mma_naive", 0.02, patterns) == 0.10
    result = compare("case", side(1e-3, seed=1), side(1.03e-3, seed=2), threshold_for("fp16/x", 0.02, patterns))
    assert result.verdict is Verdict.SAME


def test_the_significance_test_stays_fast_on_tens_of_thousands_of_samples():
    # asv's test is quadratic in the samples: unthinned, 40,000 a side would take minutes. Correctness, not speed,
    # is what is asserted: the verdict on a large, clear difference.
    before, after = side(1e-3, n=40_000, seed=1), side(1.05e-3, n=40_000, seed=2)
    result = compare("case", before, after, 0.02)
    assert result.significant and result.verdict is Verdict.REGRESSION
