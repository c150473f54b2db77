"""The gate's fallback where the two commits cannot share a process: the code that measures changed between them, so
each commit is measured by its own code, in processes of its own.

asv does the running: `asv continuous` builds each commit in its own virtualenv and measures the two in interleaved
rounds, under a configuration and results directory of the gate's own (`.asv/gate`), so that a pull request's runs
never enter the published history. A round of a commit is one process that measures every case asked for
(sgemm.measuring.record), and asv keeps each round's figures apart (the suite's round tracks); they are read back
here as each side's Rounds (sgemm.gate.verdict).
"""

from __future__ import annotations

import json
import math
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import write_atomically
from ..contained import contained
from ..measuring.record import CASES_VARIABLE, EVENTS_VARIABLE, NVBENCH_ARGS_VARIABLE
from ..results import asvsuite
from ..results.asvconf import run_environment, write_asv_config
from ..results.asvsuite import SuiteCase
from ..rounds.evidence import Case, Rounds
from ..rounds.pairs import Pair

# NVBench's stopping rule for a gate's rounds: 0.1 s of GPU time, or on until the noise is under 5%, 5 s at most.
# Set explicitly: a base commit older than the rule would use NVBench's default otherwise. Twice a history's
# (record.ASV_NVBENCH_ARGS): here the rounds' medians are the evidence, and their false-alarm rates and detectable
# effects were measured with this rule.
NVBENCH_ARGS = ("--min-time", "0.1", "--max-noise", "5", "--timeout", "5")


class UnpairedError(RuntimeError):
    """asv recorded nothing readable; the message says what."""



def run_continuous(config: Path, machine: str, base: str, head: str, cases: list[SuiteCase], rounds: int,
                   repo: Path, events: Path, append: bool, nvbench_args: tuple[str, ...] = NVBENCH_ARGS) -> int:
    """`asv continuous` over exactly these cases; its output goes to stderr. Returns asv's exit status.

    `--no-stats`: asv's own comparison table would test pooled samples, which is both the wrong unit
    (sgemm.gate.verdict) and quadratic in them. `--append-samples` on a later call adds rounds to those already
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
    env = run_environment()
    env[EVENTS_VARIABLE] = str(events)  # why a case failed or was skipped
    env[NVBENCH_ARGS_VARIABLE] = shlex.join(nvbench_args)
    env[CASES_VARIABLE] = json.dumps([[case.kernel, *case.shape] for case in cases])  # one process a round
    passed = {name: env[name] for name in (EVENTS_VARIABLE, NVBENCH_ARGS_VARIABLE, CASES_VARIABLE)}
    # asv's environments, results and events under the gate's work folder, the only place it writes; the approved
    # code measures itself on this path (docs/ci-security.md, D28). The machine file goes in as a copy in that
    # folder: the runner's home, where asv keeps it, is none of the job's (a sandbox may refuse it outright).
    machine_file = config.parent / "asv-machine.json"
    write_atomically(machine_file, (Path.home() / ".asv-machine.json").read_bytes())
    command = contained([*command, base, head], readable=[repo], writable=[config.parent, events.parent],
                        devices=["all"], cwd=repo, env=passed, machine_file=machine_file)
    return subprocess.run(command, cwd=repo, env=env, stdout=sys.stderr).returncode


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
    return f"{case.kernel}/{m}x{n}x{k}"  # sgemm.measuring.record.MeasuredCase.id


@dataclass
class AsvOutcome:
    """What asv recorded of the cases at the two commits."""

    sides: dict[Pair, tuple[Rounds, Rounds]] = field(default_factory=dict)
    failed: dict[Pair, str] = field(default_factory=dict)  # the case cannot be judged, and why
    not_compared: dict[Pair, str] = field(default_factory=dict)  # skipped on a side (not an error), and why
    shared_gpu: list[str] = field(default_factory=list)  # a benchmark found another process on the GPU
    libraries: dict[str, set[str]] = field(default_factory=dict)  # commit -> library versions its processes saw


def _reader(results_dir: Path, machine: str, commit: str) -> asvsuite.RunReader:
    runs = asvsuite.runs(results_dir, machine, commit)
    if not runs:
        raise UnpairedError(f"asv recorded nothing for commit {commit[:12]} on machine {machine!r} in {results_dir}")
    return runs[-1]


def read_outcome(results_dir: Path, machine: str, base: str, head: str, pairs: list[Pair],
                 events: list[dict]) -> AsvOutcome:
    before_run, after_run = _reader(results_dir, machine, base), _reader(results_dir, machine, head)
    reasons = {(e.get("commit"), e.get("case")): e.get("reason", "") for e in events}
    outcome = AsvOutcome(shared_gpu=sorted({e["reason"] for e in events if e.get("kind") == "gpu shared"}))
    for event in events:
        if event.get("kind") == "library":
            outcome.libraries.setdefault(event.get("commit", ""), set()).add(event.get("reason", ""))
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


class UnpairedRounds:
    """`measure({label: rounds})` for sgemm.gate.looks: asv continuous rounds of exactly those cases, appended to
    the rounds they already have (every case the most rounds asked of any: one asv continuous run times them all)."""

    def __init__(self, repo: Path, base: str, head: str, pairs: list[Pair], machine: str, work_dir: Path,
                 thresholds: dict[str, float], noise: dict, controls: frozenset[str],
                 nvbench_args: tuple[str, ...] = NVBENCH_ARGS, asv_config: Path | None = None):
        self.repo, self.base, self.head, self.machine = repo, base, head, machine
        self.pairs = {pair.label: pair for pair in pairs}
        self.thresholds, self.noise, self.controls, self.nvbench_args = thresholds, noise, controls, nvbench_args
        work_dir.mkdir(parents=True, exist_ok=True)
        self.results_dir = work_dir / "results"
        shutil.rmtree(self.results_dir, ignore_errors=True)  # only this run's figures are judged
        self.events_path = work_dir / "case-events.jsonl"
        self.events_path.unlink(missing_ok=True)
        # asv_config: the base commit's file (sgemm.gate.inputs), whose commands build and run both sides.
        self.config = write_asv_config(repo, work_dir / "asv.conf.json", asv_config, env_dir=work_dir / "env",
                                       results_dir=self.results_dir, html_dir=work_dir / "html")
        self.done: dict[str, int] = {}
        self.outcome = AsvOutcome()
        self.problems: list[str] = []

    def measure(self, wanted: dict[str, int]) -> dict[str, Case]:
        labels, rounds = list(wanted), max(wanted.values())
        pairs = [self.pairs[label] for label in labels]
        step = rounds - min(self.done.get(label, 0) for label in labels)
        cases = list(dict.fromkeys(case for pair in pairs for case in (pair.base, pair.head)))
        status = run_continuous(self.config, self.machine, self.base, self.head, cases, step, self.repo,
                                self.events_path, append=bool(self.done), nvbench_args=self.nvbench_args)
        try:
            outcome = read_outcome(self.results_dir, self.machine, self.base, self.head, list(self.pairs.values()),
                                   read_events(self.events_path))
        except UnpairedError as exc:
            self.problems.append(f"{exc} (asv continuous exited {status})")
            return {}
        if status not in (0, 1) and not outcome.failed:
            self.problems.append(f"asv continuous exited {status}")
        self.outcome = outcome
        measured = {}
        for pair in pairs:
            if pair not in outcome.sides:
                continue
            before, after = outcome.sides[pair]
            self.done[pair.label] = min(len(before.medians_s), len(after.medians_s))
            measured[pair.label] = Case(pair.label, pair.head.kernel, self.thresholds[pair.label], before=before,
                                        after=after, noise=self.noise.get(pair.head.label),
                                        is_control=pair.label in self.controls)
        return measured
