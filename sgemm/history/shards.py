"""One commit's cases spread over the identical GPUs of a box, and the shards' results joined again into the run one
GPU would have recorded.

asv measures one benchmark at a time, so a box with several GPUs runs one `asv run` per GPU, each restricted to its
shard of the cases (`--bench`), each with its GPU alone visible (CUDA_VISIBLE_DEVICES; NVML still names the card by
its PCI bus id) and its own results directory. The shards are then joined benchmark by benchmark: every parameter
combination comes from the one shard that measured it. Two shards that both hold a figure for one combination, and
disagree, are refused with both files named; nothing is dropped.

Assignment: cases go longest first to the least loaded GPU (their cost: the NVBench samples the machine's newest run
recorded times their median, plus a fixed cost per case for its processes), ties broken by a hash of the case's
name. The first GPU also runs the suites that are no case (the GPU's facts, the resource compile): its load counts
what they took in that run. The same cases and recorded costs give the same shards, in whatever order they come, so
a case keeps its card from one commit to the next; costs are rounded to two significant digits so that run-to-run
noise does not move it.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_atomically
from ..results import asvsuite
from ..results.asvsuite import SuiteCase

# Seconds a case costs beyond its timed samples: its compile and FP64 check, NVBench's set-up, its pairing with the
# reference tree, its readers' share. A one-GPU run on an H200 spent 0.89 s a case so (lab/2026-11-28-history-sharding,
# call 10: 305 s of benchmarks beside the non-case suites for 320 cases, 19 s of them samples).
CASE_OVERHEAD_S = 0.9
# The asv modules that hold no case: a sharded run gives them to its first GPU (sgemm.history.run.other_patterns).
NON_CASE_MODULES = ("bench_gpu", "bench_resources")
# What they take where a machine has no run to go by: the one-GPU H200 run of that record spent 20.8 s on them (the
# resource suite compiles every kernel for every architecture, whatever the selection).
NON_CASE_PRIOR_S = 20.0


class ShardError(RuntimeError):
    """The box cannot be sharded, or shards cannot be joined; the message names the GPUs or files and says why."""


@dataclass(frozen=True)
class Shard:
    gpu: int  # the NVML index; the CUDA index too under CUDA_DEVICE_ORDER=PCI_BUS_ID
    cases: tuple[SuiteCase, ...]
    seconds: float  # expected, from the recorded costs




def identical_gpus(models: list[str]) -> list[int]:
    """The indices of the GPUs to shard over, given each GPU's model in NVML order: all of them when they are one
    model. A box of mixed models is refused: their results must never share one machine's history."""
    if not models:
        raise ShardError("no GPU found through NVML")
    if len(set(models)) > 1:
        listed = ", ".join(f"GPU {index}: {model}" for index, model in enumerate(models))
        raise ShardError(f"the GPUs of this box are not one model ({listed}): shard over identical GPUs only "
                         "(CUDA_VISIBLE_DEVICES), one machine per model")
    return list(range(len(models)))


def recorded_costs(run: asvsuite.RunReader | None, cases: list[SuiteCase]) -> dict[SuiteCase, float]:
    """Each case's cost in seconds from a run of the machine: its time samples times their median, plus the fixed
    cost; a case the run did not time costs the median of those it did (or the fixed cost alone, with no run)."""
    costs: dict[SuiteCase, float] = {}
    for case in cases:
        samples = run.samples(case, asvsuite.TIME) if run else None
        if samples:
            costs[case] = len(samples) * statistics.median(samples) + CASE_OVERHEAD_S
    typical = statistics.median(costs.values()) if costs else CASE_OVERHEAD_S
    return {case: costs.get(case, typical) for case in cases}


def non_case_seconds(run: asvsuite.RunReader | None) -> float:
    """What the suites that are no case took in a run of the machine (with no run, the prior)."""
    return run.seconds_in(NON_CASE_MODULES) if run else NON_CASE_PRIOR_S


def _rounded(seconds: float) -> float:
    if seconds <= 0:
        return 0.0
    return round(seconds, 1 - int(math.floor(math.log10(seconds))))


def _tiebreak(case: SuiteCase) -> str:
    return hashlib.sha256(repr(case.params).encode()).hexdigest()


def assign(costs: dict[SuiteCase, float], gpus: list[int], first_gpu_start_s: float = 0.0) -> list[Shard]:
    """Every case on exactly one GPU, longest first onto the least loaded (the lowest index among equals). The first
    GPU's load counts `first_gpu_start_s` too, the work it has beside its cases, once it holds a case: it takes the
    longest first, so that no shard is left without one."""
    if not gpus:
        raise ShardError("no GPU to shard over")
    start = _rounded(first_gpu_start_s)
    loads = {gpu: 0.0 for gpu in gpus}
    chosen: dict[int, list[SuiteCase]] = {gpu: [] for gpu in gpus}

    def load(gpu: int) -> float:
        return loads[gpu] + (start if gpu == gpus[0] and chosen[gpu] else 0.0)

    for case in sorted(costs, key=lambda c: (-_rounded(costs[c]), _tiebreak(c))):
        gpu = min(gpus, key=lambda g: (load(g), g))
        chosen[gpu].append(case)
        loads[gpu] += _rounded(costs[case])
    return [Shard(gpu, tuple(sorted(chosen[gpu])), load(gpu)) for gpu in gpus]


# --- Joining the shards' results ---------------------------------------------------------------------------------

# The columns of a result row that hold one entry per parameter combination.
_PER_COMBINATION = ("result", "stats_ci_99_a", "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number",
                    "stats_repeat", "samples")
# What must be the same in every shard of one run: the commit, environment, machine and format.
_SAME = ("commit_hash", "env_name", "params", "python", "requirements", "env_vars", "result_columns", "version")


def _measured(value) -> bool:
    """asv writes NaN for a combination it skipped or did not run, None for one that failed (which was run)."""
    return not (isinstance(value, float) and math.isnan(value))


def _row(data: dict, name: str) -> dict:
    columns = data["result_columns"]
    values = list(data["results"][name]) + [None] * (len(columns) - len(data["results"][name]))
    return dict(zip(columns, values))


def join(files: list[Path]) -> dict:
    """The asv result file one GPU would have written, from the shards' files of one run (ShardError if they are
    not the shards of one run, or two of them measured one combination differently)."""
    if not files:
        raise ShardError("no shard results to join")
    shards = []
    for path in files:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ShardError(f"{path} is not an asv result file: {exc}") from exc
        if not isinstance(data, dict) or not {"results", "result_columns", "commit_hash"} <= data.keys():
            raise ShardError(f"{path} is not an asv result file: it holds no results of a commit")
        shards.append((path, data))
    (first_path, joined), problems = shards[0], []  # the first shard's file, read above, becomes the joined run
    for path, data in shards[1:]:
        for key in _SAME:
            if data.get(key) != joined.get(key):
                problems.append(f"{path} and {first_path} differ in {key}: not shards of one run")
        for name, durations in data.get("durations", {}).items():
            joined.setdefault("durations", {})[name] = max(durations, joined.get("durations", {}).get(name, 0.0))
    if problems:
        raise ShardError("; ".join(problems))
    owner: dict[tuple[str, int], Path] = {}  # which file gave each combination of each benchmark
    for name in joined["results"]:
        for index, value in enumerate(_row(joined, name)["result"] or []):
            if _measured(value):
                owner[name, index] = first_path
    for path, data in shards[1:]:
        for name in data["results"]:
            incoming = _row(data, name)
            if name not in joined["results"]:
                joined["results"][name] = data["results"][name]
                owner.update(((name, i), path) for i, v in enumerate(incoming["result"] or []) if _measured(v))
                continue
            mine = _row(joined, name)
            if mine["params"] != incoming["params"] or mine["version"] != incoming["version"]:
                problems.append(f"{name}: {path} and {first_path} ran different versions or parameters of it")
                continue
            _join_row(name, mine, incoming, path, owner, problems)
            joined["results"][name] = [mine[column] for column in joined["result_columns"]]
    if problems:
        raise ShardError("; ".join(problems))
    return joined


def _join_row(name: str, mine: dict, incoming: dict, path: Path, owner: dict, problems: list[str]) -> None:
    """Fill `mine` with the combinations `incoming` measured; a combination both measured must agree."""
    size = len(incoming["result"] or [])
    for column in _PER_COMBINATION:
        if mine[column] is None and incoming[column] is not None:
            mine[column] = [math.nan if column == "result" else None] * size
    for index in range(size):
        value = incoming["result"][index]
        if not _measured(value):
            continue
        if (name, index) in owner:
            if json.dumps(mine["result"][index]) != json.dumps(value) or (
                    (mine["samples"] or [None] * size)[index] != (incoming["samples"] or [None] * size)[index]):
                problems.append(f"{name} combination {index}: {owner[name, index]} and {path} both measured it, "
                                "differently")
            continue
        for column in _PER_COMBINATION:
            if incoming[column] is not None:
                mine[column][index] = incoming[column][index]
        owner[name, index] = path
    mine["started_at"] = max(mine["started_at"] or 0, incoming["started_at"] or 0)
    mine["duration"] = (mine["duration"] or 0.0) + (incoming["duration"] or 0.0)


def write_joined(files: list[Path], target: Path) -> None:
    """join(files), written as asv writes a result file (compact JSON, in the order asv keeps), and read back with
    asv's own reader: a file it could not read would be one `asv publish` skips."""
    from asv.results import Results

    write_atomically(target, json.dumps(join(files)))
    Results.load(str(target))
