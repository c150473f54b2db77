"""asv suite: every catalogue kernel x size x precision (Gemm), and seed 003's kernels at shapes that vary M, N and
K (GemmShapes), each built, checked against FP64, then timed with NVBench.

The parameter lists come from the working tree's catalogue, read by path: asv runs this suite against the package
installed from each commit under test, and the lists must not change with it. A kernel that the commit under test
lacks, a shape a kernel does not claim and a GPU too old for a kernel are skips (NotImplementedError), not errors.
"""

import inspect
import os
from statistics import median

from . import under_test
from .worktree import FORMER_NAMES, KERNELS, PRECISIONS, REFERENCE, SIZES, SWEEP_KERNELS, SWEEP_SHAPES

try:
    from asv_runner.benchmarks.mark import SkipNotImplemented  # a skip raised from a benchmark method, not setup
except ImportError:
    SkipNotImplemented = NotImplementedError

try:
    # Imported once in asv's forkserver, so that every benchmark process forked from it starts with them. Neither
    # touches CUDA at import, which a forked process could not use again.
    import cupy  # noqa: F401

    under_test.record()
except ImportError:
    pass  # no GPU stack here (discovery on a CPU box), or the commit under test lacks the package: setup() says so
try:
    # The commit under test's catalogue, read and built here once: each of a run's ~3,000 processes asks it for its
    # kernel (sgemm.catalogue keeps what it built while the file's text stays the same).
    from sgemm.catalogue import load_catalogue

    load_catalogue()
except Exception:  # noqa: BLE001 - only a head start: a catalogue that cannot load is each setup()'s to report
    pass


# A card's number on the site: the first 24 bits of its id, exact as asv's float and short enough to read.
CARD_NUMBER_HEX_DIGITS = 6


class _MeasuredCase:
    """The figures of one case, each read from a single measurement made once per asv round (see
    sgemm.measuring.record)."""

    # The first benchmark process of a round measures every case of the run (sgemm.measuring.record): the whole
    # suite's 275 cases, each also timed paired against its reference build, in that one process.
    timeout = 3600

    def setup_cache(self):
        # A scratch directory private to this asv run, where each case's measurement waits for its other methods.
        return os.path.abspath("cases")

    def bind_case(self, run_dir, name, m, n, k):
        """For setup(): bind the case, or skip (NotImplementedError) when it cannot run here."""
        if name not in KERNELS and name not in FORMER_NAMES:
            raise NotImplementedError(f"there is no {name} kernel")
        try:
            asv_case = under_test.record().asv_case
        except ImportError as exc:
            raise NotImplementedError(f"the commit under test cannot run this suite: {exc}") from exc
        if len(inspect.signature(asv_case).parameters) == 3:  # commits before the shape sweep: square sizes only
            if not m == n == k:
                raise NotImplementedError("the commit under test times square shapes only")
            self.case = asv_case(run_dir, name, m)
        else:
            self.case = asv_case(run_dir, name, m, n, k)

    def figures(self, method):
        """The case's measurement for this method's round; a skip when the case may not be measured now."""
        try:
            return self.case.result(method)
        except NotImplementedError as exc:  # e.g. another process on the GPU
            raise SkipNotImplemented(str(exc)) from exc

    def track_time(self, run_dir, *params):
        return {"samples": self.figures("time").samples_s, "number": 1}

    track_time.unit = "seconds"

    def track_tflops(self, run_dir, *params):
        return self.figures("tflops").tflops

    track_tflops.unit = "TFLOP/s"

    def track_sm_clock(self, run_dir, *params):
        """The SM clock of every timed sample: asv keeps them, and rounds add to them, as for track_time."""
        clocks = self.figures("sm_clock").sm_clock_mhz
        return {"samples": clocks, "number": 1} if clocks else float("nan")

    track_sm_clock.unit = "MHz"

    def track_power(self, run_dir, *params):
        return self.figures("power").telemetry.get("power_w_mean", float("nan"))

    track_power.unit = "W"

    def track_temperature(self, run_dir, *params):
        return self.figures("temperature").telemetry.get("temperature_c_max", float("nan"))

    track_temperature.unit = "degC"

    def track_throttled(self, run_dir, *params):
        """Time the driver held clocks down (power or thermal) while the case was timed."""
        throttled = self.figures("throttled").telemetry.get("throttled_ms")
        # One sample per round, so that asv keeps every round's figure rather than the last one's.
        return {"samples": [sum(throttled.values())], "number": 1} if throttled else float("nan")

    track_throttled.unit = "ms"

    # One figure per round: asv appends each round's samples, so the rounds stay apart in the results and a verdict
    # can rest on the spread between processes, where the noise that matters lives (sgemm.gate.verdict).
    def track_round_time(self, run_dir, *params):
        """The round's median time."""
        return {"samples": [median(self.figures("round_time").samples_s)], "number": 1}

    track_round_time.unit = "seconds"

    def track_round_sm_clock(self, run_dir, *params):
        """The median SM clock over the round's samples."""
        clocks = self.figures("round_sm_clock").sm_clock_mhz
        return {"samples": [median(clocks)], "number": 1} if clocks else float("nan")

    track_round_sm_clock.unit = "MHz"

    def track_round_samples(self, run_dir, *params):
        """How many samples the round's median is of."""
        return {"samples": [len(self.figures("round_samples").samples_s)], "number": 1}

    track_round_samples.unit = "samples"

    def track_card(self, run_dir, *params):
        """Which physical card measured the round: a number from a hash of its NVML UUID (sgemm.measuring.telemetry)."""
        card = getattr(self.figures("card"), "card", "")  # commits before cards were recorded have none
        return {"samples": [int(card[:CARD_NUMBER_HEX_DIGITS], 16)], "number": 1} if card else float("nan")

    track_card.unit = "card"

    def over_reference(self, flushed):
        """The pair ratios against the reference build, where this commit timed them in that L2 regime. Each track
        asks under a name of its own: a method's n-th ask is round n."""
        method = "time_over_reference_flushed" if flushed else "time_over_reference"
        reference = getattr(self.figures(method), "reference", None) or {}
        if "pair_ratios" not in reference:
            raise SkipNotImplemented(reference.get("missing", "not timed against a reference build (sgemm history "
                                                              "names one)"))
        # Commits from before the flush record no "l2": their method says warm.
        is_flushed = reference.get("l2") == "flushed" or "L2 flushed" in reference.get("method", "")
        if is_flushed != flushed:
            raise SkipNotImplemented("this commit timed its reference pairing with L2 " + (
                "flushed: track_time_over_reference_flushed holds it" if is_flushed else
                "warm: track_time_over_reference holds it"))
        return {"samples": reference["pair_ratios"], "number": 1}

    def track_time_over_reference(self, run_dir, *params):
        """Time over the reference build's, L2 warm: the kernel as the reference commit has it ([suite] reference in
        the catalogue: its own source and entry) and as this commit has it, built in one process and timed side by
        side in alternating blocks, the builds' inputs left in L2. Each sample is one pair of blocks' ratio. At the
        power cap the clock moves by 30% between processes and the time with it; this ratio moves with the code
        alone. It ends at the commit whose package flushes L2 before every launch: track_time_over_reference_flushed
        goes on from there."""
        return self.over_reference(flushed=False)

    track_time_over_reference.unit = "ratio"
    # A moved reference is another figure: asv starts its series afresh and keeps the old one's results apart.
    track_time_over_reference.version = f"reference {REFERENCE}"

    def track_time_over_reference_flushed(self, run_dir, *params):
        """Time over the reference build's, L2 flushed before every launch (outside the timed events), as the gate's
        rounds and NVBench time a kernel: the pairing of track_time_over_reference, from the commit whose package
        began to flush on. A series of its own: a change of tile order or swizzle shows here and not warm."""
        return self.over_reference(flushed=True)

    track_time_over_reference_flushed.unit = "ratio"
    track_time_over_reference_flushed.version = f"reference {REFERENCE}"

    def track_joules_per_gemm(self, run_dir, *params):
        """The board's energy per launch, in joules: the kernel run back to back (launches queued ahead, L2 as the
        launches leave it) through a warm-up and a window whose ends are edges of NVML's energy counter, the energy
        between the edges over the launches in between (sgemm.measuring.energy). The history charges the square cases
        at 4096 and 8192 alone. A reading whose implied power is above the board's power limit, or that is otherwise
        flagged, is not recorded: a skip with the reason, as is a GPU without an energy counter."""
        energy = getattr(self.figures("joules_per_gemm"), "energy", None) or {}  # older commits charged none
        if "joules_per_launch" not in energy:
            raise SkipNotImplemented(energy.get("missing", "energy not charged (the history charges the cases at "
                                                           "the sizes SGEMM_ENERGY_SIZES names)"))
        if energy.get("flag"):
            raise SkipNotImplemented(f"energy reading flagged, not recorded: {energy['flag']}")
        return energy["joules_per_launch"]

    track_joules_per_gemm.unit = "J"


class Gemm(_MeasuredCase):
    """C = A @ B (alpha 1, beta 0), square: time per launch, and the rate and GPU state it ran at."""

    params = [
        list(dict.fromkeys([kernel.family for kernel in KERNELS.values()]
                           + [name.split("/", 1)[1] for name in FORMER_NAMES])),
        SIZES,
        PRECISIONS,
    ]
    param_names = ["kernel", "size", "precision"]

    def setup(self, run_dir, kernel, size, precision):
        name = f"{precision}/{kernel}"
        if name in KERNELS and size not in KERNELS[name].sizes:
            raise NotImplementedError(f"{name} is timed at {', '.join(map(str, KERNELS[name].sizes))} alone")
        self.bind_case(run_dir, name, size, size, size)


class GemmShapes(_MeasuredCase):
    """Seed 003's sweep: its kernels at shapes that vary M, N and K one at a time."""

    params = [SWEEP_KERNELS + [old for name in SWEEP_KERNELS for old in KERNELS[name].renamed_from],
              [f"{m}x{n}x{k}" for m, n, k in SWEEP_SHAPES]]
    param_names = ["kernel", "shape"]

    def setup(self, run_dir, kernel, shape):
        self.bind_case(run_dir, kernel, *(int(size) for size in shape.split("x")))
