"""A gate's rounds, look by look: measure every case, judge, measure again only the cases still open, until each is
decided or the most rounds allowed are spent (sgemm.gate.verdict says how each look is judged).

Up to `max_rounds` every open case gets the rounds its look asks for. Past them, only where few cases are still open
(at most `few_open` of the family, and at least one): those go on, up to `extra_rounds` more, on a share of the
false-discovery rate kept for them from the start (`reserve`); where more are open, they end NOT POWERED there. A round
of a few cases is short, and a gate of hundreds of cases then ends with a verdict on each.

The whole noise file is checked once, at the first look, over every case's first rounds: at a later look the cases
still open are those whose rounds happened to spread most, and a check over them alone would find any file too
narrow.

Before the file is checked and before every look's verdicts, a paired case's outlier rounds are set aside
(sgemm.gate.verdict.without_outliers), and the case is timed a round more for each, up to REPLACED_AT_MOST: a look
counts the rounds kept, so that a disturbed process costs its case a round, not its verdict. The noise file is
learned with its outlier rounds set aside too (sgemm.gate.noise.learn_paired).

The measuring is given as a function, so that the same procedure runs on a GPU (the gate) and on simulated rounds
(tools/simulate/simulate_gates.py and the tests), and what the simulations show is what the gate does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from ..rounds.evidence import FALSE_DISCOVERY_RATE, MIN_ROUNDS, POWER, Case
from ..rounds.outliers import REPLACED_AT_MOST
from .verdict import (EXPECTED_CHANGES, Comparison, Level, Spending, finalised, judge, noise_contradicted,
    without_outliers)

# measure({label: rounds}): each of these cases with its rounds a side in all (the earlier rounds kept, a round being
# one process for every case that still needs one), or the cases it could not measure left out (the gate reports
# why).
Measure = Callable[[dict[str, int]], dict[str, Case]]

# Past max_rounds, for the few cases still open: a round of a few cases is short, and a case that an outlier round or
# an entry learned wide kept open at the ninth round needs many more rounds than the others to decide; with few it
# ended NOT POWERED (lab/2026-11-28-gate-outlier-rounds simulates whole gates at several counts).
EXTRA_ROUNDS = 30
# The share of the rate kept for those rounds: enough that a case whose spread sat just above what nine rounds needed
# decides within them, little enough that the first looks, which decide most cases, lose little.
RESERVE = 0.2
FEW_OPEN_SHARE = 0.05  # "few": at most this share of the family ...
FEW_OPEN_AT_LEAST = 4  # ... or this many, whichever is more


@dataclass(frozen=True)
class Schedule:
    rounds: int = MIN_ROUNDS  # before the first look
    max_rounds: int = 9
    rate: float = FALSE_DISCOVERY_RATE
    expected_changes: int = EXPECTED_CHANGES
    power: float = POWER
    extra_rounds: int = EXTRA_ROUNDS
    reserve: float = RESERVE

    @property
    def spending(self) -> Spending:
        extra = self.extra_rounds if self.extra_rounds > 0 else 0
        return Spending(self.rate, self.max_rounds, extra, self.reserve if extra else 0.0)

    def few_open(self, family: int) -> int:
        """How many open cases may go on past max_rounds."""
        return max(FEW_OPEN_AT_LEAST, math.floor(FEW_OPEN_SHARE * family)) if self.extra_rounds > 0 else 0


@dataclass
class LooksOutcome:
    comparisons: dict[str, Comparison]  # by label, each as decided at its last look
    rounds: int  # the most rounds a side any case got, outliers set aside counted
    looks: int
    extended: int = 0  # cases that went on past max_rounds


def run_looks(labels: list[str], measure: Measure, schedule: Schedule = Schedule(),
              controls: frozenset[str] = frozenset(),
              on_look: Callable[[list[Comparison]], None] | None = None) -> LooksOutcome:
    """Every case decided, or undecided at the most rounds allowed. Controls are measured with the first look alone
    and judged as context. `on_look` is told, after each look that leaves cases open, how they stand: the gate gives
    each its time in the rounds to come by it."""
    family = len([label for label in labels if label not in controls])
    spending = schedule.spending
    horizon = schedule.max_rounds + spending.extra_rounds
    decided: dict[str, Comparison] = {}
    open_labels, rounds, rounds_before, looks, extended, most = list(labels), schedule.rounds, 0, 0, 0, 0
    replaced: dict[str, int] = {}  # rounds a case is timed past the look's count, in the place of its outliers
    asked: dict[str, int] = {}  # never fewer than before: a round measured is never dropped
    file_note = None
    while open_labels:
        asked = {label: max(asked.get(label, 0), rounds + replaced.get(label, 0)) for label in open_labels}
        cases = measure(asked)
        most = max(most, *asked.values())
        if file_note:
            cases = _without_noise(cases)
        spreads = _spreads(cases)
        if not looks and (file_note := noise_contradicted(list(spreads.values()))):
            cases = _without_noise(cases)
            spreads = _spreads(cases)
        present = [without_outliers(cases[label]) for label in open_labels if label in cases]
        looks += 1
        past_main = rounds >= schedule.max_rounds
        level = Level(spending.alpha(rounds, rounds_before), family, horizon if past_main else schedule.max_rounds,
                      rounds_before, final=rounds >= horizon, expected_changes=schedule.expected_changes,
                      power=schedule.power, spending=spending)
        still_open = []
        for comparison in judge(present, level, file_note):
            if comparison.open and not comparison.case.is_control:
                still_open.append(comparison)
            else:
                decided[comparison.label] = finalised(comparison)
        if still_open and past_main and (rounds >= horizon or len(still_open) > schedule.few_open(family)):
            decided.update((c.label, finalised(c)) for c in still_open)
            still_open = []
        if not still_open:
            break
        if past_main and rounds_before < schedule.max_rounds:
            extended = len(still_open)
        if on_look:
            on_look(still_open)
        open_labels = [comparison.label for comparison in still_open]
        seen = {c.label: max(c.case.outliers, spreads[c.label].outliers) for c in still_open}
        replaced = {label: min(count, REPLACED_AT_MOST) for label, count in seen.items()}
        # The next look comes when the first open case could decide: a case whose outlier waits for its
        # replacement round could decide at the next round, whatever its spread with the outlier in says.
        wanted = min(rounds + 1 if seen[c.label] > c.case.outliers else c.rounds_needed or level.max_rounds
                     for c in still_open)
        rounds_before, rounds = rounds, min(level.max_rounds, max(rounds + 1, wanted))
    return LooksOutcome(decided, most, looks, extended)


def _spreads(cases: dict[str, Case]) -> dict[str, Case]:
    """The cases less what a spread alone may set aside (of three rounds, one): for the whole file's check, and for
    the rounds a case whose verdict could not yet set its outlier aside is to be timed in its place."""
    return {label: without_outliers(case, keep_at_least=2) for label, case in cases.items()}


def _without_noise(cases: dict[str, Case]) -> dict[str, Case]:
    """The cases judged with no noise file: one set aside tells no outlier either."""
    return {label: replace(case, noise=None) for label, case in cases.items()}
