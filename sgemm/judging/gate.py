"""The pull-request gate: measure what a change can affect at both commits, round by round, and judge every case.

asv does the running: `asv continuous` builds each commit in its own virtualenv and measures the two commits in
interleaved rounds (one process per case, method and round), under a configuration and results directory of the
gate's own (`.asv/gate` by default), so that a pull request's runs never enter the published history. The gate reads
each round's figures back (sgemm.asvsuite), judges the cases together (sgemm.judging.verdict), measures the cases whose
verdict is still open in more rounds, up to a cap, and writes a Markdown report.

The GPU must be the gate's alone: before every asv call the gate waits a bounded time for other processes to leave
it, and every benchmark process refuses to measure while another is there.

Exit status: 0 no regression; 1 at least one REGRESSION; 2 the gate could not decide: the GPU was shared, asv or a
benchmark failed, a case stayed AMBIGUOUS, a kernel came or went undeclared, or the gate itself failed.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import asvsuite
from ..asvconf import write_asv_config
from ..asvsuite import SuiteCase
from ..measuring.record import EVENTS_VARIABLE, NVBENCH_ARGS_VARIABLE
from .changes import Selection
from .verdict import (FALSE_DISCOVERY_RATE, MIN_ROUNDS, POWER, Case, Comparison, Noise, Rounds, Verdict, judge,
                      threshold_for)

EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2
DEFAULT_ROUNDS = MIN_ROUNDS
DEFAULT_MAX_ROUNDS = 9
IDLE_TIMEOUT_S = 30  # how long the gate waits for another process to leave the GPU before it gives up
# NVBench's stopping rule for a gate's rounds: its evidence is the spread between rounds, and a round's median needs
# a hundred samples or so, not the default half second each and a noise target that a 9 us kernel may chase for 15 s.
NVBENCH_ARGS = ("--min-time", "0.1", "--max-noise", "5", "--timeout", "5")


class GateError(RuntimeError):
    """The gate cannot run or cannot read what asv recorded: exit 2, with this message."""


@dataclass(frozen=True)
class Settings:
    """How the gate measures and judges."""

    threshold: float = 0.02
    patterns: tuple[tuple[str, float], ...] = ()
    rounds: int = DEFAULT_ROUNDS  # per commit, interleaved, in the first measurement
    max_rounds: int = DEFAULT_MAX_ROUNDS  # per commit, for cases whose verdict is still open
    noise: dict[str, Noise] = field(default_factory=dict)  # case label -> between-round noise of unchanged code
    idle_timeout_s: float = IDLE_TIMEOUT_S
    nvbench_args: tuple[str, ...] = NVBENCH_ARGS


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


@dataclass
class Outcome:
    """What asv recorded of the cases at the two commits."""

    sides: dict[Pair, tuple[Rounds, Rounds]] = field(default_factory=dict)
    failed: dict[Pair, str] = field(default_factory=dict)  # the case cannot be judged, and why
    not_compared: dict[Pair, str] = field(default_factory=dict)  # skipped on a side (not an error), and why
    shared_gpu: list[str] = field(default_factory=list)  # a benchmark found another process on the GPU


def run_continuous(config: Path, machine: str, base: str, head: str, cases: list[SuiteCase], rounds: int,
                   repo: Path, events: Path, append: bool, nvbench_args: tuple[str, ...] = NVBENCH_ARGS) -> int:
    """`asv continuous` over exactly these cases; its output goes to stderr. Returns asv's exit status.

    `--no-stats`: asv's own comparison table would test pooled samples, which is both the wrong unit
    (sgemm.judging.verdict) and quadratic in them. `--append-samples` on a later call adds rounds to those already
    recorded.
    """
    command = [sys.executable, "-m", "asv", "continuous", "--config", str(config), "--machine", machine,
               "--interleave-rounds", "--attribute", f"rounds={rounds}", "--record-samples", "--show-stderr",
               "--no-stats"]
    if append:
        command.append("--append-samples")
    for case in cases:
        command += ["--bench", case.pattern()]
    print(f"sgemm gate: asv continuous over {len(cases)} cases x {len(asvsuite.GATE_TRACKS)} tracks, "
          f"{rounds} rounds per commit", file=sys.stderr)
    # asv turns ASV_PYTHONPATH into PYTHONPATH for a virtualenv's processes, and its benchmark runner then removes
    # those paths from sys.path, even where the environment's .pth file (SGEMM_CUDA_SITE) had put them.
    env = {key: value for key, value in os.environ.items() if key != "ASV_PYTHONPATH"}
    env[EVENTS_VARIABLE] = str(events)  # why a case failed or was skipped
    env[NVBENCH_ARGS_VARIABLE] = shlex.join(nvbench_args)
    return subprocess.run([*command, base, head], cwd=repo, env=env, stdout=sys.stderr).returncode


def _reader(results_dir: Path, machine: str, commit: str) -> asvsuite.RunReader:
    runs = asvsuite.runs(results_dir, machine, commit)
    if not runs:
        raise GateError(f"asv recorded nothing for commit {commit[:12]} on machine {machine!r} in {results_dir}")
    return runs[-1]


def _number(value) -> float:
    return math.nan if value is None else float(value)


def read_rounds(run: asvsuite.RunReader, case: SuiteCase) -> Rounds | str:
    """The case's rounds as recorded at one commit, or why there are none ('failed: ...' or 'skipped')."""
    value = run.value(case, asvsuite.ROUND_TIME)
    if value is None:
        return "failed"
    if isinstance(value, float) and math.isnan(value):
        return "skipped"
    medians = run.samples(case, asvsuite.ROUND_TIME)
    if not medians:
        return "failed: no round recorded (asv ran without --record-samples?)"
    clocks = run.samples(case, asvsuite.ROUND_SM_CLOCK) or []
    counts = run.samples(case, asvsuite.ROUND_SAMPLES) or []
    cards = run.samples(case, asvsuite.CARD) or []
    throttled = run.samples(case, asvsuite.THROTTLED)
    return Rounds(tuple(medians), tuple(clocks), tuple(int(c) for c in counts),
                  sum(throttled) if throttled else _number(run.value(case, asvsuite.THROTTLED)),
                  _number(run.value(case, asvsuite.POWER)), tuple(f"{int(c):06x}" for c in cards))


def read_events(path: Path) -> list[dict]:
    """What the benchmark processes said about cases they could not measure (sgemm.measuring.record.record_event)."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a killed process: the rest still count
    return events


def _case_id(case: SuiteCase) -> str:
    m, n, k = case.shape
    return f"{case.kernel}/{m}x{n}x{k}"  # sgemm.measuring.record.Case.id


def read_outcome(results_dir: Path, machine: str, base: str, head: str, pairs: list[Pair],
                 events: list[dict]) -> Outcome:
    before_run, after_run = _reader(results_dir, machine, base), _reader(results_dir, machine, head)
    reasons = {(e.get("commit"), e.get("case")): e.get("reason", "") for e in events}
    outcome = Outcome(shared_gpu=sorted({e["reason"] for e in events if e.get("kind") == "gpu shared"}))
    for pair in pairs:
        before, after = read_rounds(before_run, pair.base), read_rounds(after_run, pair.head)
        if isinstance(before, Rounds) and isinstance(after, Rounds):
            outcome.sides[pair] = (before, after)
            continue
        failures = []
        for side, commit, case, figures in (("base", base, pair.base, before), ("head", head, pair.head, after)):
            if isinstance(figures, str) and figures.startswith("failed"):
                why = reasons.get((commit, _case_id(case))) or figures.partition(": ")[2] or \
                    "the benchmark raised; no reason was recorded"
                failures.append(f"{side}: {why}")
        if failures:
            outcome.failed[pair] = "; ".join(failures)
        elif before == after == "skipped":
            outcome.not_compared[pair] = "skipped at both commits (shape or GPU not supported)"
        else:
            outcome.not_compared[pair] = "new at head" if before == "skipped" else "skipped at head"
    return outcome


@dataclass
class GateResult:
    base: str
    head: str
    machine: str
    selection: Selection
    settings: Settings
    comparisons: list[Comparison]
    outcome: Outcome
    rounds_run: int  # per commit, the most any case got
    problems: list[str]  # why the gate could not decide, beyond the cases themselves
    wall_s: float = 0.0

    @property
    def judged(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.case.is_control]

    @property
    def exit_status(self) -> int:
        if self.outcome.shared_gpu:
            return EXIT_UNDECIDED  # nothing measured beside another process can be believed, not even a slowdown
        if any(c.verdict is Verdict.REGRESSION for c in self.judged):
            return EXIT_REGRESSION
        if self.problems or self.outcome.failed or self.selection.undeclared:
            return EXIT_UNDECIDED
        if any(c.verdict is Verdict.AMBIGUOUS for c in self.judged):
            return EXIT_UNDECIDED
        return EXIT_PASS


def _cases_to_judge(outcome: Outcome, selection: Selection, settings: Settings) -> list[Case]:
    controls: dict[str, list[str]] = {}  # precision -> the labels of its control cases
    for pair in outcome.sides:
        if pair.head.kernel in selection.controls:
            controls.setdefault(pair.head.precision, []).append(pair.head.label)
    cases = []
    for pair, (before, after) in outcome.sides.items():
        kernel = pair.head.kernel
        is_control = kernel in selection.controls
        cases.append(Case(pair.label, kernel, before, after,
                          threshold_for(kernel, settings.threshold, list(settings.patterns)),
                          settings.noise.get(pair.head.label), is_control,
                          () if is_control else tuple(controls.get(pair.head.precision, ()))))
    return cases


def wait_for_gpu(device: int, timeout_s: float) -> None:
    """Return when no other process is on the GPU; GateError naming them after `timeout_s`."""
    from ..measuring.telemetry import GpuBusyError, TelemetryUnavailable, nvml_handle, wait_until_idle

    try:
        handle = nvml_handle(device)
    except TelemetryUnavailable as exc:
        raise GateError(f"cannot check that the GPU is free: {exc}") from exc
    try:
        wait_until_idle(handle, timeout_s, own_pids=frozenset({os.getpid()}))
    except GpuBusyError as exc:
        raise GateError(str(exc)) from exc


def run_gate(repo: Path, base: str, head: str, selection: Selection, cases: list[SuiteCase], machine: str,
             work_dir: Path, settings: Settings, device: int = 0, gpu_check=wait_for_gpu) -> GateResult:
    started = time.monotonic()
    pairs = pairs_for(cases, selection.renamed)
    if not pairs:
        return GateResult(base, head, machine, selection, settings, [], Outcome(), 0, [])
    work_dir.mkdir(parents=True, exist_ok=True)
    results_dir = work_dir / "results"
    shutil.rmtree(results_dir, ignore_errors=True)  # only this run's figures are judged
    events_path = work_dir / "case-events.jsonl"
    events_path.unlink(missing_ok=True)
    config = write_asv_config(repo, work_dir / "asv.conf.json", env_dir=work_dir / "env",
                              results_dir=results_dir, html_dir=work_dir / "html")
    measured = list(dict.fromkeys(case for pair in pairs for case in (pair.base, pair.head)))
    rounds_run, problems, to_measure, comparisons = 0, [], measured, []
    outcome = Outcome()
    while to_measure:
        step = settings.rounds if rounds_run == 0 else min(settings.rounds, settings.max_rounds - rounds_run)
        try:
            gpu_check(device, settings.idle_timeout_s)
        except GateError as exc:
            outcome.shared_gpu.append(str(exc))
            break
        status = run_continuous(config, machine, base, head, to_measure, step, repo, events_path,
                                append=rounds_run > 0, nvbench_args=settings.nvbench_args)
        rounds_run += step
        try:
            outcome = read_outcome(results_dir, machine, base, head, pairs, read_events(events_path))
        except GateError as exc:
            problems.append(f"{exc} (asv continuous exited {status})")
            break
        if status not in (0, 1) and not outcome.failed:
            problems.append(f"asv continuous exited {status}")
        if outcome.shared_gpu:
            break
        comparisons = judge(_cases_to_judge(outcome, selection, settings))
        still_open = {c.label for c in comparisons if c.open and not c.case.is_control}
        if not still_open or rounds_run >= settings.max_rounds:
            break
        print(f"sgemm gate: {len(still_open)} cases still open after {rounds_run} rounds: measuring them again",
              file=sys.stderr)
        # The controls of those cases' precisions too: a kernel is judged against controls of the same rounds.
        precisions = {pair.head.precision for pair in outcome.sides if pair.label in still_open}
        again = [pair for pair in outcome.sides if pair.label in still_open
                 or (pair.head.kernel in selection.controls and pair.head.precision in precisions)]
        to_measure = list(dict.fromkeys(case for pair in again for case in (pair.base, pair.head)))
    return GateResult(base, head, machine, selection, settings, comparisons, outcome, rounds_run, problems,
                      time.monotonic() - started)


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


def _cards(sides: list[Rounds]) -> str:
    cards = sorted({card for side in sides for card in side.cards})
    return ", ".join(f"`{card}`" for card in cards) or "not recorded"


def _table_text(text: str) -> str:
    """A cell's text with nothing that would end the cell or the row."""
    return " ".join(text.replace("|", "/").split())


def markdown(result: GateResult, gpu_line: str) -> str:
    settings = result.settings
    verdicts = [c.verdict for c in result.judged]
    status = result.exit_status
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in Verdict if verdicts.count(v))
    headline = {EXIT_PASS: "PASS", EXIT_REGRESSION: "FAIL: a kernel got slower",
                EXIT_UNDECIDED: "UNDECIDED: the gate could not tell"}[status]
    selection = result.selection
    if selection.everything:
        measured = f"every kernel ({selection.everything})"
    elif not selection.kernels:
        measured = "nothing: the change touches no kernel and no measurement code"
    else:
        changed = [f"`{name}` ({why})" for name, why in selection.reasons.items() if name not in selection.controls]
        controls = [f"`{name}`" for name in selection.controls]
        measured = (", ".join(changed) or "no kernel changed") + "; controls: " + (", ".join(controls) or "none")
    befores = [pair[0] for pair in result.outcome.sides.values()]
    afters = [pair[1] for pair in result.outcome.sides.values()]
    lines = [
        f"## GEMM gate: {headline}",
        "",
        f"- Base `{result.base[:12]}` → head `{result.head[:12]}`; {counts or 'no case judged'}"
        + (f"; {result.wall_s:.0f} s" if result.wall_s else ""),
        f"- GPU: {gpu_line} (asv machine `{result.machine}`); cards: base {_cards(befores)}, head {_cards(afters)}",
        f"- Measured: {measured}",
        f"- Rounds: {result.rounds_run} per commit, interleaved, one process each (at least {settings.rounds}; "
        f"cases still open get more, up to {settings.max_rounds}); threshold {settings.threshold:.1%}"
        + "".join(f", `{p}` {v:.1%}" for p, v in settings.patterns)
        + (f"; between-round noise of unchanged code known for "
           f"{sum(1 for p in result.outcome.sides if p.head.label in settings.noise)} cases" if settings.noise else ""),
        f"- SM clock (median per case): base {_spread([s.sm_clock_mhz for s in befores], 'MHz')}, "
        f"head {_spread([s.sm_clock_mhz for s in afters], 'MHz')}",
        "- Clocks held down by the driver (power or thermal): "
        f"base {_spread([s.throttled_ms for s in befores], 'ms', 1)}, "
        f"head {_spread([s.throttled_ms for s in afters], 'ms', 1)} per case",
    ]
    if selection.renamed:
        lines.append("- Renamed (compared with the old name at base): "
                     + ", ".join(f"`{old}` → `{new}`" for new, old in selection.renamed.items()))
    if selection.retired:
        lines.append("- Retired at head: " + ", ".join(f"`{name}` ({why})" for name, why in selection.retired.items()))
    for message in selection.undeclared:
        lines.append(f"- **Not measured, not declared:** {message}")
    for message in result.outcome.shared_gpu:
        lines.append(f"- **The GPU was not the gate's alone:** {message}")
    for problem in result.problems:
        lines.append(f"- **Could not decide:** {problem}")
    controls = [c for c in result.comparisons if c.case.is_control]
    if controls:
        lines.append("- Controls (cuBLAS; kernels are judged relative to them): "
                     + ", ".join(f"{c.label} {c.ratio:.3f}x" for c in sorted(controls, key=lambda c: c.label)))
    lines += ["", "| case | before | after | ratio | vs control | 95% interval | detectable | rounds | "
              "SM clock before → after | at equal clock | verdict | why |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in sorted(result.judged, key=lambda c: (_ORDER[c.verdict], c.label)):
        verdict = f"**{c.verdict.value}**" if c.verdict is not Verdict.SAME else c.verdict.value
        low, high = c.judged.interval()
        versus = f"{c.judged.ratio:.3f}" if c.reference else "-"
        lines.append(f"| {c.label} | {_us(c.case.before.median_s)} | {_us(c.case.after.median_s)} | {c.ratio:.3f} | "
                     f"{versus} | {low:.3f}–{high:.3f} | {c.detectable:.1%} | "
                     f"{len(c.case.before.medians_s)}/{len(c.case.after.medians_s)} | "
                     f"{c.case.before.sm_clock_mhz:.0f} → {c.case.after.sm_clock_mhz:.0f} MHz | "
                     f"{c.ratio_at_equal_clock:.3f} | {verdict} | {_table_text(c.why)} |")
    for pair, why in result.outcome.failed.items():
        lines.append(f"| {pair.label} | | | | | | | | | | **ERROR** | {_table_text(why)} |")
    if result.outcome.not_compared:
        lines += ["", "Not compared: " + "; ".join(f"{pair.label} ({why})"
                                                   for pair, why in result.outcome.not_compared.items())]
    lines += ["", "Each side of a case is its rounds' median times, one asv process per round. Ratio: head over base "
              "(above 1 is slower); vs control: that ratio over the cuBLAS controls' of its precision (all sizes "
              "pooled), which is what is judged. The test is Welch's t on the logarithms of the round medians, with "
              f"the false-discovery rate held at {FALSE_DISCOVERY_RATE:.0%} over the gate's cases (Benjamini-Hochberg). "
              f"Detectable: the smallest slowdown the test finds {POWER:.0%} of the time at that case's noise; a case is judged at "
              "the larger of it and the threshold. At equal clock: the ratio in SM cycles (time x the median SM "
              "clock of each round); a difference in time must be there too, or the case is AMBIGUOUS.", ""]
    return "\n".join(lines)


def publish_report(text: str, path: Path | None) -> None:
    """Write the report to `path` and append it to the GitHub Actions job summary when there is one."""
    if path:
        path.write_text(text)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a") as out:
            out.write(text + "\n")


@dataclass(frozen=True)
class Request:
    """A gate as asked for on the command line."""

    repo: Path
    base: str  # revisions, resolved by `plan`
    head: str
    kernels: tuple[str, ...] = ()  # more kernels or precisions to measure, changed or not
    sizes: tuple[int, ...] = ()  # default: the suite's
    sweep: bool = True  # also seed 003's shape sweep, for the kernels it covers
    settings: Settings = Settings()
    work_dir: Path | None = None
    machine: str | None = None
    report: Path | None = None
    noise_file: Path | None = None
    device: int = 0


@dataclass(frozen=True)
class Plan:
    base: str  # full hashes
    head: str
    selection: Selection
    cases: list[SuiteCase]


def plan(request: Request) -> Plan:
    """What the change selects, as cases of the working tree's suite. GateError when git or the catalogue cannot say."""
    from dataclasses import replace

    from .. import catalogue
    from .changes import ChangeError, resolve_commit, select_kernels

    repo = str(request.repo)
    try:
        base, head = resolve_commit(repo, request.base), resolve_commit(repo, request.head)
        if base == head:
            raise GateError(f"{request.base} and {request.head} are the same commit: nothing to compare")
        selection = select_kernels(repo, base, head)
        checked_out = resolve_commit(repo, "HEAD")
    except ChangeError as exc:
        raise GateError(str(exc)) from exc
    if checked_out != head:
        print(f"sgemm gate: warning: the suite's parameters come from the working tree at {checked_out[:12]}, "
              f"not from head {head[:12]}: check out head to measure every kernel it has", file=sys.stderr)
    # The suite runs with the working tree's catalogue: only its kernels, sizes and shapes exist as benchmarks.
    path = request.repo / "sgemm" / "catalogue.toml"
    kernels = catalogue.load_catalogue(path, request.repo / "kernels")
    if request.kernels:
        asked = {k.name: "asked for" for k in catalogue.select(list(request.kernels), kernels)}
        selection = replace(selection, reasons={**asked, **selection.reasons},
                            kernels=tuple(n for n in kernels if n in asked or n in selection.kernels))
    missing = [name for name in selection.kernels if name not in kernels]
    if missing:
        selection = replace(selection, undeclared=selection.undeclared + tuple(
            f"`{name}` is not in the working tree's catalogue: not measured" for name in missing))
    sweep_kernels, sweep_shapes = catalogue.sweep(path) if request.sweep else ([], [])
    cases = asvsuite.cases_for([kernels[n] for n in selection.kernels if n in kernels], list(request.sizes) or None,
                               sweep_kernels, sweep_shapes, selection.controls)
    return Plan(base, head, selection, cases)


def gate(request: Request, dry_run: bool = False) -> int:
    """The gate from the command line: plan, measure, judge, report. Returns the exit status."""
    from dataclasses import replace

    from ..machine import detect_identity, machine_entry, machine_name, write_machine_file
    from .noise import NoiseFileError, default_path, read

    chosen = plan(request)
    selection = chosen.selection
    why = selection.everything or "; ".join(f"{name}: {reason}" for name, reason in selection.reasons.items())
    print(f"sgemm gate: {chosen.base[:12]} -> {chosen.head[:12]}: {len(chosen.cases)} cases of "
          f"{len(selection.kernels)} kernels ({why or 'nothing to measure'})", file=sys.stderr)
    if dry_run:
        for case in chosen.cases:
            print(case.label)
        return EXIT_PASS
    identity = detect_identity(request.device) if chosen.cases else None
    if chosen.cases and identity is None:
        raise GateError("no GPU found through NVML: nothing can be measured here")
    machine = request.machine or (machine_name(identity) if identity else "no-gpu")
    settings = request.settings
    noise_file = request.noise_file or default_path(request.repo, machine)
    if chosen.cases and (request.noise_file or noise_file.exists()):
        try:
            settings = replace(settings, noise=read(noise_file, machine))
        except NoiseFileError as exc:
            raise GateError(str(exc)) from exc
    if identity:
        write_machine_file(machine_entry(identity, machine))  # asv asks interactively for a machine it does not know
    work_dir = request.work_dir or request.repo / ".asv" / "gate"
    result = run_gate(request.repo, chosen.base, chosen.head, selection, chosen.cases, machine, work_dir, settings,
                      request.device)
    gpu_line = (f"{identity.name}, compute capability {identity.compute_capability_text}, driver {identity.driver}, "
                f"max SM clock {identity.max_sm_clock_mhz:.0f} MHz") if identity else "not used"
    text = markdown(result, gpu_line)
    print(text)
    publish_report(text, request.report)
    return result.exit_status
