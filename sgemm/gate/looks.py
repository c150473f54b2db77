"""A gate's rounds, look by look: measure every case, judge, measure again only the cases still open, until each is
decided or the most rounds allowed are spent (sgemm.gate.verdict says how each look is judged).

The measuring is given as a function, so that the same procedure runs on a GPU (the gate) and on simulated rounds
(tools/simulate/simulate_gates.py and the tests), and what the simulations show is what the gate does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..rounds.evidence import FALSE_DISCOVERY_RATE, MIN_ROUNDS, POWER, Case, spend
from .verdict import EXPECTED_CHANGES, Comparison, Level, judge

# measure(labels, rounds): each of these cases with `rounds` rounds a side in all (the earlier rounds kept), or the
# cases it could not measure left out (the gate reports why).
Measure = Callable[[list[str], int], dict[str, Case]]


@dataclass(frozen=True)
class Schedule:
    rounds: int = MIN_ROUNDS  # before the first look
    max_rounds: int = 9
    rate: float = FALSE_DISCOVERY_RATE
    expected_changes: int = EXPECTED_CHANGES
    power: float = POWER


@dataclass
class LooksOutcome:
    comparisons: dict[str, Comparison]  # by label, each as decided at its last look
    rounds: int  # the most rounds a side any case got
    looks: int


def run_looks(labels: list[str], measure: Measure, schedule: Schedule = Schedule(),
              controls: frozenset[str] = frozenset()) -> LooksOutcome:
    """Every case decided, or undecided at the most rounds allowed. Controls are measured with the first look alone
    and judged as context."""
    family = len([label for label in labels if label not in controls])
    decided: dict[str, Comparison] = {}
    open_labels, rounds, rounds_before, looks = list(labels), schedule.rounds, 0, 0
    while open_labels:
        cases = measure(open_labels, rounds)
        looks += 1
        final = rounds >= schedule.max_rounds
        level = Level(spend(rounds, rounds_before, schedule.max_rounds, schedule.rate), family, schedule.max_rounds,
                      rounds_before, final, schedule.expected_changes, schedule.power)
        comparisons = judge([cases[label] for label in open_labels if label in cases], level)
        still_open = []
        for comparison in comparisons:
            if comparison.open and not final and not comparison.case.is_control:
                still_open.append(comparison)
            else:
                decided[comparison.label] = comparison
        if not still_open:
            break
        open_labels = [comparison.label for comparison in still_open]
        wanted = max(comparison.rounds_needed or schedule.max_rounds for comparison in still_open)
        rounds_before, rounds = rounds, min(schedule.max_rounds, max(rounds + 1, wanted))
    return LooksOutcome(decided, rounds, looks)
