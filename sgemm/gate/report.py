"""The gate's report: Markdown with the verdict, how each case was measured, and every case's figures and why."""

from __future__ import annotations

import math

from ..rounds.evidence import FALSE_DISCOVERY_RATE, POWER
from ..rounds.session import round_settings
from .run import EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED, GateResult
from .verdict import Comparison, Verdict

_ORDER = {Verdict.REGRESSION: 0, Verdict.AMBIGUOUS: 1, Verdict.NOT_POWERED: 2, Verdict.IMPROVEMENT: 3,
          Verdict.SAME: 4}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs" if math.isfinite(seconds) else "-"


def _spread(values: list[float], unit: str, digits: int = 0) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "not recorded"
    low, high = min(values), max(values)
    return f"{low:.{digits}f} {unit}" if round(low, digits) == round(high, digits) else \
        f"{low:.{digits}f}–{high:.{digits}f} {unit}"


def _table_text(text: str) -> str:
    """A cell's text with nothing that would end the cell or the row."""
    return " ".join(text.replace("|", "/").split())


def _sides(c: Comparison) -> tuple[float, float, float, float]:
    """Median time and SM clock at base and head."""
    if c.case.paired:
        p = c.case.paired
        return (_median(p.base_s), _median(p.head_s), _median(p.base_clocks_mhz), _median(p.head_clocks_mhz))
    return c.case.before.median_s, c.case.after.median_s, c.case.before.sm_clock_mhz, c.case.after.sm_clock_mhz


def _median(values) -> float:
    values = sorted(v for v in values if not math.isnan(v))
    if not values:
        return math.nan
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _measured(result: GateResult) -> str:
    selection = result.selection
    if selection.everything and result.launches_compared:
        return (f"every kernel ({selection.everything}); each case's launch described by base's and by head's own "
                f"code: {_count(result.launches_compared, 'case')}, of which {len(result.unchanged)} launch as before "
                f"(SAME untimed), {len(result.unpaired_cases)} changed so that only their own code can measure them "
                f"(unpaired)")
    if selection.everything:
        return f"every kernel ({selection.everything})"
    if not selection.kernels:
        return "nothing: the change touches no kernel and no measurement code"
    changed = [f"`{name}` ({why})" for name, why in selection.reasons.items() if name not in selection.controls]
    controls = [f"`{name}`" for name in selection.controls]
    return (", ".join(changed) or "no kernel changed") + ("; cuBLAS controls: " + ", ".join(controls)
                                                          if controls else "")


def _count(number: int, thing: str, things: str = "") -> str:
    return f"{number} {thing if number == 1 else things or thing + 's'}"


def _method(result: GateResult) -> str:
    settings = result.settings
    timed = result.comparisons
    paired = sum(1 for c in timed if c.case.paired)
    if not timed:
        return "nothing timed"
    ways = []
    if paired:
        ways.append(f"**paired** ({_count(paired, 'case')}): each round one process holding the base and the head "
                    f"build of every case, timed in alternating blocks, L2 {_l2(settings)}")
    if len(timed) > paired:
        why = (f"because {result.unpaired_because}" if result.unpaired_because else
               "because their launch changed (each case's reason below)")
        ways.append(f"**unpaired** ({_count(len(timed) - paired, 'case')}), {why}: each commit measured by its own "
                    f"code, one asv process per commit and round; a difference at the power cap is AMBIGUOUS, never "
                    f"a regression")
    processes = _count(result.processes, "process", "processes")
    if cards := sorted(set(result.cards.values())):
        ways.append(f"spread over {len(cards)} GPUs ({', '.join(map(str, cards))}) by cost, each case's rounds on one "
                    "card, the whole gate judged as one family")
    past = f"; the few still open then up to {settings.extra_rounds} more" if settings.extra_rounds else ""
    return "; ".join(ways) + (f"; {result.rounds} rounds in {processes} (at least {settings.rounds}, open cases more, "
                              f"up to {settings.max_rounds}{past})")


def _l2(settings) -> str:
    return "flushed before every launch" if round_settings(settings.l2).flush_l2 else "warm (--l2 warm)"


def markdown(result: GateResult, gpu_line: str) -> str:
    settings = result.settings
    judged = result.judged
    verdicts = [c.verdict for c in judged]
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in Verdict if verdicts.count(v))
    if result.unchanged:
        counts = (counts + ", " if counts else "") + f"{len(result.unchanged)} SAME untimed"
    headline = {EXIT_PASS: "PASS", EXIT_REGRESSION: "FAIL: a kernel got slower",
                EXIT_UNDECIDED: "UNDECIDED: the gate could not tell"}[result.exit_status]
    thresholds = (f"{settings.threshold:.2%}" if settings.threshold is not None else
                  "0.25% paired, 2% unpaired (the defaults)")
    lines = [
        f"## GEMM gate: {headline}",
        "",
        f"- Base `{result.base[:12]}` → head `{result.head[:12]}`; {counts or 'no case judged'}"
        + (f"; {result.wall_s:.0f} s" if result.wall_s else ""),
        f"- GPU: {gpu_line} (asv machine `{result.machine}`)",
        f"- Measured: {_measured(result)}",
        f"- How: {_method(result)}" + (f"; resumed: {result.resumed}" if result.resumed else ""),
        f"- Threshold: {thresholds}" + "".join(f", `{p}` {v:.2%}" for p, v in settings.patterns)
        + (f"; noise of unchanged code known for {sum(1 for c in result.comparisons if c.case.noise)} cases"
           if settings.noise else "") + (f"; {settings.noise_note}" if settings.noise_note else ""),
    ]
    if result.comparisons:
        sides = [_sides(c) for c in result.comparisons]
        lines.append(f"- SM clock (median per case): base {_spread([s[2] for s in sides], 'MHz')}, "
                     f"head {_spread([s[3] for s in sides], 'MHz')}")
    selection = result.selection
    if selection.renamed:
        lines.append("- Renamed (compared with the old name at base): "
                     + ", ".join(f"`{old}` → `{new}`" for new, old in selection.renamed.items()))
    if selection.retired:
        lines.append("- Retired at head: " + ", ".join(f"`{name}` ({why})" for name, why in selection.retired.items()))
    lines += [f"- **Not measured, not declared:** {message}" for message in selection.undeclared]
    lines += [f"- **The GPU was not the gate's alone:** {message}" for message in result.shared_gpu]
    lines += [f"- **Could not decide:** {problem}" for problem in result.problems]
    lines += [f"- **Environment change** (not the code): {note}" for note in result.environment]
    lines += [f"- Unpaired, {label}: {why}" for label, why in result.unpaired_cases.items()]
    controls = [c for c in result.comparisons if c.case.is_control]
    if controls:
        lines.append("- cuBLAS controls (context: how far the box moved between the sides' processes; no kernel is "
                     "judged over them): " + ", ".join(f"{c.label} {c.ratio:.3f}x"
                                                        for c in sorted(controls, key=lambda c: c.label)))
    lines += ["", "| case | base | head | ratio | interval | q | detectable | rounds | SM clock base → head | "
              "at equal clock | verdict | why |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in sorted(judged, key=lambda c: (_ORDER[c.verdict], c.label)):
        before, after, clock_before, clock_after = _sides(c)
        verdict = f"**{c.verdict.value}**" if c.verdict is not Verdict.SAME else c.verdict.value
        low, high = c.interval
        equal_clock = f"{c.ratio_at_equal_clock:.4f}" if c.cycles else "-"
        lines.append(f"| {c.label} | {_us(before)} | {_us(after)} | {c.ratio:.4f} | {low:.4f}–{high:.4f} | "
                     f"{c.q_value:.2g} | {c.detectable:.2%} | {c.case.rounds} | {clock_before:.0f} → "
                     f"{clock_after:.0f} MHz | {equal_clock} | {verdict} | {_table_text(c.why)} |")
    for label, why in result.unchanged.items():
        lines.append(f"| {label} | | | | | | | 0 | | | SAME | untimed: {_table_text(why)} |")
    for label, why in result.failed.items():
        lines.append(f"| {label} | | | | | | | | | | **ERROR** | {_table_text(why)} |")
    if result.not_compared:
        lines += ["", "Not compared: " + "; ".join(f"{label} ({why})" for label, why in result.not_compared.items())]
    lines += ["", "Ratio: head over base (above 1 is slower), the geometric mean of the rounds' ratios. Paired, a "
              "round's ratio is the trimmed mean over pairs of blocks of launches (A B B A, B A A B) inside one "
              f"process, L2 {_l2(settings)}, the launches of a block back to back (a kernel that reaches the "
              "power cap runs at the clock the cap allows, the SM clock column; a change that adds only memory "
              "traffic may cost little or no time at the cap: docs/gate.md); unpaired, "
              "it is the ratio of the two sides' round medians. The test is a t-test on the logarithms of the "
              "rounds' figures, Benjamini-Hochberg over the gate's cases (q), the false-discovery rate "
              f"{FALSE_DISCOVERY_RATE:.0%} spent across the looks. Interval: false-coverage-rate adjusted. "
              f"Detectable: the smallest change the test finds {POWER:.0%} of the time at the family's level, for "
              "planning the rounds; the verdict is judged at the threshold. At equal clock (unpaired): the ratio in "
              "SM cycles (time x the median clock of each round).", ""]
    return "\n".join(lines)
