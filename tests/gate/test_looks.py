"""A gate's looks on simulated rounds: what is measured again, what is frozen, what each look spends (the
false-alarm rate over many simulated gates is tests/tools/simulate/test_simulate_gates.py's)."""

import math
import random
from dataclasses import replace

import pytest

from sgemm.gate import looks
from sgemm.gate.looks import Schedule, run_looks
from sgemm.gate.verdict import Spending, Verdict
from sgemm.rounds.evidence import FALSE_DISCOVERY_RATE, Case, Noise, PairedRounds, spend


def simulated(sds: dict[str, float], truth: dict[str, float], seed: int = 0, noise: dict | None = None):
    """measure({label: rounds}) over paired rounds drawn from each case's sd, and a log of what it was asked (the
    cases, the most rounds asked of any)."""
    rng = random.Random(seed)
    drawn: dict[str, list[float]] = {label: [] for label in sds}
    asked: list[tuple[list[str], int]] = []

    def measure(wanted):
        asked.append((list(wanted), max(wanted.values())))
        for label, rounds in wanted.items():
            while len(drawn[label]) < rounds:
                drawn[label].append(truth.get(label, 1.0) * math.exp(rng.gauss(0, sds[label])))
        return {label: Case(label, label, 0.0025, paired=PairedRounds(tuple(drawn[label][:rounds])),
                            noise=(noise or {}).get(label)) for label, rounds in wanted.items()}

    return measure, asked


def test_decided_cases_are_frozen_and_only_open_ones_are_measured_again():
    sds = {"quiet": 0.0001, "slower": 0.0001, "noisy": 0.01}
    measure, asked = simulated(sds, {"slower": 1.01})
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    assert asked[0] == (["quiet", "slower", "noisy"], 3)
    assert all(labels == ["noisy"] for labels, _ in asked[1:])  # the others were never measured again
    quiet, slower, noisy = (outcome.comparisons[label] for label in ("quiet", "slower", "noisy"))
    assert slower.verdict is Verdict.REGRESSION and slower.level.rounds_before == 0  # decided at the first look
    assert quiet.verdict is Verdict.SAME and quiet.case.rounds == 3
    # Hopeless past the ninth round (no rounds allowed would let it see 0.25%), it ends there.
    assert noisy.verdict is Verdict.NOT_POWERED and noisy.case.rounds == 9 and noisy.level.rounds_before == 3
    assert outcome.rounds == 9 and outcome.looks == 2 and not outcome.extended


def test_the_looks_together_spend_no_more_than_the_rate():
    measure, asked = simulated({"a": 0.0008, "b": 0.0004}, {})
    outcome = run_looks(["a", "b"], measure, Schedule(3, 9))
    levels = {c.level.rounds_before: c.level.alpha for c in outcome.comparisons.values()}
    rounds = sorted({rounds for _, rounds in asked})
    spent = sum(spend(n, before, 9) for before, n in zip([0, *rounds], rounds))
    assert spent <= FALSE_DISCOVERY_RATE + 1e-12
    assert all(alpha <= FALSE_DISCOVERY_RATE for alpha in levels.values())


def test_a_case_the_measuring_could_not_give_is_left_to_the_gate():
    def measure(wanted):
        return {label: Case(label, label, 0.0025, paired=PairedRounds((1.0, 1.0001, 0.9999)))
                for label in wanted if label != "broken"}

    outcome = run_looks(["fine", "broken"], measure, Schedule(3, 9))
    assert list(outcome.comparisons) == ["fine"]



def test_the_few_cases_still_open_after_the_most_rounds_go_on_and_decide():
    # 40 quiet cases and one whose spread nine rounds cannot quite bring inside 0.25% at the family's level.
    sds = {f"q{i}": 0.0001 for i in range(40)} | {"edge": 0.0022}
    measure, asked = simulated(sds, {}, seed=4)
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    edge = outcome.comparisons["edge"]
    assert outcome.extended == 1 and 9 < edge.case.rounds <= 9 + looks.EXTRA_ROUNDS
    assert all(labels == ["edge"] for labels, rounds in asked if rounds > 9)
    assert edge.verdict is Verdict.SAME and edge.level.rounds_before >= 9
    without = run_looks(list(sds), simulated(sds, {}, seed=4)[0], Schedule(3, 9, extra_rounds=0))
    assert without.comparisons["edge"].verdict is Verdict.NOT_POWERED and without.rounds == 9


def test_many_cases_open_after_the_most_rounds_end_not_powered_there():
    sds = {f"n{i}": 0.005 for i in range(12)}  # more than the few (four of twelve) that may go on
    measure, asked = simulated(sds, {}, seed=4)
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    assert max(rounds for _, rounds in asked) == 9 and not outcome.extended
    assert Verdict.NOT_POWERED in {c.verdict for c in outcome.comparisons.values()}


@pytest.mark.parametrize("extra, reserve", [(0, 0.0), (6, 0.2), (3, 0.5)])
def test_every_look_together_spends_at_most_the_rate_with_the_rounds_past_the_most(extra, reserve):
    spending = Spending(FALSE_DISCOVERY_RATE, 9, extra, reserve)
    for schedule in ([0, 3, 9, 15], [0, 3, 4, 5, 9, 10, 12, 15], [0, 9, 12]):
        spent = sum(spending.alpha(n, before) for before, n in zip(schedule, schedule[1:]))
        assert spent <= FALSE_DISCOVERY_RATE + 1e-12
    assert sum(spending.alpha(n, n - 1) for n in range(1, 9 + extra + 1)) == pytest.approx(FALSE_DISCOVERY_RATE)


def test_the_whole_noise_file_is_checked_once_over_every_cases_first_rounds(monkeypatch):
    checked = []
    real = looks.noise_contradicted
    monkeypatch.setattr(looks, "noise_contradicted", lambda cases: checked.append(len(cases)) or real(cases))
    sds = {"quiet": 0.0001, "noisy": 0.002}
    measure, _ = simulated(sds, {}, noise={label: Noise(sd, 10) for label, sd in sds.items()})
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    assert checked == [2] and outcome.looks > 1


def test_a_kernel_changed_at_one_size_is_found_at_that_size_alone():
    sizes = [f"fp16/k {n}x{n}x{n}" for n in (1024, 2048, 4096, 8192)]
    sds = {label: 0.0004 for label in sizes} | {f"other{i}": 0.0004 for i in range(50)}
    measure, _ = simulated(sds, {sizes[3]: 1.005}, seed=5)
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    assert [label for label, c in outcome.comparisons.items() if c.verdict is Verdict.REGRESSION] == [sizes[3]]


def test_an_outlier_round_costs_its_case_a_round_more_not_its_verdict():
    # the second process of "x" read 2% off; the entries say 0.08%. Of three rounds none may go (the median of
    # three is one round), so the next look is at four, and "x" is timed five, its outlier set aside
    sds = {"x": 0.0008, "y": 0.0008}
    entries = {label: Noise(0.0008, 24) for label in sds}
    measure, _ = simulated(sds, {}, seed=1, noise=entries)
    asked = []

    def disturbed(wanted):
        asked.append(dict(wanted))
        cases = measure(wanted)
        if "x" in cases:
            ratios = list(cases["x"].paired.ratios)
            ratios[1] = 1.02
            cases["x"] = replace(cases["x"], paired=PairedRounds(tuple(ratios)))
        return cases

    outcome = run_looks(list(sds), disturbed, Schedule(3, 9))
    x = outcome.comparisons["x"]
    assert x.verdict is Verdict.SAME and x.case.outliers == 1 and "1 outlier round set aside" in x.why
    assert asked == [{"x": 3, "y": 3}, {"x": 5}] and x.case.rounds == 4


def test_a_case_that_cannot_decide_does_not_hold_every_other_to_the_most_rounds():
    # "near" needs a round or two more; "far" cannot be decided in nine: the next look comes when "near" may decide
    sds = {"near": 0.0011, "far": 0.02} | {f"q{i}": 0.0001 for i in range(10)}
    measure, asked = simulated(sds, {}, seed=0)
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    near = outcome.comparisons["near"]
    assert near.verdict is Verdict.SAME and near.case.rounds < 9
    assert outcome.comparisons["far"].verdict is Verdict.NOT_POWERED


def test_a_noise_file_set_aside_sets_no_round_aside():
    # entries a tenth of the true spread: the whole file is set aside, and its entries must not then tell ordinary
    # rounds for outliers (here they set 12 rounds of 4 cases aside); from eight rounds a case's own robust sd may
    # still tell one
    sds = {f"c{i}": 0.001 for i in range(20)}
    measure, _ = simulated(sds, {}, seed=9, noise={label: Noise(0.0001, 24) for label in sds})
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    comparisons = list(outcome.comparisons.values())
    assert all("the noise file was set aside" in c.why for c in comparisons)
    assert sum(c.case.outliers for c in comparisons) <= 1
