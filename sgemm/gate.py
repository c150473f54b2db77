"""The pull-request gate: measure what a change can affect at both commits and judge each case at equal SM clock.

asv does the running: `asv continuous` builds each commit in its own virtualenv and measures the two commits in
interleaved rounds, with every sample recorded, under a configuration and results directory of the gate's own
(`.asv/gate` by default), so that a pull request's runs never enter the published history. The gate then reads
what asv recorded, judges every case (sgemm.verdict), measures the AMBIGUOUS ones once more, and writes a Markdown
report.

Exit status: 0 no regression; 1 at least one REGRESSION; 2 the gate could not decide (asv or a benchmark failed,
nothing could be measured here, a case stayed AMBIGUOUS after being measured again, or a cuBLAS control got
slower, so that the box rather than the change may have moved).
"""

from __future__ import annotations

import ast
import itertools
import math
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .asvconf import write_asv_config
from .changes import Selection
from .verdict import Comparison, Side, Verdict, compare, threshold_for

# The methods a verdict needs; the other tracks (TFLOP/s, temperature) are not run by the gate.
GATE_METHODS = ("track_time", "track_sm_clock", "track_throttled", "track_power")
EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2


class GateError(RuntimeError):
    """The gate cannot run or cannot read what asv recorded: exit 2, with this message."""


@dataclass(frozen=True)
class CaseKey:
    """One case of the suite: a benchmark class and one of its parameter combinations."""

    benchmark: str  # "Gemm" or "GemmShapes"
    params: tuple  # Python values, e.g. ("float4", 4096, "fp32")

    @property
    def kernel(self) -> str:
        if self.benchmark == "Gemm":
            family, _, precision = self.params
            return f"{precision}/{family}"
        return self.params[0]

    @property
    def label(self) -> str:
        """The case as the report names it: the kernel's name, then its shape."""
        if self.benchmark == "Gemm":
            size = self.params[1]
            return f"{self.kernel} {size}x{size}x{size}"
        return f"{self.kernel} {self.params[1]} (shape sweep)"

    def pattern(self, methods: tuple[str, ...] = GATE_METHODS) -> str:
        """asv's -b regular expression selecting exactly this case (asv matches `name(param, ...)`)."""
        arguments = ", ".join(repr(value) for value in self.params)
        return rf"^bench_gemm\.{self.benchmark}\.({'|'.join(methods)})\({re.escape(arguments)}\)$"


def cases_for(kernels: tuple[str, ...], sizes: list[int], sweep_kernels: list[str],
              sweep_shapes: list[tuple[int, int, int]], controls: tuple[str, ...] = ()) -> list[CaseKey]:
    """Every case of the suite that measures one of these kernels; the controls at the square sizes only.

    A control says whether the box moved between the two commits' runs: its square sizes show that, and measuring
    it again across the shape sweep would lengthen every gate for no further evidence.
    """
    cases = []
    for name in kernels:
        precision, family = name.split("/", 1)
        cases += [CaseKey("Gemm", (family, size, precision)) for size in sizes]
        if name in sweep_kernels and name not in controls:
            cases += [CaseKey("GemmShapes", (name, "x".join(map(str, shape)))) for shape in sweep_shapes]
    return cases


@dataclass
class Outcome:
    """What asv recorded for the cases at the two commits."""

    sides: dict[CaseKey, tuple[Side, Side]] = field(default_factory=dict)
    failed: dict[CaseKey, str] = field(default_factory=dict)  # the case cannot be judged, and why
    not_compared: dict[CaseKey, str] = field(default_factory=dict)  # skipped on a side (not an error), and why


def run_continuous(config: Path, machine: str, base: str, head: str, cases: list[CaseKey], rounds: int,
                   repo: Path) -> int:
    """`asv continuous` over exactly these cases; its output goes to stderr. Returns asv's exit status.

    `--no-stats`: asv's own comparison table would run its Mann-Whitney test on every recorded sample, which is
    quadratic (NVBench records ~55,000 samples a round of a 9 us kernel: hours per case). The verdict runs the same
    test on a thinned set of them instead (sgemm.verdict).
    """
    command = [sys.executable, "-m", "asv", "continuous", "--config", str(config), "--machine", machine,
               "--interleave-rounds", "--attribute", f"rounds={rounds}", "--record-samples", "--show-stderr",
               "--no-stats"]
    for case in cases:
        command += ["--bench", case.pattern()]
    print(f"sgemm gate: asv continuous over {len(cases)} cases x {len(GATE_METHODS)} tracks, {rounds} rounds",
          file=sys.stderr)
    # asv turns ASV_PYTHONPATH into PYTHONPATH for a virtualenv's processes, and its benchmark runner then removes
    # those paths from sys.path, even where the environment's .pth file (SGEMM_CUDA_SITE) had put them.
    env = {key: value for key, value in os.environ.items() if key != "ASV_PYTHONPATH"}
    return subprocess.run([*command, base, head], cwd=repo, env=env, stdout=sys.stderr).returncode


def _results_at(results_dir: Path, machine: str, commit: str):
    from asv.results import iter_results_for_machine_and_hash

    runs = list(iter_results_for_machine_and_hash(str(results_dir), machine, commit))
    if not runs:
        raise GateError(f"asv recorded nothing for commit {commit[:12]} on machine {machine!r} in {results_dir}")
    return runs[0]


def _value(run, method: str, case: CaseKey):
    """(value, samples, stats) of one method of one case; None value: failed, NaN: skipped or not run."""
    name = f"bench_gemm.{case.benchmark}.{method}"
    if name not in run.get_all_result_keys():
        return math.nan, None, None
    params = run.get_result_params(name)
    combos = [tuple(ast.literal_eval(v) for v in combo) for combo in itertools.product(*params)]
    if case.params not in combos:
        return math.nan, None, None
    index = combos.index(case.params)
    return (run.get_result_value(name, params)[index], run.get_result_samples(name, params)[index],
            run.get_result_stats(name, params)[index])


def _side(run, case: CaseKey) -> Side | str:
    """The case as recorded at one commit, or why it has no time there ('failed: ...' or 'skipped')."""
    time, samples, stats = _value(run, "track_time", case)
    if time is None:
        return "failed: the benchmark raised (see asv's output above)"
    if isinstance(time, float) and math.isnan(time):
        return "skipped"
    if not samples:
        return "failed: no samples recorded"
    clock, clock_samples, _ = _value(run, "track_sm_clock", case)
    throttled, throttled_samples, _ = _value(run, "track_throttled", case)
    power, _, _ = _value(run, "track_power", case)

    def number(value) -> float:
        return math.nan if value is None else float(value)

    if throttled_samples:
        throttled = sum(throttled_samples)
    return Side(list(samples), stats, number(clock), number(throttled), number(power))


def read_outcome(results_dir: Path, machine: str, base: str, head: str, cases: list[CaseKey]) -> Outcome:
    before_run, after_run = _results_at(results_dir, machine, base), _results_at(results_dir, machine, head)
    outcome = Outcome()
    for case in cases:
        before, after = _side(before_run, case), _side(after_run, case)
        if isinstance(before, Side) and isinstance(after, Side):
            outcome.sides[case] = (before, after)
        elif any(isinstance(side, str) and side.startswith("failed") for side in (before, after)):
            outcome.failed[case] = f"base: {before if isinstance(before, str) else 'ok'}; " \
                                   f"head: {after if isinstance(after, str) else 'ok'}"
        elif before == after == "skipped":
            outcome.not_compared[case] = "skipped at both commits (shape or GPU not supported)"
        else:
            outcome.not_compared[case] = "new at head" if before == "skipped" else "skipped at head"
    return outcome


@dataclass
class GateResult:
    base: str
    head: str
    machine: str
    selection: Selection
    rounds: int
    comparisons: list[Comparison]
    outcome: Outcome
    remeasured: list[str]
    problems: list[str]  # why the gate could not decide, beyond the cases themselves

    @property
    def moved_controls(self) -> list[Comparison]:
        """Control cases (cuBLAS, which no change can touch) that read slower at head: the box moved."""
        return [c for c in self.comparisons
                if c.verdict is Verdict.REGRESSION and _kernel(c) in self.selection.controls]

    @property
    def exit_status(self) -> int:
        verdicts = {c.verdict for c in self.comparisons}
        # A kernel's regression counts unless its precision's control slowed too: then the box, not the change,
        # may have moved, and the gate cannot tell which.
        moved = {_precision(c) for c in self.moved_controls}
        if any(c.verdict is Verdict.REGRESSION and _precision(c) not in moved for c in self.comparisons):
            return EXIT_REGRESSION
        if moved:
            return EXIT_UNDECIDED
        if Verdict.AMBIGUOUS in verdicts or self.outcome.failed or self.problems or not self.comparisons:
            return EXIT_UNDECIDED
        return EXIT_PASS


def _kernel(comparison: Comparison) -> str:
    return comparison.case.split(" ", 1)[0]  # a case's label starts with its kernel's name (CaseKey.label)


def _precision(comparison: Comparison) -> str:
    return _kernel(comparison).split("/", 1)[0]


def judge(outcome: Outcome, default_threshold: float, patterns: list[tuple[str, float]]) -> list[Comparison]:
    return [compare(case.label, before, after, threshold_for(case.kernel, default_threshold, patterns))
            for case, (before, after) in outcome.sides.items()]


def run_gate(repo: Path, base: str, head: str, selection: Selection, cases: list[CaseKey], machine: str,
             work_dir: Path, rounds: int, threshold: float, patterns: list[tuple[str, float]]) -> GateResult:
    work_dir.mkdir(parents=True, exist_ok=True)
    results_dir = work_dir / "results"
    shutil.rmtree(results_dir, ignore_errors=True)  # only this run's figures are judged
    config = write_asv_config(repo, work_dir / "asv.conf.json", env_dir=work_dir / "env",
                              results_dir=results_dir, html_dir=work_dir / "html")
    problems = []
    status = run_continuous(config, machine, base, head, cases, rounds, repo)
    try:
        outcome = read_outcome(results_dir, machine, base, head, cases)
    except GateError as exc:
        return GateResult(base, head, machine, selection, rounds, [], Outcome(), [],
                          [f"{exc} (asv continuous exited {status})"])
    comparisons = judge(outcome, threshold, patterns)
    ambiguous = [case for case, c in zip(outcome.sides, comparisons) if c.verdict is Verdict.AMBIGUOUS]
    remeasured = []
    if ambiguous:
        print(f"sgemm gate: {len(ambiguous)} AMBIGUOUS, measuring them once more", file=sys.stderr)
        run_continuous(config, machine, base, head, ambiguous, rounds, repo)
        again = read_outcome(results_dir, machine, base, head, ambiguous)
        outcome.sides.update(again.sides)
        outcome.failed.update(again.failed)
        for case in again.failed:
            outcome.sides.pop(case, None)
        comparisons = judge(outcome, threshold, patterns)
        remeasured = [case.label for case in ambiguous]
    if status not in (0, 1) and not outcome.failed:
        problems.append(f"asv continuous exited {status}")
    return GateResult(base, head, machine, selection, rounds, comparisons, outcome, remeasured, problems)


_ORDER = {Verdict.REGRESSION: 0, Verdict.AMBIGUOUS: 1, Verdict.IMPROVEMENT: 2, Verdict.SAME: 3}


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def _spread(values: list[float], unit: str, digits: int = 0) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "not recorded"
    low, high = min(values), max(values)
    return f"{low:.{digits}f} {unit}" if round(low, digits) == round(high, digits) else \
        f"{low:.{digits}f}–{high:.{digits}f} {unit}"


def markdown(result: GateResult, gpu_line: str, threshold: float, patterns: list[tuple[str, float]]) -> str:
    verdicts = [c.verdict for c in result.comparisons]
    status = result.exit_status
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in Verdict if verdicts.count(v))
    headline = {EXIT_PASS: "PASS", EXIT_REGRESSION: "FAIL: a kernel got slower",
                EXIT_UNDECIDED: "UNDECIDED: the gate could not tell"}[status]
    selection = result.selection
    if selection.everything:
        measured = f"every kernel ({selection.everything})"
    else:
        changed = [f"`{name}` ({why})" for name, why in selection.reasons.items() if name not in selection.controls]
        controls = [f"`{name}`" for name in selection.controls]
        measured = (", ".join(changed) or "no kernel changed") + "; controls: " + (", ".join(controls) or "none")
    befores = [pair[0] for pair in result.outcome.sides.values()]
    afters = [pair[1] for pair in result.outcome.sides.values()]
    lines = [
        f"## GEMM gate: {headline}",
        "",
        f"- Base `{result.base[:12]}` → head `{result.head[:12]}`; {counts or 'no case compared'}",
        f"- GPU: {gpu_line} (asv machine `{result.machine}`)",
        f"- Measured: {measured}",
        f"- asv continuous, {result.rounds} interleaved rounds per commit, NVBench samples recorded; threshold "
        f"{threshold:.0%}" + "".join(f", `{p}` {v:.0%}" for p, v in patterns),
        f"- SM clock (median per case): base {_spread([s.sm_clock_mhz for s in befores], 'MHz')}, "
        f"head {_spread([s.sm_clock_mhz for s in afters], 'MHz')}",
        f"- Power (mean per case): base {_spread([s.power_w for s in befores], 'W')}, "
        f"head {_spread([s.power_w for s in afters], 'W')}; clocks held down by the driver (power or thermal): "
        f"base {_spread([s.throttled_ms for s in befores], 'ms', 1)}, "
        f"head {_spread([s.throttled_ms for s in afters], 'ms', 1)} per case",
    ]
    if result.remeasured:
        lines.append(f"- Measured again after an AMBIGUOUS verdict: {', '.join(result.remeasured)}")
    if selection.removed:
        lines.append(f"- Removed at head (nothing to compare): {', '.join(selection.removed)}")
    for problem in result.problems:
        lines.append(f"- **Could not decide:** {problem}")
    for control in result.moved_controls:
        lines.append(f"- **The box moved:** the control {control.case} reads {control.ratio:.3f}x the base's time, "
                     f"though no change can touch it: {_precision(control).upper()} regressions are not "
                     "attributed to the change")
    lines += ["", "| case | before | after | ratio | SM clock before → after | ratio at equal clock | verdict | why |",
              "|---|---:|---:|---:|---:|---:|---|---|"]
    for c in sorted(result.comparisons, key=lambda c: (_ORDER[c.verdict], c.case)):
        verdict = f"**{c.verdict.value}**" if c.verdict is not Verdict.SAME else c.verdict.value
        lines.append(f"| {c.case} | {_us(c.before.median_s)} | {_us(c.after.median_s)} | {c.ratio:.3f} | "
                     f"{c.before.sm_clock_mhz:.0f} → {c.after.sm_clock_mhz:.0f} MHz | {c.ratio_at_equal_clock:.3f} | "
                     f"{verdict} | {c.why} |")
    for case, why in result.outcome.failed.items():
        lines.append(f"| {case.label} | | | | | | **ERROR** | {why} |")
    if result.outcome.not_compared:
        lines += ["", "Not compared: " + "; ".join(f"{case.label} ({why})"
                                                   for case, why in result.outcome.not_compared.items())]
    lines += ["", "Ratio: median time at head / at base (above 1 is slower). At equal clock: the same ratio in SM "
              "cycles (time x median SM clock of each side). REGRESSION and IMPROVEMENT need asv's significance "
              "test, the threshold in time, and the threshold at equal clock; when time and clock disagree the case "
              "is measured again, then AMBIGUOUS.", ""]
    return "\n".join(lines)


def publish_report(text: str, path: Path | None) -> None:
    """Write the report to `path` and append it to the GitHub Actions job summary when there is one."""
    if path:
        path.write_text(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as out:
            out.write(text + "\n")
