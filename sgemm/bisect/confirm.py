"""`sgemm confirm`: a second measurement of a step the history showed, its two sides timed paired in one process,
round by round (sgemm.bisect.compare), until the bad side's time over the good side's is DIFFERENT from 1 by more
than the threshold (the gate's paired 0.25% by default) or SAME within it, at the stated confidence; UNKNOWN when
the rounds allowed end first. Each answer is appended to the machine's confirmations file (sgemm.results.confirmations),
which the change-point detector reads before it calls a step a regression.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path

from ..results import confirmations
from .compare import Answer, CommitComparison, CompareSchedule, Region, compare
from .search import DEFAULT_SCHEDULE, RoundSource, now_iso
from .targets import Target


def already_decided(records: list[dict], target: Target) -> dict | None:
    """A record of this case and these ends whose verdict is SAME or DIFFERENT: nothing to measure again."""
    for record in records:
        if (record["case"], record["size"], record["good"], record["bad"]) == \
                (target.case, target.size, target.good, target.bad) and record["verdict"] != Answer.UNKNOWN.value:
            return record
    return None


def record(target: Target, outcome: CommitComparison, schedule: CompareSchedule, method: str) -> dict:
    low, high = outcome.interval
    return {"case": target.case, "size": target.size, "good": target.good, "bad": target.bad,
            "verdict": outcome.verdict.value, "ratio": round(outcome.ratio, 6), "interval": [round(low, 6),
                                                                                         round(high, 6)],
            "confidence": schedule.confidence, "method": method, "measured_at": now_iso()}


def confirm(target: Target, source: RoundSource, path: Path, threshold: float,
            schedule: CompareSchedule = DEFAULT_SCHEDULE, time_left: Callable[[], bool] = lambda: True,
            say: Callable[[str], None] = lambda text: print(f"sgemm confirm: {text}", file=sys.stderr)) -> dict | None:
    """Time the target's two ends and append the record; None, said, when its bad end cannot be timed or too few
    rounds were measured to give an interval. Unmeasurable for a build that cannot be timed."""
    outcome = compare(lambda: source.round(target.bad), [], Region.within(threshold), schedule, time_left)
    if not all(math.isfinite(v) for v in (outcome.ratio, *outcome.interval)):
        say(f"{target.label} {target.good[:12]}..{target.bad[:12]}: {outcome.why}; too few rounds for a record")
        return None
    made = record(target, outcome, schedule, source.method)
    confirmations.append(path, [made])
    say(f"{target.label} {target.good[:12]}..{target.bad[:12]}: {made['verdict']}, ratio {made['ratio']:.4f} "
        f"({made['interval'][0]:.4f}–{made['interval'][1]:.4f}); {outcome.why}")
    return made

