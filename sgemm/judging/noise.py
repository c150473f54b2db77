"""Each case's between-round noise on one machine, learned from runs of unchanged code, for the gate.

Every round of an asv run is one process measuring the same commit, so the spread of a run's per-round medians (the
round tracks of sgemm.asvsuite) is that case's between-process noise. Pooled over many runs (each commit of the
published history, or the two sides of a documentation-only gate), it is known far better than from the few rounds of
one gate: the gate holds each side's spread to at least this floor and adds its degrees of freedom
(sgemm.judging.verdict).

The file, one per machine (by default `noise/<machine>.json` in the repository the gate runs from):
    {"machine": "nvidia-h100-80gb-hbm3", "made": "2026-11-23T20:00Z", "runs": 31,
     "cases": {"fp32/float4 4096x4096x4096": {"sd": 0.0021, "df": 31}, ...}}
`sd` is the pooled standard deviation of the natural logarithm of round medians within a run (0.0021 is about 0.21%),
`df` its degrees of freedom (rounds less one, summed over runs).
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path

from .. import asvsuite
from ..atomic import write_atomically
from .verdict import Noise

NOISE_DIR = "noise"


class NoiseFileError(RuntimeError):
    """A noise file that cannot be read or trusted: the message names it and says why."""


def learn(results_dir: Path, machine: str) -> tuple[dict[str, Noise], int]:
    """Every case's pooled between-round noise over the machine's runs, and how many runs there were."""
    squares: dict[str, float] = {}
    dfs: dict[str, int] = {}
    runs = asvsuite.runs(results_dir, machine)
    for run in runs:
        for benchmark in (asvsuite.GEMM, asvsuite.SHAPES):
            for case in run.values(benchmark, asvsuite.ROUND_TIME):
                medians = [m for m in run.samples(case, asvsuite.ROUND_TIME) or [] if m and m > 0]
                if len(medians) < 2:
                    continue
                logs = [math.log(m) for m in medians]
                mean = sum(logs) / len(logs)
                squares[case.label] = squares.get(case.label, 0.0) + sum((x - mean) ** 2 for x in logs)
                dfs[case.label] = dfs.get(case.label, 0) + len(logs) - 1
    return {label: Noise(math.sqrt(squares[label] / dfs[label]), dfs[label]) for label in squares}, len(runs)


def write(path: Path, machine: str, noise: dict[str, Noise], runs: int) -> None:
    made = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    data = {"machine": machine, "made": made, "runs": runs,
            "cases": {label: {"sd": round(n.sd, 6), "df": n.df} for label, n in sorted(noise.items())}}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, (json.dumps(data, indent=1) + "\n").encode())


def read(path: Path, machine: str) -> dict[str, Noise]:
    """The noise of each case, from a file written by `write` for this machine."""
    try:
        data = json.loads(path.read_text())
        if data.get("machine") != machine:
            raise NoiseFileError(f"{path} is the noise of machine {data.get('machine')!r}, not of {machine!r}")
        return {label: Noise(float(entry["sd"]), int(entry["df"])) for label, entry in data["cases"].items()
                if float(entry["sd"]) >= 0 and int(entry["df"]) > 0}
    except NoiseFileError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise NoiseFileError(f"{path} is not a noise file: {type(exc).__name__}: {exc}") from exc


def default_path(repo: Path, machine: str) -> Path:
    return repo / NOISE_DIR / f"{machine}.json"
