"""The asv contract: which benchmark, parameters, selection pattern and result fields hold a case's figures.

The suite (`benchmarks/bench_gemm.py`) measures kernel x size x precision in class `Gemm` and seed 003's shape
sweep in class `GemmShapes`; each figure of a case is one track method. The gate, the reports, the cross-GPU page
and the scripts name cases through this module only, and read asv's results through `RunReader`.
"""

from __future__ import annotations

import ast
import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ..catalogue import Kernel
from . import resultstree

MODULE = "bench_gemm"
GEMM, SHAPES = "Gemm", "GemmShapes"
GEMM_PARAMS = ("kernel", "size", "precision")  # class Gemm's param_names, in its order

TIME = "track_time"  # every NVBench sample of every round (seconds)
TFLOPS = "track_tflops"
SM_CLOCK = "track_sm_clock"  # the SM clock of every sample (MHz)
POWER = "track_power"
TEMPERATURE = "track_temperature"
THROTTLED = "track_throttled"  # one figure per round: time the driver held clocks down (ms)
# One figure per round (asv appends each round's samples), so that rounds stay apart in the results.
ROUND_TIME = "track_round_time"  # the round's median time (seconds)
ROUND_SM_CLOCK = "track_round_sm_clock"  # the round's median SM clock (MHz)
ROUND_SAMPLES = "track_round_samples"  # how many samples the round's median is of
CARD = "track_card"  # which physical card measured the round (sgemm.measuring.telemetry.card_number)
ROUND_TRACKS = (ROUND_TIME, ROUND_SM_CLOCK, ROUND_SAMPLES, CARD)
# Time over the reference build's, paired in one process (a ratio): with L2 warm, up to the commit whose package began
# to flush L2 before every launch, where that track ends and the flushed one begins. Each is a series of its own: the
# two regimes read different ratios, and a series crossing from one to the other would show a step of no code.
OVER_REFERENCE = "track_time_over_reference"
OVER_REFERENCE_FLUSHED = "track_time_over_reference_flushed"
# The board's energy per launch over a window of back-to-back launches between two edges of NVML's counter
# (sgemm.measuring.energy), for the square cases at the sizes a run charges (SGEMM_ENERGY_SIZES) alone; a flagged
# reading is a skip with its reason.
JOULES = "track_joules_per_gemm"
TRACKS = (TIME, TFLOPS, SM_CLOCK, POWER, TEMPERATURE, THROTTLED, *ROUND_TRACKS, OVER_REFERENCE, OVER_REFERENCE_FLUSHED,
          JOULES)
# What a gate's report reads; it runs no others (every track is a process per case and round: the sample counts and
# the power are for the history).
GATE_TRACKS = (ROUND_TIME, ROUND_SM_CLOCK, CARD, THROTTLED)

# The resource suite (benchmarks/bench_resources.py): kernel x architecture, one track per figure of ptxas's report.
RESOURCES = "bench_resources.Resources"
RESOURCE_TRACKS = ("track_registers", "track_shared_memory", "track_local_memory", "track_spill_stores",
                   "track_spill_loads")

GPU_MODULE_CLASS = "bench_gpu.Gpu"
SM_COUNT = f"{GPU_MODULE_CLASS}.track_sm_count"
MAX_SM_CLOCK = f"{GPU_MODULE_CLASS}.track_max_sm_clock"
# What the box measured with, as numbers asv can keep (benchmarks/bench_gpu.py): a step that comes with a change of
# one of them is the environment's, not the code's.
DRIVER_VERSION = f"{GPU_MODULE_CLASS}.track_driver_version"  # 580.159.04 as 580159004
CUDA_DRIVER_VERSION = f"{GPU_MODULE_CLASS}.track_cuda_driver_version"  # the CUDA version the driver supports: 13000
CUBLAS_VERSION = f"{GPU_MODULE_CLASS}.track_cublas_version"  # cuBLAS 13.1.0 as 130100


def driver_text(number: float | None) -> str | None:
    """A driver version as NVIDIA writes it, from the number a run recorded (DRIVER_VERSION): 580159004 -> '580.159.04',
    535054 -> '535.54'; None where none was recorded."""
    if number is None or not math.isfinite(number) or number < 1000:
        return None
    whole = int(number)
    if whole >= 1_000_000:
        return f"{whole // 1_000_000}.{whole // 1000 % 1000}.{whole % 1000:02d}"
    return f"{whole // 1000}.{whole % 1000}"


def cuda_text(number: float | None) -> str | None:
    """The CUDA version a driver supports, from its number (CUDA_DRIVER_VERSION): 13000 -> '13.0', 12080 -> '12.8'."""
    if number is None or not math.isfinite(number) or number < 1000:
        return None
    return f"{int(number) // 1000}.{int(number) % 1000 // 10}"


def cublas_text(number: float | None) -> str | None:
    """cuBLAS's version from its number (CUBLAS_VERSION): 130100 -> '13.1.0'."""
    if number is None or not math.isfinite(number) or number < 10000:
        return None
    return f"{int(number) // 10000}.{int(number) // 100 % 100}.{int(number) % 100}"


@dataclass(frozen=True, order=True)
class SuiteCase:
    """One case of the suite: a benchmark class and one combination of its parameters."""

    benchmark: str  # GEMM or SHAPES
    params: tuple  # Python values, e.g. ("float4", 4096, "fp32") or ("fp32/naive", "1024x1024x512")

    @classmethod
    def square(cls, kernel: str, size: int) -> SuiteCase:
        precision, family = kernel.split("/", 1)
        return cls(GEMM, (family, size, precision))

    @classmethod
    def sweep(cls, kernel: str, shape: tuple[int, int, int]) -> SuiteCase:
        return cls(SHAPES, (kernel, "x".join(map(str, shape))))

    @property
    def kernel(self) -> str:
        if self.benchmark == GEMM:
            family, _, precision = self.params
            return f"{precision}/{family}"
        return self.params[0]

    @property
    def precision(self) -> str:
        return self.kernel.split("/", 1)[0]

    @property
    def shape(self) -> tuple[int, int, int]:
        if self.benchmark == GEMM:
            size = self.params[1]
            return size, size, size
        m, n, k = (int(part) for part in self.params[1].split("x"))
        return m, n, k

    @property
    def label(self) -> str:
        """The case as reports name it: the kernel's name, then its shape."""
        m, n, k = self.shape
        return f"{self.kernel} {m}x{n}x{k}" + (" (shape sweep)" if self.benchmark == SHAPES else "")

    def name(self, method: str) -> str:
        """asv's name of one of the case's benchmarks."""
        return f"{MODULE}.{self.benchmark}.{method}"

    def charged(self, sizes: tuple[int, ...]) -> bool:
        """Whether a run charging energy at `sizes` charges this case's (JOULES): a square case at one of them."""
        m, n, k = self.shape
        return self.benchmark == GEMM and m == n == k and m in sizes

    def tracks(self, charged_sizes: tuple[int, ...] = ()) -> tuple[str, ...]:
        """The tracks a history charging energy at `charged_sizes` runs of this case: every one, JOULES only where it
        is charged (asv would start a process for it elsewhere only to skip it)."""
        return TRACKS if self.charged(charged_sizes) else tuple(track for track in TRACKS if track != JOULES)

    @property
    def asv_params(self) -> tuple[str, ...]:
        """The parameter values as asv writes them in results and names (each value's repr)."""
        return tuple(repr(value) for value in self.params)

    def entry(self, method: str) -> str:
        """asv's name of the case in one method, as `asv run --bench` and the site's regressions.json see it."""
        return f"{self.name(method)}({', '.join(self.asv_params)})"

    def pattern(self, methods: tuple[str, ...] = GATE_TRACKS) -> str:
        """asv's -b regular expression selecting exactly this case's methods (asv matches `name(param, ...)`)."""
        arguments = ", ".join(self.asv_params)
        return rf"^{MODULE}\.{self.benchmark}\.({'|'.join(methods)})\({re.escape(arguments)}\)$"


def resource_pattern(kernel: str, architectures: tuple[str, ...]) -> str:
    """asv's -b regular expression selecting every resource track of one kernel at these architectures alone."""
    arches = "|".join(re.escape(repr(arch)) for arch in architectures)
    return rf"^{re.escape(RESOURCES)}\.({'|'.join(RESOURCE_TRACKS)})\({re.escape(repr(kernel))}, ({arches})\)$"


def cases_for(kernels: list[Kernel], sizes: list[int] | None, sweep_kernels: list[str],
              sweep_shapes: list[tuple[int, int, int]], controls: tuple[str, ...] = ()) -> list[SuiteCase]:
    """Every case of the suite that measures one of these kernels: each at the square sizes its entry lists (those
    of them in `sizes`, when given); the controls at the square sizes only.

    A control tells whether the box moved between the two commits' runs: its square sizes show that, and measuring
    it again across the shape sweep would lengthen every gate for no further evidence.
    """
    cases = []
    for kernel in kernels:
        cases += [SuiteCase.square(kernel.name, size) for size in kernel.sizes if sizes is None or size in sizes]
        if kernel.name in sweep_kernels and kernel.name not in controls:
            cases += [SuiteCase.sweep(kernel.name, shape) for shape in sweep_shapes]
    return cases


def is_figure(value) -> bool:
    """Whether a value of a run file is one asv and this suite write: none (a skip or a failure), NaN (no figure) or
    a finite number; a string, a list or an infinity is a damaged file."""
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                             and not math.isinf(value))


def checked_figures(values: list, what: str) -> list:
    """`values` as they are; ValueError naming `what` and the first of them that is no figure (is_figure)."""
    if damaged := [value for value in values if not is_figure(value)]:
        raise ValueError(f"{what} holds {damaged[0]!r}, which is no figure: the run file is damaged")
    return values


def run_figures(run, where: str) -> dict[str, list]:
    """Every benchmark's figures of an asv run (asv.results.Results), each list checked by checked_figures, whose
    ValueError names `where` and the benchmark."""
    return {name: checked_figures(run.get_result_value(name, run.get_result_params(name)), f"{where}: {name}")
            for name in run.get_all_result_keys()}


class RunReader:
    """One asv run (a machine at a commit in one environment): a case's figure by method."""

    def __init__(self, run):
        self.run = run  # asv.results.Results
        self._combos: dict[str, list[tuple]] = {}

    @property
    def commit(self) -> str:
        return self.run.commit_hash

    @property
    def date(self):
        return self.run.date

    def _combinations(self, name: str) -> list[tuple]:
        """The benchmark's parameter combinations as Python values, in asv's order (of a benchmark it recorded)."""
        if name not in self._combos:
            raw = self.run.get_result_params(name)  # each value as its repr, e.g. "'naive'"
            self._combos[name] = [tuple(ast.literal_eval(v) for v in combo) for combo in itertools.product(*raw)]
        return self._combos[name]

    def _index(self, name: str, params: tuple) -> int | None:
        if name not in self.run.get_all_result_keys():
            return None
        combos = self._combinations(name)
        return combos.index(params) if params in combos else None

    def value(self, case: SuiteCase, method: str):
        """The recorded value: None when the benchmark failed, NaN when it was skipped or not run."""
        name = case.name(method)
        index = self._index(name, case.params)
        if index is None:
            return math.nan
        return self.run.get_result_value(name, self.run.get_result_params(name))[index]

    def samples(self, case: SuiteCase, method: str) -> list[float] | None:
        """Every sample asv kept (one per round for the round tracks), or None."""
        name = case.name(method)
        index = self._index(name, case.params)
        if index is None:
            return None
        samples = self.run.get_result_samples(name, self.run.get_result_params(name))[index]
        return list(samples) if samples else None

    def values(self, benchmark: str, method: str) -> dict[SuiteCase, float | None]:
        """Every case's value of one method of one benchmark class."""
        name = f"{MODULE}.{benchmark}.{method}"
        if name not in self.run.get_all_result_keys():
            return {}
        values = checked_figures(self.run.get_result_value(name, self.run.get_result_params(name)),
                                 f"{name} of commit {self.commit[:8]}")
        return {SuiteCase(benchmark, combo): value for combo, value in zip(self._combinations(name), values)}

    def seconds_in(self, modules: tuple[str, ...]) -> float:
        """How long asv spent on these modules' benchmarks in this run, their setup_cache included (the durations
        it recorded; keys are "bench_gpu.Gpu.track_sm_count" or "<setup_cache bench_resources:18>")."""
        def module(key: str) -> str:
            setup = key.removeprefix("<setup_cache ")
            return setup.partition(":")[0] if setup != key else key.split(".")[0]

        return sum(float(seconds) for key, seconds in self.run.duration.items() if module(key) in modules)

    def scalar(self, name: str):
        """A parameterless benchmark's value (e.g. SM_COUNT), or None."""
        if name not in self.run.get_all_result_keys():
            return None
        return self.run.get_result_value(name, [])[0]


def runs(results_dir: Path, machine: str, commit: str | None = None, strict: bool = False) -> list[RunReader]:
    """Every run of a machine (of one commit, when given), oldest first. A run file asv cannot read is left out with
    asv's warning; with `strict`, ValueError names it instead (for a reading whose answer would change without it)."""
    from asv.results import iter_results_for_machine, iter_results_for_machine_and_hash

    if strict:
        found = [run for run in _every_run(Path(results_dir) / machine) if not commit or
                 run.commit_hash.startswith(commit)]
    else:
        found = (iter_results_for_machine_and_hash(str(results_dir), machine, commit) if commit
                 else iter_results_for_machine(str(results_dir), machine))
    return sorted((RunReader(run) for run in found), key=lambda r: r.date or 0)


def _every_run(machine_dir: Path) -> list:
    """Every run file of a machine's directory (not the files this package keeps beside them: resultstree) as asv
    reads it; ValueError naming the first it cannot read, with asv's words."""
    from asv.results import Results
    from asv.util import UserError

    found = []
    for path in sorted(Path(machine_dir).glob("*.json")):
        if not resultstree.is_run_file(path):
            continue
        try:
            found.append(Results.load(str(path), machine_name=Path(machine_dir).name))
        except UserError as exc:
            raise ValueError(str(exc)) from None
        except (ValueError, TypeError, KeyError, OSError) as exc:  # bytes that are not UTF-8, or JSON of another shape
            raise ValueError(f"{path}: not an asv results file ({type(exc).__name__}: {exc})") from None
    return found
