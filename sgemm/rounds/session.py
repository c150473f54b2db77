"""The gate's rounds where base and head can share a process: the change is confined to kernel sources, headers and
catalogue entries, and the code that measures is the same at both commits.

Each commit's kernels and catalogue are exported from git (sgemm.sourcetree). A round is one process
(`python -m sgemm.measuring.ab`) that builds every open case from both trees, checks both builds against FP64, times
them paired and writes one ratio per case; rounds repeat until each case has the rounds its look asks for
(sgemm.gate.looks). A case whose two builds are the same program is SAME without being timed: the same cubin for
this GPU (a comment in a shared header changes the source NVRTC reads, not what it makes) and the same launch (every
catalogue field that shapes it: two entries can share a cubin and differ in their grid, shared memory, cluster, TMA
boxes or pitch); a library kernel (cuBLAS) is one library for both sides of one process. `time_unchanged` times them
anyway, as an A/A gate wants.

A gate cut off (killed, or out of time) resumes from its work folder when run again on it: the rounds of the earlier
run whose plan is this gate's (the same base and head commits, the same build inputs for the case, the same
machine, measuring code and round settings) count toward the rounds each case needs, their complete lines only;
rounds planned otherwise are moved aside into set-aside/, never mixed in. A case is judged at each look on its first
rounds, as many as that look asks for, so that a resumed gate judges what an uninterrupted one would have.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .. import sourcetree
from ..contained import contained
from ..catalogue import Kernel
from ..measuring.build import kernel_source
from ..measuring.cards import VISIBLE_VARIABLE
from ..measuring.paired import TRIMMED_MEAN, PairedSettings
from .evidence import Case, Noise, PairedRounds
from .pairs import Pair

ROUND_COMMAND = (sys.executable, "-m", "sgemm.measuring.ab")  # + PLAN OUT: one round, one process
# Where a sandboxed round keeps its compiles for the gate's later rounds: CuPy's cubins and sgemm's compile figures.
# The sandbox starts each process with an empty home, so without these every round compiled every build again
# (rounds of 9-10 s against 4-5 s bare, lab/2026-11-28-sandbox-gpu). One folder a gate, in its work folder: nothing
# a pull request's round compiles reaches another job.
COMPILE_CACHES = {"CUPY_CACHE_DIR": "cupy", "SGEMM_CACHE_DIR": "sgemm"}
# One round's timing of a case: it runs until its own interval (95%) is within 0.2% of its ratio, or for max_s, so that
# a quiet case stops after a few pairs and a kernel whose launches jitter gets more time (how much the kernels'
# launches vary: lab/2026-11-25-pair-noise/).
# A round's figure is the trimmed mean of its pairs' log ratios, the steadier of the two estimators from round to
# round, which is what decides how soon a case is SAME. L2 is flushed before every launch, as NVBench, Triton's
# do_bench and most leaderboards time a kernel: a change of tile order or swizzle acts through L2 and shows only so
# (lab/2026-11-25-hopper-fresh compares the two). The settings are part of the paired noise a noise file learns.
ROUND_SETTINGS = PairedSettings(warmup_s=0.2, max_warmup_s=2.0, min_pairs=6, min_s=0.2, max_s=4.0,
                                target_half_width=0.002, flush_l2=True, estimator=TRIMMED_MEAN)
# A case whose bounds lie far from a decision gets up to this long a round instead of max_s (sgemm.gate.run's
# round_time): time goes where more of it decides something, and a round of cases near their decision ends soon.
LONGEST_ROUND_S = 12.0
L2_FLUSHED, L2_WARM = "flushed", "warm"
L2_MODES = (L2_FLUSHED, L2_WARM)


def round_settings(l2: str = L2_FLUSHED) -> PairedSettings:
    """A paired round's settings with L2 flushed before every launch (the default) or warm."""
    if l2 not in L2_MODES:
        raise ValueError(f"L2 is {' or '.join(L2_MODES)}, not {l2!r}")
    return replace(ROUND_SETTINGS, flush_l2=l2 == L2_FLUSHED)

# What a change must exceed to count: a paired ratio is precise to about 0.05% (so a 0.5% change clears 0.25% with
# room), a ratio of separate processes to a few tenths of a percent below the power cap.
PAIRED_THRESHOLD = 0.0025
IDLE_TIMEOUT_S = 30  # how long a comparison waits for another process to leave the GPU before it gives up


class PairingError(RuntimeError):
    """The two commits' kernels cannot be built side by side (a tree that cannot be exported or read)."""


class GpuNotFree(RuntimeError):
    """Another process is on the GPU (or whether one is cannot be told): nothing measured beside it can be believed;
    the message names it."""


def launch_signature(kernel: Kernel) -> tuple:
    """Everything of an entry that decides how its program is launched and on what. The geometry a kernel states
    of itself is in its cubin (program_digest); what an older catalogue states of it is here."""
    return (kernel.library, kernel.entry, kernel.tuned_entries, kernel.types.input, kernel.types.output,
            kernel.pitch, kernel.grid_rule, kernel.target, kernel.stated)


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


_ROUND_FILE = re.compile(r"round-(\d+)\.plan\.json")


def build_digest(kernel: Kernel | None) -> str:
    """sha256 of what a build's program is made of: its catalogue entry (where its tree lies aside) and its source
    with every header it includes."""
    if kernel is None:
        return ""
    digest = hashlib.sha256(repr(replace(kernel, kernel_dir=Path())).encode())
    if kernel.source:
        digest.update(kernel_source(kernel).encode())
    return digest.hexdigest()


def measuring_code_digest() -> str:
    """sha256 of the code a round's process runs: this package's measuring modules and what reads the trees."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in [*sorted((package / "measuring").glob("*.py")), package / "sourcetree.py", package / "catalogue.py"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Resumed:
    """What a gate took over from the rounds an earlier run of it left in its work folder."""

    rounds: int  # round processes with a line taken
    cases: int
    lines: int
    first: str  # when the first and the last of those rounds were written (UTC)
    last: str
    set_aside: int  # rounds planned otherwise, moved aside
    where: Path

    def describe(self) -> str:
        text = (f"{self.rounds} rounds of {self.cases} cases reused from {self.where} ({self.lines} case rounds, "
                f"written {self.first} to {self.last})") if self.lines else f"no round reused from {self.where}"
        return text + (f"; {self.set_aside} rounds of another plan moved aside" if self.set_aside else "")


@dataclass
class _Measured:
    lines: list[dict] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.lines)

    def rounds(self, count: int) -> PairedRounds:
        """The first `count` rounds: a look judges the rounds it asked for, however many an earlier run left."""
        lines = self.lines[:count]
        sides = [(line["sides"]["base"], line["sides"]["head"]) for line in lines]
        return PairedRounds(tuple(line["ratio"] for line in lines),
                            tuple(base["sm_clock_mhz"] for base, _ in sides),
                            tuple(head["sm_clock_mhz"] for _, head in sides),
                            tuple(base["median_s"] for base, _ in sides),
                            tuple(head["median_s"] for _, head in sides),
                            min((line["launches_per_block"] * min(base["median_s"], head["median_s"])
                                 for line, (base, head) in zip(lines, sides)), default=math.inf),
                            tuple(line.get("joules_per_launch", math.nan) for line in lines))


def _complete(line: object) -> bool:
    """A line a round's process finished writing: a ratio with its sides, or a failure."""
    if not isinstance(line, dict) or not isinstance(line.get("label"), str):
        return False
    if isinstance(line.get("failed"), dict):
        return {"kind", "reason"} <= line["failed"].keys()
    try:
        sides = line["sides"]["base"], line["sides"]["head"]
        return all(isinstance(value, (int, float)) for value in (
            line["ratio"], line["launches_per_block"], *(side[key] for side in sides
                                                         for key in ("sm_clock_mhz", "median_s"))))
    except (KeyError, TypeError):
        return False


class RoundFileError(RuntimeError):
    """A round's output is no file the judge reads: a link, not a regular file, too large, or not JSON lines."""


MAX_ROUND_FILE_BYTES = 64 * 2**20  # far above any round's lines; a file larger is not one


def read_round_file(path: Path, limit: int = MAX_ROUND_FILE_BYTES) -> str:
    """A file a sandboxed process wrote, read as the judge must: no link followed, nothing but a regular file, at
    most `limit` bytes; "" where it is not there."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise RoundFileError(f"{path}: not read ({'a link' if exc.errno == errno.ELOOP else exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise RoundFileError(f"{path}: not a regular file")
    with os.fdopen(handle, "rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise RoundFileError(f"{path}: larger than {limit} bytes")
    return data.decode(errors="replace")


def _read_lines(path: Path) -> list[dict]:
    """The complete lines of a round's output; the last one, cut off as it was written, is left out, and any other
    line that is not JSON makes the file unreadable (RoundFileError)."""
    found = []
    texts = read_round_file(path).splitlines()
    for number, text in enumerate(texts, 1):
        try:
            line = json.loads(text)
        except ValueError:
            if number == len(texts):
                continue
            raise RoundFileError(f"{path}: line {number} is not JSON") from None
        if _complete(line):
            found.append(line)
    return found


def _normal(value):
    """As JSON reads it back: a plan written earlier compares equal to the same plan made now."""
    return json.loads(json.dumps(value))


class PairedSession:
    """`measure(labels, rounds)` for sgemm.gate.looks: round processes over exactly those cases until each has
    that many rounds."""

    def __init__(self, repo: Path, base: str, head: str, pairs: list[Pair], work_dir: Path, device: int,
                 thresholds: dict[str, float], noise: dict[str, Noise], gpu_check: Callable[[], None],
                 settings: PairedSettings = ROUND_SETTINGS, machine: str = "", devices: list[int] | None = None,
                 device_check: Callable[[int], None] | None = None):
        """`devices`: the cards to spread the cases over (default: `device` alone), each case's rounds on one of
        them; `device_check(device)`, where given, stands for `gpu_check` before each card's round."""
        self.pairs = {pair.label: pair for pair in pairs}
        self.thresholds, self.noise, self.gpu_check, self.settings, self.device = thresholds, noise, gpu_check, \
            settings, device
        self.devices = list(devices) if devices else [device]
        self.round_s: dict[str, float] = {}  # a case's own time limit in its next rounds, where not max_s
        self.device_check = device_check
        self.card = spread_by_cost({label: case_cost(pair) for label, pair in self.pairs.items()}, self.devices)
        self.trees = {}
        shutil.rmtree(work_dir / "trees", ignore_errors=True)  # an earlier run's exports: made again, from the commits
        try:
            for side, commit in (("base", base), ("head", head)):
                self.trees[side] = sourcetree.export(repo, commit, work_dir / "trees" / side)
            self.kernels = {side: sourcetree.kernels(tree) for side, tree in self.trees.items()}
        except sourcetree.TreeError as exc:
            raise PairingError(str(exc)) from exc
        # What makes a round's lines this gate's, beside each case's own entry in the plan.
        self.identity = {"base": base, "head": head, "machine": machine, "measuring_code": measuring_code_digest()}
        self.work_dir = work_dir
        self.rounds_dir = work_dir / "rounds"
        self.rounds_dir.mkdir(parents=True, exist_ok=True)
        self.measured: dict[str, _Measured] = {label: _Measured() for label in self.pairs}
        self.failed: dict[str, str] = {}
        self.shared_gpu: list[str] = []
        self.processes = 0  # this run's
        self.next_round = 1
        self.resumed: Resumed | None = None

    def builds(self, label: str) -> tuple[Kernel | None, Kernel | None]:
        pair = self.pairs[label]
        return self.kernels["base"].get(pair.base.kernel), self.kernels["head"].get(pair.head.kernel)

    def unchanged(self, compute_capability: int) -> dict[str, str]:
        both = [(label, *self.builds(label)) for label in self.pairs]
        return unchanged_programs([item for item in both if item[1] and item[2]], compute_capability)

    def _case(self, label: str) -> dict:
        pair = self.pairs[label]
        before, after = self.builds(label)
        return {"label": label, "kernels": {"base": pair.base.kernel, "head": pair.head.kernel},
                "shape": list(pair.head.shape), "builds": {"base": build_digest(before), "head": build_digest(after)}}

    def _plan(self, labels: list[str], device: int) -> dict:
        return {"trees": {side: str(tree) for side, tree in self.trees.items()}, "device": device,
                "settings": asdict(self.settings), "identity": self.identity,
                "cases": [self._case(label) for label in labels],
                "max_s": {label: self.round_s[label] for label in labels if label in self.round_s}}

    def _take(self, line: dict) -> None:
        failed = line.get("failed")
        if failed and failed["kind"] == "gpu shared":
            self.shared_gpu.append(failed["reason"])
        elif failed:
            where = f"{failed['side']}: " if failed.get("side") else ""
            self.failed.setdefault(line["label"], f"{where}{failed['kind']}: {failed['reason']}")
        else:
            self.measured[line["label"]].lines.append(line)

    def resume(self, labels: list[str]) -> Resumed | None:
        """Take over the rounds an earlier run of this gate left for these cases (None when there were none), and
        move aside those of another plan. A case's line counts where the plan it ran under is the one this gate
        would write for it; a line cut off, or a GPU found shared, is measured again."""
        earlier = sorted((int(match.group(1)), path) for path in self.rounds_dir.glob("round-*.plan.json")
                         if (match := _ROUND_FILE.fullmatch(path.name)))
        if not earlier:
            return None
        wanted = {label: _normal(self._case(label)) for label in labels}
        common = _normal({"settings": asdict(self.settings), "identity": self.identity})
        set_aside, taken, lines_taken, cases, times = 0, 0, 0, set(), []
        aside = self._aside_folder()
        for number, plan_path in earlier:
            out = self.rounds_dir / f"round-{number}.jsonl"
            try:
                plan = json.loads(plan_path.read_text())
                cases_planned = {case["label"]: case for case in plan["cases"]}
                ours = all(plan.get(key) == value for key, value in common.items()) \
                    and plan.get("device") in self.devices
            except (ValueError, KeyError, TypeError, AttributeError):
                ours = False
            if not ours:
                aside.mkdir(parents=True, exist_ok=True)
                for path in self.rounds_dir.glob(f"round-{number}.*"):
                    path.rename(aside / path.name)
                set_aside += 1
                continue
            self.next_round = number + 1
            lines = [line for line in _read_lines(out) if line["label"] in wanted
                     and cases_planned.get(line["label"]) == wanted[line["label"]]
                     and plan.get("device") == self.card[line["label"]]  # a case's rounds stay on one card
                     and (line.get("failed") or {}).get("kind") != "gpu shared"
                     and line["label"] not in self.failed]
            for line in lines:
                self._take(line)
                cases.add(line["label"])
            if lines:
                taken, lines_taken = taken + 1, lines_taken + len(lines)
                times.append(out.stat().st_mtime)
        first, last = [time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(moment))
                       for moment in (min(times), max(times))] if times else ("", "")
        self.resumed = Resumed(taken, len(cases), lines_taken, first, last, set_aside, self.rounds_dir)
        return self.resumed

    def _aside_folder(self) -> Path:
        """Where earlier rounds of another plan (other commits, settings, machine or code) are kept, out of the way:
        nothing reads set-aside/ as this gate's rounds, nor `sgemm noise` as anyone's."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        folder, copy = self.work_dir / "set-aside" / stamp, 1
        while folder.exists():
            copy += 1
            folder = self.work_dir / "set-aside" / f"{stamp}-{copy}"
        return folder

    def _start(self, device: int, labels: list[str]) -> tuple[int, Path, Path, subprocess.Popen]:
        """A round's process on `device` over these cases, started."""
        if self.device_check:
            self.device_check(device)
        else:
            self.gpu_check()
        self.processes += 1
        number, self.next_round = self.next_round, self.next_round + 1
        plan_path = self.rounds_dir / f"round-{number}.plan.json"
        out, log = (self.rounds_dir / f"round-{number}.jsonl", self.rounds_dir / f"round-{number}.log")
        narrowed = one_card(device)
        plan = self._plan(labels, device)
        if narrowed:
            plan["cuda_device"] = 0
        plan_path.write_text(json.dumps(plan))
        where = f" on GPU {device}" if len(self.devices) > 1 else ""
        print(f"sgemm gate: round {number}: {len(labels)} cases paired in one process{where}", file=sys.stderr)
        out.write_bytes(b"")  # the file the round's process writes its lines to, made by the judge
        caches = self.work_dir / "compile-cache"
        passed = {name: str(caches / folder) for name, folder in COMPILE_CACHES.items()}
        for folder in passed.values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        if narrowed:
            passed[VISIBLE_VARIABLE] = narrowed.uuid
        command = contained([*ROUND_COMMAND, str(plan_path), str(out)], readable=[self.work_dir],
                            writable=[out, caches], devices=[narrowed.node if narrowed else device], env=passed)
        environment = {**os.environ, VISIBLE_VARIABLE: narrowed.uuid} if narrowed else None
        with open(log, "w") as stderr:
            process = subprocess.Popen(command, stdout=stderr, stderr=subprocess.STDOUT, env=environment)
        return number, out, log, process

    def _rounds(self, by_device: dict[int, list[str]]) -> None:
        """One round on each card at once, each over its own cases, and their lines taken once all have ended."""
        started = time.monotonic()
        running = []
        try:
            for device, labels in by_device.items():
                running.append((labels, *self._start(device, labels)))
        finally:
            statuses = [process.wait() for *_, process in running]
        for (labels, number, out, log, _), status in zip(running, statuses):
            print(f"sgemm gate: round {number}: done in {time.monotonic() - started:.0f} s", file=sys.stderr)
            seen = set()
            for line in _read_lines(out):
                seen.add(line["label"])
                self._take(line)
            for label in labels:
                if label not in seen and label not in self.failed:
                    last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
                    self.failed[label] = f"the round's process exited {status} before measuring it: {last[:300]}"

    def measure(self, wanted: dict[str, int]) -> dict[str, Case]:
        """Each case with its `wanted` rounds (its first ones), a round's process holding every case that still
        needs one; the cases that failed left out."""
        while not self.shared_gpu:
            short = [label for label, rounds in wanted.items()
                     if label not in self.failed and self.measured[label].count < rounds]
            if not short:
                break
            by_device: dict[int, list[str]] = {}
            for label in short:
                by_device.setdefault(self.card[label], []).append(label)
            self._rounds(dict(sorted(by_device.items())))
        return {label: Case(label, self.pairs[label].head.kernel, self.thresholds[label],
                            paired=self.measured[label].rounds(rounds), noise=self.noise.get(label))
                for label, rounds in wanted.items()
                if label not in self.failed and self.measured[label].count >= rounds}


# Seconds a case's round costs before its pairs (build, FP64 check, warm-up), and what a 4096^3 GEMM's work adds:
# a guess before any round, which only needs to put a heavy case and a light one on different cards.
CASE_FLOOR_S, WORK_4096_S = 1.0, 1.0


def case_cost(pair: Pair) -> float:
    """What a case's round is guessed to cost, from its shape."""
    m, n, k = pair.head.shape
    return CASE_FLOOR_S + WORK_4096_S * m * n * k / 4096 ** 3


@dataclass(frozen=True)
class OneCard:
    """A card as a round's process is given it: CUDA_VISIBLE_DEVICES naming its UUID, and its device node's number
    for a sandbox to bind."""

    uuid: str
    node: int


def one_card(device: int) -> OneCard | None:
    """The card this process numbers `device`, to be the only one its round's process sees: one that saw every card
    of a box held a context on the first of them too, where that card's own round counted it as a co-tenant and
    stopped the gate (four H100s, --gpus all). None where NVML cannot list the cards (a box of one, as far as this
    process can tell): the process is then started as it is."""
    from ..measuring.cards import CardsError, visible_cards
    from ..measuring.telemetry import TelemetryUnavailable, device_minor

    try:
        cards = visible_cards()
        if not 0 <= device < len(cards):
            return None  # CUDA says what is wrong with it, in the round's log
        return OneCard(cards[device].uuid, device_minor(cards[device].uuid))
    except (CardsError, TelemetryUnavailable):
        return None


def spread_by_cost(costs: dict[str, float], devices: list[int]) -> dict[str, int]:
    """Each case's card: costliest first onto the least loaded card (the lowest among equals), ties between cases
    broken by their names, so that the same cases always land on the same cards."""
    loads = {device: 0.0 for device in devices}
    chosen = {}
    for label in sorted(costs, key=lambda label: (-costs[label], label)):
        device = min(devices, key=lambda d: (loads[d], d))
        chosen[label] = device
        loads[device] += costs[label]
    return chosen


def wait_for_gpu(device: int, timeout_s: float) -> None:
    """Return when no other process is on the GPU; GpuNotFree naming them after `timeout_s`."""
    from ..measuring.telemetry import GpuBusyError, TelemetryUnavailable, nvml_handle, wait_until_idle

    try:
        handle = nvml_handle(device)
    except TelemetryUnavailable as exc:
        raise GpuNotFree(f"cannot check that the GPU is free: {exc}") from exc
    try:
        wait_until_idle(handle, timeout_s, own_pids=frozenset({os.getpid()}))
    except GpuBusyError as exc:
        raise GpuNotFree(str(exc)) from exc
