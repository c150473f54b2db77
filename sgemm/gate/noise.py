"""Each case's round-to-round noise on one machine, learned from rounds of earlier runs, for the gate.

- Unpaired: every round of an asv run is one process measuring the same commit, so the spread of a run's per-round
  medians (the round tracks of sgemm.results.asvsuite) is that case's between-process noise, learned from a results tree
  (each commit of the history, or the sides of a gate measured unpaired).
- Paired: every round of a paired gate is one process timing base and head side by side; the spread of a gate's
  round ratios about their mean is the paired noise, whatever the change did to the mean, so every paired gate's
  rounds (its work directory's rounds/) teach it. How long a round times a case sets that spread, so the file keeps
  the rounds' settings (`paired_round`), and a gate whose rounds are timed otherwise sets the paired noise aside.
Pooled over many runs a case's noise is known far better than from the few rounds of one gate: the gate pools it
with its own rounds by degrees of freedom (sgemm.gate.verdict), and sets it aside where its rounds contradict it.

The file, one per machine (by default `noise/<machine>.json` in the repository the gate runs from):
    {"machine": "nvidia-h100-80gb-hbm3", "made": "2026-11-25T20:00Z", "runs": 31, "paired_runs": 3,
     "cases": {"fp32/float4 4096x4096x4096": {"sd": 0.0021, "df": 31}, ...},
     "paired": {"fp32/float4 4096x4096x4096": {"sd": 0.0003, "df": 12}, ...},
     "paired_round": {"max_s": 12.0, "target_half_width": 0.002, ...}}
`sd` is the pooled standard deviation of the natural logarithm of a round's figure within a run (0.0021 is about
0.21%), `df` its degrees of freedom (rounds less one, summed over runs).
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_atomically
from ..results import asvsuite
from ..rounds.evidence import Noise, pooled_noise
from ..rounds.outliers import ordinary_groups

NOISE_DIR = "noise"


class NoiseFileError(RuntimeError):
    """A noise file that cannot be read or trusted: the message names it and says why."""


def learn(results_dir: Path, machine: str) -> tuple[dict[str, Noise], int]:
    """Every case's pooled between-round noise over the machine's runs, and how many runs there were. A case whose
    rounds all read the same figure teaches nothing of its spread and is left out."""
    groups: dict[str, list[list[float]]] = {}
    runs = asvsuite.runs(results_dir, machine, strict=True)  # a run left out would change every figure
    for run in runs:
        for benchmark in (asvsuite.GEMM, asvsuite.SHAPES):
            for case in run.values(benchmark, asvsuite.ROUND_TIME):
                medians = [m for m in run.samples(case, asvsuite.ROUND_TIME) or [] if m and m > 0]
                groups.setdefault(case.label, []).append([math.log(m) for m in medians])
    return {label: entry for label, logs in groups.items() if (entry := pooled_noise(logs, 0.0))}, len(runs)


def round_files(work_dir: Path) -> list[Path]:
    """A paired gate's round files, rounds/round-N.jsonl under its work directory, in round order."""
    return sorted(Path(work_dir).glob("**/rounds/round-*.jsonl"), key=lambda path: int(path.stem.split("-")[1]))


def round_ratios(files: list[Path]) -> dict[str, list[float]]:
    """Each case's paired ratio in each of these round files, in their order. A last line cut off as its round was
    killed (no newline, not JSON) is left out, as the gate leaves it out: a gate cut short still teaches what it
    measured. A case that failed has no ratio (or 0). Any other line that is not a JSON object, or a ratio that is
    not a finite number above 0, is a ValueError naming its file and line."""
    ratios: dict[str, list[float]] = {}
    for path in files:
        content = path.read_text()
        texts = content.splitlines()
        for number, text in enumerate(texts, 1):
            try:
                line = json.loads(text)
            except ValueError:
                if number == len(texts) and not content.endswith("\n"):
                    continue
                raise
            if not isinstance(line, dict):
                raise ValueError(f"{path}, line {number}: not a JSON object")
            ratio = line.get("ratio", 0)
            if ratio == 0:
                continue
            if not (isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0):
                raise ValueError(f"{path}, line {number}: a ratio of {ratio!r}, not a finite number above 0")
            ratios.setdefault(line["label"], []).append(ratio)
    return ratios


def learn_paired(work_dirs: list[Path]) -> tuple[dict[str, Noise], int, dict | None]:
    """Every case's pooled paired noise over the rounds of these gates (their work directories), how many gates had
    rounds, and the settings their rounds were timed with (None where no plan says). A gate's round files are
    rounds/round-N.jsonl, one line a case (sgemm.measuring.ab), beside the plan round-N.plan.json it ran. Outlier
    rounds are set aside first (sgemm.rounds.outliers.ordinary_groups), as the gate sets them aside before it pools
    an entry with its rounds: an entry learned with them would be wider than the rounds it is pooled with."""
    groups: dict[str, list[list[float]]] = {}
    gates = 0
    settings: list[dict] = []
    for work_dir in work_dirs:
        files = round_files(work_dir)
        for path in files:
            plan = path.with_name(path.name.removesuffix(".jsonl") + ".plan.json")
            if plan.exists() and (used := json.loads(plan.read_text()).get("settings")) not in settings:
                settings.append(used)
        gates += bool(files)
        for label, ratios in round_ratios(files).items():
            groups.setdefault(label, []).append([math.log(ratio) for ratio in ratios])
    if len(settings) > 1:
        raise NoiseFileError("these gates timed their rounds in different ways, whose noise cannot be pooled: "
                             + "; ".join(json.dumps(used, sort_keys=True) for used in settings))
    entries = {label: entry for label, logs in groups.items() if (entry := paired_entry(logs))}
    return entries, gates, settings[0] if settings else None


def paired_entry(groups: list[list[float]]) -> Noise | None:
    """One case's paired noise from its log round ratios, a group a gate: each about its own mean, pooled, outlier
    rounds set aside first; None where no group has two rounds or every round read the same."""
    return pooled_noise(ordinary_groups(groups), 0.0)


@dataclass
class Learned:
    """What `sgemm noise` learned: each case's unpaired and paired noise, and from how many runs and gates."""

    unpaired: dict[str, Noise]
    runs: int
    paired: dict[str, Noise]
    gates: int
    paired_round: dict | None = None  # the settings the gates' rounds were timed with


def learn_from(results_dir: Path | None, machine: str, gate_work_dirs: list[Path]) -> Learned:
    """The unpaired noise of a machine's asv results and the paired noise of gates' work folders, either or both;
    NoiseFileError saying what is missing or unreadable."""
    if results_dir is None and not gate_work_dirs:
        raise NoiseFileError("give asv results (--results) or paired gates' work folders (--rounds), or both")
    unpaired, runs, paired, gates, paired_round = {}, 0, {}, 0, None
    if results_dir is not None:
        if not (results_dir / machine).is_dir():
            raise NoiseFileError(f"{results_dir} has no results of machine {machine!r}")
        try:
            unpaired, runs = learn(results_dir, machine)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NoiseFileError(f"cannot read the asv results of {machine!r} in {results_dir}: {exc}") from exc
    if missing := [folder for folder in gate_work_dirs if not folder.is_dir()]:
        raise NoiseFileError(f"--rounds {missing[0]}: no such folder")
    if gate_work_dirs:
        try:
            paired, gates, paired_round = learn_paired(gate_work_dirs)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise NoiseFileError(f"cannot read the paired rounds in {', '.join(map(str, gate_work_dirs))}: "
                                 f"{exc}") from exc
    if not unpaired and not paired:
        raise NoiseFileError("no case was measured in two rounds or more of one run (asv run --record-samples with "
                             "the round tracks, or a paired gate)")
    return Learned(unpaired, runs, paired, gates, paired_round)


def write(path: Path, machine: str, noise: dict[str, Noise], runs: int, paired: dict[str, Noise] | None = None,
          paired_runs: int = 0, paired_round: dict | None = None) -> None:
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    data = {"machine": machine, "made": made, "runs": runs, "paired_runs": paired_runs,
            "cases": {label: {"sd": round(n.sd, 6), "df": n.df} for label, n in sorted(noise.items())},
            "paired": {label: {"sd": round(n.sd, 7), "df": n.df} for label, n in sorted((paired or {}).items())},
            "paired_round": paired_round}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(data, indent=1) + "\n").encode())


def read(path: Path, machine: str | None, paired_round: dict | None = None
         ) -> tuple[dict[str, dict[str, Noise]], str | None]:
    """The noise of each case by how it is measured ("paired", "unpaired"), from a file `write` wrote for this
    machine (any machine's, when None: for checking a file before the machine is known; a file from before pairing
    has the unpaired section alone), and why a section was set aside, if one
    was: paired noise learned from rounds timed otherwise than `paired_round` (when given) says nothing of these."""
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise NoiseFileError(f"{path} is not a noise file: it holds no JSON object")
        if machine is not None and data.get("machine") != machine:
            raise NoiseFileError(f"{path} is the noise of machine {data.get('machine')!r}, not of {machine!r}")
        noise = {method: _entries(path, key, data[key]) for method, key in (("unpaired", "cases"), ("paired", "paired"))
                 if key in data}
    except NoiseFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NoiseFileError(f"{path} is not a noise file: {type(exc).__name__}: {exc}") from exc
    if noise.get("paired") and paired_round is not None and data.get("paired_round") != paired_round:
        del noise["paired"]
        learned_with = json.dumps(data.get("paired_round"), sort_keys=True) if data.get("paired_round") \
            else "settings it does not record"
        return noise, (f"{path}: its paired noise was set aside: learned from rounds timed with {learned_with}, "
                       f"and these rounds are timed with {json.dumps(paired_round, sort_keys=True)}")
    return noise, None


def _entries(path: Path, section: str, entries: dict) -> dict[str, Noise]:
    """A section's entries, each an sd above zero with its degrees of freedom; NoiseFileError naming the first entry
    that is not (an entry of sd 0 would make any difference of its case certain)."""
    if not isinstance(entries, dict):
        raise NoiseFileError(f"{path} is not a noise file: its {section!r} section is not an object")
    found = {}
    for label, entry in entries.items():
        if not isinstance(entry, dict) or "sd" not in entry or "df" not in entry:
            raise NoiseFileError(f"{path}: {section} entry {label!r} lacks its sd or df")
        try:
            found[label] = Noise(float(entry["sd"]), entry["df"])
        except (TypeError, ValueError) as exc:
            raise NoiseFileError(f"{path}: {section} entry {label!r}: {exc}") from None
    return found


def default_path(repo: Path, machine: str) -> Path:
    return repo / NOISE_DIR / f"{machine}.json"
