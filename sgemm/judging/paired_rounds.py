"""The gate's rounds where base and head can share a process: the change is confined to kernel sources, headers and
catalogue entries, and the code that measures is the same at both commits.

Each commit's kernels and catalogue are exported from git (sgemm.sourcetree). A round is one process
(`python -m sgemm.measuring.ab`) that builds every open case from both trees, checks both builds against FP64, times
them paired and writes one ratio per case; rounds repeat until each case has the rounds its look asks for
(sgemm.judging.looks). A case whose two builds are the same program is SAME without being timed: the same cubin for
this GPU (a comment in a shared header changes the source NVRTC reads, not what it makes) and the same launch (every
catalogue field that shapes it: two entries can share a cubin and differ in their grid, shared memory, cluster, TMA
boxes or pitch); a library kernel (cuBLAS) is one library for both sides of one process. `time_unchanged` times them
anyway, as an A/A gate wants.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import sourcetree
from ..catalogue import Kernel
from ..measuring.paired import PairedSettings
from .unpaired_rounds import Pair
from .verdict import Case, Noise, PairedRounds

ROUND_COMMAND = (sys.executable, "-m", "sgemm.measuring.ab")  # + PLAN OUT: one round, one process
# One round's timing of a case. Every round of a case runs until its own interval (the median's, 95%) is within
# 0.2% of its ratio, or for max_s: a gate of 58 cases needs a round's ratio to vary by about 0.1% (sd) or less to see
# 0.25% in 9 rounds, and a median whose 95% interval is +-0.2% has about that sd. Quiet cases get there in a few
# pairs; a kernel whose own launches jitter gets more time in every round, the same in each, so that the rounds stay
# alike (measured on an H100 at 4096, A/A in one process: fp32/smem_ilp32's launches vary by 1.8% (sd, launch to
# launch, uncorrelated), and the median of 24 pairs (0.8 s) by 0.52% from one window to the next; Hopper wgmma
# kernels vary by 0.4-0.9% a pair but with a sharp peak, where the median of 24 pairs varies by 0.04-0.07%, half what
# their mean does; scripts/pair-noise.py). The rounds' settings are part of the paired noise a noise file learns.
ROUND_SETTINGS = PairedSettings(warmup_s=0.2, max_warmup_s=2.0, min_pairs=6, min_s=0.2, max_s=12.0,
                                target_half_width=0.002)


class PairingError(RuntimeError):
    """The two commits' kernels cannot be built side by side (a tree that cannot be exported or read)."""


def launch_signature(kernel: Kernel) -> tuple:
    """Everything of an entry that decides how its program is launched and on what. The geometry a kernel states
    of itself is in its cubin (program_digest); what an older catalogue states of it is here."""
    return (kernel.library, kernel.entry, kernel.types.input, kernel.types.output, kernel.pitch, kernel.grid_rule,
            kernel.target, kernel.stated)


def target_of(kernel: Kernel, compute_capability: int) -> str:
    return kernel.target or f"sm_{compute_capability}"


def program_digest(kernel: Kernel, compute_capability: int) -> str:
    """sha256 of the cubin NVRTC makes of the kernel for this GPU (offline: no GPU needed)."""
    from ..measuring.resources import compile_offline

    return hashlib.sha256(compile_offline(kernel, target_of(kernel, compute_capability)).cubin).hexdigest()


def unchanged_programs(pairs: list[tuple[str, Kernel, Kernel]], compute_capability: int) -> dict[str, str]:
    """Of (label, base build, head build): those whose two builds are one program, and how that was found."""
    found: dict[str, str] = {}
    to_compile = []
    for label, before, after in pairs:
        if launch_signature(before) != launch_signature(after):
            continue
        if before.library:
            found[label] = f"both sides call {before.library}, one library in one process"
        else:
            to_compile.append((label, before, after))

    def digests(item: tuple[str, Kernel, Kernel]) -> tuple[str, str] | None:
        try:
            return program_digest(item[1], compute_capability), program_digest(item[2], compute_capability)
        except Exception:  # noqa: BLE001 - a build that cannot be compiled here is timed, and fails there, saying why
            return None

    with ThreadPoolExecutor() as pool:
        for (label, before, _), result in zip(to_compile, pool.map(digests, to_compile)):
            if result and result[0] == result[1]:
                found[label] = (f"base and head build the same program: cubin sha256 {result[0][:12]} for "
                                f"{target_of(before, compute_capability)}, the same launch")
    return found


@dataclass
class _Measured:
    ratios: list[float] = field(default_factory=list)
    base_clocks: list[float] = field(default_factory=list)
    head_clocks: list[float] = field(default_factory=list)
    base_s: list[float] = field(default_factory=list)
    head_s: list[float] = field(default_factory=list)
    block_s: float = math.inf
    joules: list[float] = field(default_factory=list)

    def add(self, line: dict) -> None:
        base, head = line["sides"]["base"], line["sides"]["head"]
        self.ratios.append(line["ratio"])
        self.base_clocks.append(base["sm_clock_mhz"])
        self.head_clocks.append(head["sm_clock_mhz"])
        self.base_s.append(base["median_s"])
        self.head_s.append(head["median_s"])
        self.block_s = min(self.block_s, line["launches_per_block"] * min(base["median_s"], head["median_s"]))
        self.joules.append(line.get("joules_per_launch", math.nan))

    def rounds(self) -> PairedRounds:
        return PairedRounds(tuple(self.ratios), tuple(self.base_clocks), tuple(self.head_clocks),
                            tuple(self.base_s), tuple(self.head_s), self.block_s, tuple(self.joules))


class PairedSession:
    """`measure(labels, rounds)` for sgemm.judging.looks: round processes over exactly those cases until each has
    that many rounds."""

    def __init__(self, repo: Path, base: str, head: str, pairs: list[Pair], work_dir: Path, device: int,
                 thresholds: dict[str, float], noise: dict[str, Noise], gpu_check: Callable[[], None],
                 settings: PairedSettings = ROUND_SETTINGS):
        self.pairs = {pair.label: pair for pair in pairs}
        self.thresholds, self.noise, self.gpu_check, self.settings, self.device = thresholds, noise, gpu_check, \
            settings, device
        self.trees = {}
        try:
            for side, commit in (("base", base), ("head", head)):
                self.trees[side] = sourcetree.export(repo, commit, work_dir / "trees" / side)
            self.kernels = {side: sourcetree.kernels(tree) for side, tree in self.trees.items()}
        except sourcetree.TreeError as exc:
            raise PairingError(str(exc)) from exc
        self.rounds_dir = work_dir / "rounds"
        self.rounds_dir.mkdir(parents=True, exist_ok=True)
        self.measured: dict[str, _Measured] = {label: _Measured() for label in self.pairs}
        self.failed: dict[str, str] = {}
        self.shared_gpu: list[str] = []
        self.processes = 0

    def builds(self, label: str) -> tuple[Kernel | None, Kernel | None]:
        pair = self.pairs[label]
        return self.kernels["base"].get(pair.base.kernel), self.kernels["head"].get(pair.head.kernel)

    def unchanged(self, compute_capability: int) -> dict[str, str]:
        both = [(label, *self.builds(label)) for label in self.pairs]
        return unchanged_programs([item for item in both if item[1] and item[2]], compute_capability)

    def _plan(self, labels: list[str]) -> dict:
        cases = []
        for label in labels:
            pair = self.pairs[label]
            cases.append({"label": label, "kernels": {"base": pair.base.kernel, "head": pair.head.kernel},
                          "shape": list(pair.head.shape)})
        return {"trees": {side: str(tree) for side, tree in self.trees.items()}, "device": self.device,
                "settings": asdict(self.settings), "cases": cases}

    def _round(self, labels: list[str]) -> None:
        self.gpu_check()
        self.processes += 1
        plan_path = self.rounds_dir / f"round-{self.processes}.plan.json"
        out, log = (self.rounds_dir / f"round-{self.processes}.jsonl", self.rounds_dir / f"round-{self.processes}.log")
        plan_path.write_text(json.dumps(self._plan(labels)))
        print(f"sgemm gate: round {self.processes}: {len(labels)} cases paired in one process", file=sys.stderr)
        with open(log, "w") as stderr:
            status = subprocess.run([*ROUND_COMMAND, str(plan_path), str(out)], stdout=stderr,
                                    stderr=subprocess.STDOUT).returncode
        seen = set()
        for text in out.read_text().splitlines() if out.exists() else []:
            line = json.loads(text)
            seen.add(line["label"])
            failed = line.get("failed")
            if failed and failed["kind"] == "gpu shared":
                self.shared_gpu.append(failed["reason"])
            elif failed:
                where = f"{failed['side']}: " if failed.get("side") else ""
                self.failed.setdefault(line["label"], f"{where}{failed['kind']}: {failed['reason']}")
            else:
                self.measured[line["label"]].add(line)
        for label in labels:
            if label not in seen and label not in self.failed:
                last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
                self.failed[label] = f"the round's process exited {status} before measuring it: {last[:300]}"

    def measure(self, labels: list[str], rounds: int) -> dict[str, Case]:
        while not self.shared_gpu:
            short = [label for label in labels if label not in self.failed
                     and len(self.measured[label].ratios) < rounds]
            if not short:
                break
            self._round(short)
        return {label: Case(label, self.pairs[label].head.kernel, self.thresholds[label],
                            paired=self.measured[label].rounds(), noise=self.noise.get(label))
                for label in labels if label not in self.failed and len(self.measured[label].ratios) >= rounds}
