"""A case as a comparison makes it: what is measured at base, and at head (other names for a renamed kernel)."""

from __future__ import annotations

from dataclasses import dataclass

from ..results import asvsuite
from ..results.asvsuite import SuiteCase


@dataclass(frozen=True)
class Pair:
    """A case as the gate compares it: what is measured at base, and at head (other names for a renamed kernel)."""

    base: SuiteCase
    head: SuiteCase

    @property
    def label(self) -> str:
        if self.base == self.head:
            return self.head.label
        return f"{self.head.label} (was {self.base.kernel})"


def pairs_for(cases: list[SuiteCase], renamed: dict[str, str]) -> list[Pair]:
    """Each case, with the base name of a renamed kernel."""
    pairs = []
    for case in cases:
        old = renamed.get(case.kernel)
        if not old:
            pairs.append(Pair(case, case))
        elif case.benchmark == asvsuite.GEMM:
            pairs.append(Pair(SuiteCase.square(old, case.shape[0]), case))
        else:
            pairs.append(Pair(SuiteCase.sweep(old, case.shape), case))
    return pairs
