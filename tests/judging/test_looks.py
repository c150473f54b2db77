"""A gate's looks on simulated rounds: what is measured again, what is frozen, what each look spends; and the
simulation script that reports the false-alarm rate, in a small version (lab/2026-11-27-gate-simulations has the
figures of its full run: 20 seeds of 50 gates)."""

import json
import math
import random
import subprocess
import sys
from pathlib import Path

from sgemm.judging.looks import Schedule, run_looks
from sgemm.judging.verdict import FALSE_DISCOVERY_RATE, Case, PairedRounds, Verdict, spend

ROOT = Path(__file__).resolve().parents[2]


def simulated(sds: dict[str, float], truth: dict[str, float], seed: int = 0):
    """measure(labels, rounds) over paired rounds drawn from each case's sd, and a log of what it was asked."""
    rng = random.Random(seed)
    drawn: dict[str, list[float]] = {label: [] for label in sds}
    asked: list[tuple[list[str], int]] = []

    def measure(labels, rounds):
        asked.append((list(labels), rounds))
        for label in labels:
            while len(drawn[label]) < rounds:
                drawn[label].append(truth.get(label, 1.0) * math.exp(rng.gauss(0, sds[label])))
        return {label: Case(label, label, 0.0025, paired=PairedRounds(tuple(drawn[label]))) for label in labels}

    return measure, asked


def test_decided_cases_are_frozen_and_only_open_ones_are_measured_again():
    sds = {"quiet": 0.0001, "slower": 0.0001, "noisy": 0.003}
    measure, asked = simulated(sds, {"slower": 1.01})
    outcome = run_looks(list(sds), measure, Schedule(3, 9))
    assert asked[0] == (["quiet", "slower", "noisy"], 3)
    assert all(labels == ["noisy"] for labels, _ in asked[1:])  # the others were never measured again
    quiet, slower, noisy = (outcome.comparisons[label] for label in ("quiet", "slower", "noisy"))
    assert slower.verdict is Verdict.REGRESSION and slower.level.rounds_before == 0  # decided at the first look
    assert quiet.verdict is Verdict.SAME and quiet.case.rounds == 3
    assert noisy.verdict is Verdict.NOT_POWERED and noisy.case.rounds == 9 and noisy.level.final
    assert outcome.rounds == 9 and outcome.looks == 2


def test_the_looks_together_spend_no_more_than_the_rate():
    measure, asked = simulated({"a": 0.0008, "b": 0.0004}, {})
    outcome = run_looks(["a", "b"], measure, Schedule(3, 9))
    levels = {c.level.rounds_before: c.level.alpha for c in outcome.comparisons.values()}
    rounds = sorted({rounds for _, rounds in asked})
    spent = sum(spend(n, before, 9) for before, n in zip([0, *rounds], rounds))
    assert spent <= FALSE_DISCOVERY_RATE + 1e-12
    assert all(alpha <= FALSE_DISCOVERY_RATE for alpha in levels.values())


def test_a_case_the_measuring_could_not_give_is_left_to_the_gate():
    def measure(labels, rounds):
        return {label: Case(label, label, 0.0025, paired=PairedRounds((1.0, 1.0001, 0.9999)))
                for label in labels if label != "broken"}

    outcome = run_looks(["fine", "broken"], measure, Schedule(3, 9))
    assert list(outcome.comparisons) == ["fine"]


def test_the_simulation_script_reports_its_false_alarm_rate_and_power():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "simulate-gates.py"), "--seeds", "2", "--gates",
                           "8", "--noise-file", "--changed", "0.005"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["gates"] == 16
    assert summary["false_alarm"] <= 2
    assert summary["found"] >= 13  # a 0.5% change at the 0.25% threshold, through the H100's measured noise
