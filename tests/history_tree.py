"""A made-up history for the watch's tests: a git branch of N empty commits and one machine's asv run of each, every
case's figures chosen by the test (written through asv's own Results API, as `asv run --record-samples` files
them)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from conftest import write_asv_run

from sgemm.results import asvsuite
from sgemm.results.asvsuite import GEMM
from sgemm.watch.series import WATCHED_TRACK

MACHINE = "nvidia-h100-80gb-hbm3"
GPU = "NVIDIA H100 80GB HBM3"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}


def git(repo: Path, *args: str) -> str:
    import os

    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout.strip()


def make_branch(repo: Path, commits: int) -> list[str]:
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "asv.conf.json").write_text(json.dumps({"version": 1, "project": "t", "repo": ".",
                                                    "branches": ["main"]}))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "c0")
    for index in range(1, commits):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{index}")
    return git(repo, "rev-list", "--reverse", "main").split()


@dataclass
class Case:
    """One case's figures along the branch: a ratio (or round time) per commit, None where not measured."""

    kernel: str  # e.g. "fp16/wgmma_cluster"
    size: int
    values: list[float | None]
    track: str = WATCHED_TRACK
    clock: float = 1500.0
    power: float = 700.0
    cards: list[int] = field(default_factory=list)  # per commit, empty: card 0xabc for all

    @property
    def params(self) -> tuple:
        precision, family = self.kernel.split("/", 1)
        return family, self.size, precision


def write_history(results: Path, commits: list[str], cases: list[Case], measured: list[int] | None = None,
                  environment: dict[int, dict[str, float]] | None = None, reference_version: str = "1") -> None:
    """One run a measured commit (default: all), each case's figure of that commit where it has one."""
    for index in measured if measured is not None else range(len(commits)):
        figures: dict[tuple[str, str], dict] = {}
        for case in cases:
            value = case.values[index]
            if value is None:
                continue
            figures.setdefault((GEMM, case.track), {})[case.params] = [value]
            figures.setdefault((GEMM, asvsuite.ROUND_SM_CLOCK), {})[case.params] = [case.clock]
            figures.setdefault((GEMM, asvsuite.POWER), {})[case.params] = [case.power]
            card = case.cards[index] if case.cards else 0xABC
            figures.setdefault((GEMM, asvsuite.CARD), {})[case.params] = [float(card)]
        if not figures:
            continue
        write_asv_run(results, MACHINE, commits[index], 1_000_000 + index * 1000, figures)
        run_file = _run_file(results, commits[index])
        data = json.loads(run_file.read_text())
        if reference_version != "1":
            name = f"{asvsuite.MODULE}.{GEMM}.{WATCHED_TRACK}"
            if name in data["results"]:
                data["results"][name][data["result_columns"].index("version")] = reference_version
        run_file.write_text(json.dumps(data))
        if (environment or {}).get(index):
            _add_scalars(results, run_file, environment[index])
    machine_file = results / MACHINE / "machine.json"
    machine_file.write_text(json.dumps({"machine": MACHINE, "gpu": GPU, "version": 1}))
    _write_benchmarks(results, cases)


def _write_benchmarks(results: Path, cases: list[Case]) -> None:
    """benchmarks.json for `asv publish`: each track the cases use, with their parameters."""
    axes = [sorted({case.params[i] for case in cases}, key=repr) for i in range(3)]
    tracks = {case.track for case in cases} | {asvsuite.ROUND_SM_CLOCK, asvsuite.POWER, asvsuite.CARD}
    definitions = {"version": 2}
    for track in tracks:
        name = f"{asvsuite.MODULE}.{GEMM}.{track}"
        definitions[name] = {"name": name, "type": "track", "unit": "unit", "version": "1", "code": "",
                             "param_names": ["kernel", "size", "precision"], "timeout": 60,
                             "params": [[repr(value) for value in axis] for axis in axes]}
    (results / "benchmarks.json").write_text(json.dumps(definitions))


def _add_scalars(results: Path, run_file: Path, scalars: dict[str, float]) -> None:
    """Parameterless benchmarks' values (bench_gpu's), added to a run file through asv's API."""
    from asv.results import Results
    from asv.runner import BenchmarkResult

    run = Results.load(str(run_file), machine_name=MACHINE)
    for name, value in scalars.items():
        run.add_result({"name": name, "version": "1", "params": []},
                       BenchmarkResult(result=[value], samples=[[value]], number=[1], errcode=0, stderr="",
                                       profile=None), record_samples=True, duration=1.0)
    run.save(str(results))


def _run_file(results: Path, commit: str) -> Path:
    return next(path for path in (results / MACHINE).glob(f"{commit[:8]}-*.json"))
