"""Verdicts on synthetic per-round figures with known answers: the test on round medians, its false-alarm rate,
the detectable effect, the controls as references, the clock rule and per-pattern thresholds."""

import math
import random

import pytest

from sgemm.judging.verdict import (FALSE_DISCOVERY_RATE, Case, Noise, Rounds, Verdict, benjamini_hochberg, effect,
                                   judge, threshold_for)


def rounds(time_s, n=3, sd=0.002, clock_mhz=1980.0, clock_sd=0.0, rng=None, samples=2000):
    """n rounds whose medians scatter by `sd` (relative) around time_s: between-process noise."""
    rng = rng or random.Random(0)
    return Rounds(tuple(time_s * math.exp(rng.gauss(0, sd)) for _ in range(n)),
                  tuple(clock_mhz * (1 + clock_sd * rng.gauss(0, 1)) for _ in range(n)), (samples,) * n)


def case(label, before, after, threshold=0.02, **kw):
    return Case(label, label.split(" ")[0], before, after, threshold, **kw)


def one(before, after, threshold=0.02, **kw):
    return judge([case("fp32/k 4096x4096x4096", before, after, threshold, **kw)])[0]


def test_welch_on_round_medians_matches_a_hand_computation():
    before, after = [0.0, 0.01, -0.01], [0.05, 0.06, 0.04]
    e = effect(before, after)
    assert e.log_ratio == pytest.approx(0.05)
    assert e.se == pytest.approx(math.sqrt(2 * 0.0001 / 3))  # sample variance 1e-4 each side
    assert e.df == pytest.approx(4.0)  # equal variances and sizes: n1 + n2 - 2
    assert e.p_value < 0.01


@pytest.mark.parametrize("factor, clock, expected", [
    (1.05, 1980.0, Verdict.REGRESSION),  # slower at the same clock
    (0.95, 1980.0, Verdict.IMPROVEMENT),
    (1.01, 1980.0, Verdict.SAME),  # real, but within 2%
    (1.10, 1800.0, Verdict.AMBIGUOUS),  # slower only because the clock fell: equal-clock ratio 1.0
    (1.10, 1990.0, Verdict.REGRESSION),  # slower even though the clock rose
    (0.90, 2178.0, Verdict.AMBIGUOUS),  # faster only because the clock rose
    (1.00, 1800.0, Verdict.SAME),  # the time did not change: the clock's move alone is no verdict
])
def test_verdicts(factor, clock, expected):
    rng = random.Random(1)
    result = one(rounds(1e-3, rng=rng), rounds(factor * 1e-3, clock_mhz=clock, rng=rng))
    assert result.verdict is expected, result.why
    assert result.ratio == pytest.approx(factor, rel=0.01)
    assert result.ratio_at_equal_clock == pytest.approx(factor * clock / 1980.0, rel=0.01)


def test_a_shift_between_processes_is_not_significant_however_tight_each_process_is():
    # Three processes a side whose medians scatter by 0.5%: a 0.4% difference of means is noise, not a change,
    # though thousands of samples inside each process would agree to 0.1%.
    rng = random.Random(3)
    result = one(rounds(1e-3, sd=0.005, rng=rng), rounds(1.004e-3, sd=0.005, rng=rng), threshold=0.001)
    assert result.verdict is Verdict.SAME
    assert result.q_value > FALSE_DISCOVERY_RATE


def identical_gates(count, size=40):
    """A/A gates: `size` cases whose two sides are drawn alike (3 rounds, 0.3% between-round noise), judged at a
    0.1% threshold so that only the statistics stand between noise and a verdict."""
    rng = random.Random(4)
    for _ in range(count):
        yield [case(f"fp32/k{i} 4096x4096x4096", rounds(1e-3, sd=0.003, rng=rng), rounds(1e-3, sd=0.003, rng=rng),
                    threshold=0.001) for i in range(size)]


def test_the_false_alarm_rate_over_many_identical_gates_stays_below_the_chosen_rate():
    # 400 A/A gates of 40 cases each (3 rounds a side, 0.3% between-round noise), threshold 0.1% so that only the
    # statistics stand between noise and a verdict: Benjamini-Hochberg under the null keeps the share of gates with
    # any false alarm near the false-discovery rate.
    gates_with_a_false_alarm = sum(any(c.verdict is not Verdict.SAME for c in judge(cases))
                                   for cases in identical_gates(400))
    assert gates_with_a_false_alarm / 400 <= FALSE_DISCOVERY_RATE * 1.5


def test_without_the_correction_many_cases_would_raise_false_alarms():
    # The same A/A gates judged one case at a time: the raw p-values alone flag some case in most gates, which is
    # what the correction is for (this guards the test above against passing for another reason).
    flagged = sum(any(c.judged.p_value <= FALSE_DISCOVERY_RATE for c in judge(cases)) for cases in identical_gates(100))
    assert flagged > 50


def test_a_one_percent_slowdown_is_found_where_the_noise_allows_it():
    rng = random.Random(5)
    result = one(rounds(1e-3, n=5, sd=0.002, rng=rng), rounds(1.01e-3, n=5, sd=0.002, rng=rng), threshold=0.005)
    assert result.detectable < 0.01
    assert result.verdict is Verdict.REGRESSION, result.why


def test_a_noisy_case_is_judged_at_its_detectable_effect_and_says_so():
    rng = random.Random(6)
    # 3% between-round noise: a 4% slowdown cannot be told from noise at a 2% threshold.
    result = one(rounds(9e-6, sd=0.03, rng=rng), rounds(9.36e-6, sd=0.03, rng=rng))
    assert result.detectable > 0.02
    assert result.threshold == pytest.approx(result.detectable)
    assert result.verdict is Verdict.SAME
    assert "smallest change its noise lets the test see" in result.why
    assert result.open  # more rounds could settle it


def test_detectable_effect_shrinks_with_more_rounds():
    def spread(n):  # round medians 0.2% apart, the same pattern repeated: the same spread, more rounds
        return Rounds(tuple(1e-3 * (1 + 0.002 * (i % 3 - 1)) for i in range(n)), (1980.0,) * n)

    few, many = one(spread(3), spread(3)).detectable, one(spread(9), spread(9)).detectable
    assert many < few / 1.5


def test_recorded_noise_is_a_floor_and_adds_degrees_of_freedom():
    # Three rounds that happen to agree to 0.01% say little: the history says this case moves 0.5% between processes.
    quiet = Rounds((1e-3, 1.0001e-3, 0.9999e-3), (1980.0,) * 3)
    slower = Rounds((1.01e-3, 1.0101e-3, 1.0099e-3), (1980.0,) * 3)
    alone = one(quiet, slower)
    floored = one(quiet, slower, noise=Noise(0.005, 60))
    assert floored.judged.se > alone.judged.se
    assert floored.judged.df > 60
    assert floored.verdict is Verdict.SAME and alone.verdict is Verdict.SAME  # 1% is within 2% either way
    assert floored.detectable > alone.detectable


def test_a_kernel_is_judged_relative_to_its_control_when_the_box_moves():
    # Everything 4% slower at head, the control too: the box moved (another tenant, a warmer room), not the code.
    rng = random.Random(8)
    control = case("fp32/cublas 4096x4096x4096", rounds(2e-3, rng=rng), rounds(2.08e-3, rng=rng), is_control=True)
    kernel = case("fp32/k 4096x4096x4096", rounds(1e-3, rng=rng), rounds(1.04e-3, rng=rng),
                  references=("fp32/cublas 4096x4096x4096",))
    judged_control, judged_kernel = judge([control, kernel])
    assert judged_kernel.ratio == pytest.approx(1.04, rel=0.01)
    assert judged_kernel.judged.ratio == pytest.approx(1.0, abs=0.01)
    assert judged_kernel.verdict is Verdict.SAME
    assert judged_kernel.reference == "fp32/cublas at 1 size"
    assert judged_control.ratio == pytest.approx(1.04, rel=0.01)  # the control's own move, for the report


def test_a_real_slowdown_is_still_found_against_a_steady_control():
    rng = random.Random(9)
    control = case("fp32/cublas 4096x4096x4096", rounds(2e-3, rng=rng), rounds(2e-3, rng=rng), is_control=True)
    kernel = case("fp32/k 4096x4096x4096", rounds(1e-3, rng=rng), rounds(1.05e-3, rng=rng),
                  references=("fp32/cublas 4096x4096x4096",))
    assert judge([control, kernel])[1].verdict is Verdict.REGRESSION


def test_controls_of_several_sizes_are_pooled_into_one_reference():
    # Four sizes of the control, each as noisy as the kernel: pooled, the reference adds a quarter of the variance.
    rng = random.Random(12)
    labels = [f"fp32/cublas {s}x{s}x{s}" for s in (1024, 2048, 4096, 8192)]
    controls = [case(label, rounds(2e-3, rng=rng), rounds(2e-3, rng=rng), is_control=True) for label in labels]
    kernel = case("fp32/k 4096x4096x4096", rounds(1e-3, rng=rng), rounds(1e-3, rng=rng), references=tuple(labels))
    alone = case("fp32/k 4096x4096x4096", kernel.before, kernel.after)
    pooled, raw = judge([*controls, kernel])[-1], judge([alone])[0]
    assert pooled.reference == "fp32/cublas at 4 sizes"
    single = judge([controls[2], case(kernel.label, kernel.before, kernel.after, references=(labels[2],))])[-1]
    assert raw.judged.se < pooled.judged.se < single.judged.se


def test_controls_are_not_counted_among_the_cases_whose_false_alarms_are_controlled():
    rng = random.Random(10)
    control = case("fp32/cublas 4096x4096x4096", rounds(2e-3, rng=rng), rounds(2.2e-3, rng=rng), is_control=True)
    results = judge([control])
    assert results[0].case.is_control  # judged and reported, on its own p-value


def test_no_clock_recorded_leaves_a_time_difference_ambiguous():
    rng = random.Random(11)
    after = rounds(1.05e-3, rng=rng)
    result = one(rounds(1e-3, rng=rng), Rounds(after.medians_s, ()))
    assert result.verdict is Verdict.AMBIGUOUS


def test_a_side_missing_rounds_is_not_judged_and_says_so():
    # Three rounds asked for, two recorded at base (a round's process died, or the results tree lost it): the spread
    # of two medians says too little, even of a 10% slowdown.
    rng = random.Random(12)
    result = one(rounds(1e-3, n=2, rng=rng), rounds(1.1e-3, rng=rng))
    assert result.verdict is Verdict.AMBIGUOUS and result.open
    assert result.why == "too few rounds recorded to judge (base 2; at least 3 a side)"
    single = one(rounds(1e-3, n=1, rng=rng), rounds(1e-3, n=1, rng=rng))
    assert single.verdict is Verdict.AMBIGUOUS and "base 1, head 1" in single.why


def test_benjamini_hochberg_adjusts_as_published():
    # Five p-values: BH's q = min over j >= i of p_(j) * m / j.
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.2, 0.5]) == pytest.approx([0.05, 0.0667, 0.0667, 0.25, 0.5],
                                                                            abs=1e-3)


def test_rounds_of_a_second_measurement_extend_the_first():
    first, second = rounds(1e-3, n=3), rounds(1e-3, n=2, rng=random.Random(2))
    both = first.extended(second)
    assert both.medians_s == first.medians_s + second.medians_s
    assert len(both.sm_clocks_mhz) == 5


def test_threshold_patterns_last_match_wins():
    patterns = [("fp16/*", 0.04), ("fp16/mma_naive", 0.10)]
    assert threshold_for("fp32/naive", 0.02, patterns) == 0.02
    assert threshold_for("fp16/mma_swizzled", 0.02, patterns) == 0.04
    assert threshold_for("fp16/mma_naive", 0.02, patterns) == 0.10
