"""Seed ladder reports: each seed worklog's table (kernel, TFLOP/s, % of cuBLAS, % of the GPU's peak, median SM
clock) rebuilt from measurements on one GPU, with a plot of TFLOP/s against size per seed and precision.

Measurements come from what `asv run` recorded for one machine, or from a fresh run of the cases on this GPU; both
become `Point`s, and the tables and plots are made from those alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ..catalogue import Kernel, Seed, baseline
from ..figures import Figures, cell
from ..gpu import Gpu
from ..results import asvsuite
from ..results.resultstree import MACHINE_FILE, machines
from ..style import palette
from ..writable import not_a_folder
from .counters import Reading, step_notes

POWER_NOTE = ("Board power: NVML's reading of the whole board's power draw, averaged over the readings taken between "
              "the timed launches of the case. NVML's reading is itself an average over about the last second, so a "
              "case timed in less than that reads partly what the card did before it: a power figure, not an energy "
              "one. The history's joules per GEMM are charged over windows NVML's energy counter resolves "
              "(docs/history.md, \"Joules per GEMM\").")
SM_CLOCK_NOTE = (
    "Median SM clock: the median, over the timed samples, of the SM clock NVBench read for each sample. NVBench does "
    "not ask the driver for it: it divides the cycles counted on SM 0 (clock64) by the nanoseconds of the GPU's "
    "global timer (%globaltimer) between a timestamp kernel queued just before the timed launch and one just after "
    "it, so the figure is an estimate from two counters and can read a little above the GPU's maximum SM clock "
    "(e.g. 1986 MHz on an H100 whose maximum is 1980 MHz).")


class ReportError(RuntimeError):
    """The measurements asked for cannot be found or read; the message says which and why."""


class NoGemmResults(ReportError):
    """The results hold no Gemm figures of the machine (or commit) asked for: read, and found empty."""


def check_results(results_dir: Path, shown: str) -> None:
    """ReportError unless `results_dir` holds some machine's asv results: said before the GPU is asked to name the
    machine, which a missing tree would otherwise be blamed on."""
    if not machines(results_dir):
        raise ReportError(f"--results {shown}: no asv results there (no <machine>/machine.json); pass the directory "
                          "that `asv run` or `sgemm merge` filled")


def check_out(out_dir: Path, shown: str) -> None:
    """ReportError when a report (README.md, points.json, PNGs) written into `out_dir` could overwrite what no report
    wrote, or has nowhere to go; said before anything is read or measured. A folder whose README.md has no points.json
    beside it is someone else's (a repository, notes); a results tree would hold files `sgemm merge` refuses."""
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and not out_dir.is_dir():
        raise ReportError(f"--out {shown} is a file: name a directory")
    if not out_dir.exists() and not out_dir.parent.is_dir():
        raise ReportError(f"--out {shown}: the folder it would be made in, {out_dir.parent}, "
                          f"{not_a_folder(out_dir.parent)}")
    if (out_dir / "README.md").exists() and not (out_dir / "points.json").is_file():
        raise ReportError(f"--out {shown} holds a README.md that no report wrote (no points.json beside it): name a "
                          "new folder, or one a report made")
    if tree := next((folder for folder in (out_dir, *out_dir.parents) if (folder / "benchmarks.json").is_file()),
                    None):
        raise ReportError(f"--out {shown} lies in the asv results tree {tree}: put the report outside it")


@dataclass(frozen=True)
class Point:
    """One kernel at one square size."""

    kernel: str
    size: int
    tflops: float
    sm_clock_mhz: float
    power_w: float | None = None  # the board's mean power while the case was timed (NVML), where recorded
    joules_per_gemm: float | None = None  # the board's energy a launch, back to back (asvsuite.JOULES), where recorded


def points_from_asv(results_dir: Path, machine: str, commit: str | None = None) -> tuple[list[Point], str, dict]:
    """The Gemm figures of one machine's run: of the newest commit (asv dates a run by its commit), or of the commit
    whose hash starts with `commit`.

    Returns the points, the commit hash, and the machine's asv entry (its facets).
    """
    machine_dir = Path(results_dir) / machine
    if not (machine_dir / MACHINE_FILE).is_file():
        known = machines(results_dir)
        raise ReportError(f"no asv results for machine {machine!r} in {results_dir} (machines there: "
                          f"{', '.join(known) or 'none'})")
    try:
        found = [r for r in asvsuite.runs(Path(results_dir), machine, strict=True)
                 if r.values(asvsuite.GEMM, asvsuite.TFLOPS)]
        facets = json.loads((machine_dir / MACHINE_FILE).read_text())
    except (OSError, ValueError, KeyError) as exc:
        raise ReportError(f"cannot read the asv results in {machine_dir}: {exc}") from exc
    if commit:
        found = [r for r in found if r.commit.startswith(commit)]
        if len(matched := sorted({r.commit for r in found})) > 1:
            raise ReportError(f"--commit {commit} matches {len(matched)} measured commits ("
                              + ", ".join(hash_[:12] for hash_ in matched) + "): give more of it")
    if not found:
        raise NoGemmResults(f"no Gemm results for machine {machine!r}" + (f" at commit {commit}" if commit else ""))
    run = found[-1]
    try:
        clocks, powers = run.values(asvsuite.GEMM, asvsuite.SM_CLOCK), run.values(asvsuite.GEMM, asvsuite.POWER)
        joules = run.values(asvsuite.GEMM, asvsuite.JOULES)
    except ValueError as exc:
        raise ReportError(f"cannot read the asv results in {machine_dir}: {exc}") from exc
    points = []
    for case, rate in run.values(asvsuite.GEMM, asvsuite.TFLOPS).items():
        if rate is None or math.isnan(rate):
            continue
        if len(case.params) != len(asvsuite.GEMM_PARAMS):  # a suite of another shape (or no suite of this project)
            raise ReportError(f"cannot read the asv results in {machine_dir}: {asvsuite.GEMM} has parameters "
                              f"{list(case.params)}, not this suite's {list(asvsuite.GEMM_PARAMS)}")
        clock, power, energy = clocks.get(case), powers.get(case), joules.get(case)
        points.append(Point(case.kernel, case.shape[0], rate, math.nan if clock is None else clock,
                            None if power is None or math.isnan(power) else power,
                            None if energy is None or math.isnan(energy) else energy))
    return points, run.commit, facets


def recorded_gpu(results_dir: Path, machine: str, commit: str, facets: dict) -> Gpu:
    """The GPU a machine's run at `commit` measured on, as the run recorded it (asv class `Gpu`: its SM count,
    maximum SM clock and driver) and its machine entry names it (`facets`: the model, the compute capability), so
    that a report made from results is right wherever it is made; a fact the run did not record is None (the
    driver "unknown")."""
    sm_count = max_clock = driver = None
    for run in asvsuite.runs(Path(results_dir), machine, commit):
        count, clock = run.scalar(asvsuite.SM_COUNT), run.scalar(asvsuite.MAX_SM_CLOCK)
        sm_count = sm_count or (int(count) if count and math.isfinite(count) else None)
        max_clock = max_clock or (clock if clock and math.isfinite(clock) else None)
        driver = driver or asvsuite.driver_text(run.scalar(asvsuite.DRIVER_VERSION))
    return Gpu(facets.get("gpu", machine), Gpu.compute_capability_of(str(facets.get("compute_capability", ""))),
               sm_count, max_clock, driver or "unknown")


def measured_points(seeds: list[Seed], kernels: dict[str, Kernel], sizes: list[int] | None, gpu: Gpu, device: int,
                    say: Callable[[str], None]) -> list[Point]:
    """Every step of the seeds' ladders, and their precisions' baselines, measured now in one process at the square
    sizes this GPU can run (each kernel at those its entry lists, or at `sizes`; each after its FP64 check); `say` is
    told of each case as it starts and of each left out, and why."""
    from ..measuring.record import MeasuredCase, run_cases, skip_reason

    wanted = {k.name: k.sizes if sizes is None else sizes for seed in seeds for _, k in seed_kernels(seed, kernels)}
    for name, at in list(wanted.items()):  # each baseline at every size a kernel of its precision is measured at
        reference = baseline(kernels[name].precision, kernels).name
        wanted[reference] = tuple(dict.fromkeys([*wanted.get(reference, ()), *at]))
    cases = [MeasuredCase(kernels[name], size, size, size) for name in kernels if name in wanted
             for size in wanted[name] if not skip_reason(kernels[name], size, size, size, gpu)]
    results = run_cases(cases, device, lambda i, case: say(f"[{i + 1}/{len(cases)}] {case.id}"))
    for case_id, outcome in results.items():
        if isinstance(outcome, BaseException):
            say(f"{case_id} left out: {str(outcome).splitlines()[0]}")
    return points_from_cases(results)


# The first line of every README a report writes: it is output, and a hand's edit would be lost at the next report.
GENERATED_NOTE = "> Generated by `sgemm report` (the command is below): regenerate it, never edit it by hand."


def header_lines(gpu: Gpu, source: str, command: str, driver_of: str = "of the box that made the report") -> list[str]:
    """A report's opening lines: when, on which GPU and driver (`driver_of` says whose), from what, by which
    command."""
    import datetime

    return [
        f"- Report made: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        f"- GPU: {gpu.name}" + (f", {gpu.sm_count} SMs, max SM clock {gpu.max_sm_clock_mhz:.0f} MHz"
                                if gpu.sm_count and gpu.max_sm_clock_mhz else ""),
        f"- Driver ({driver_of}): {gpu.driver}",
        f"- Source: {source}",
        f"- Command: `{command}`",
        "- % of peak: the dense FP32 rate (FP16 and BF16: tensor cores with FP32 accumulate) at the maximum SM clock.",
    ]


def points_from_cases(results: dict) -> list[Point]:
    """Points from `record.run_cases` output (square cases only; failed cases are left out)."""
    # The median, as asv keeps for track_sm_clock: a report from a fresh run reads like one from asv results.
    return [Point(r.kernel, r.m, r.tflops, r.median_sm_clock_mhz, r.telemetry.get("power_w_mean"))
            for r in results.values() if not isinstance(r, BaseException) and r.m == r.n == r.k]


@dataclass(frozen=True)
class Row:
    label: str  # the seed's own name for the step
    kernel: str
    figures: Figures
    power_w: float | None = None
    # What the step bought: its TFLOP/s over the step in the row above (none for the first step, for cuBLAS, and
    # where either was not measured)
    over_step_above: float | None = None
    # The same at one SM clock (TFLOP/s per MHz over the step above's): at the power cap two cases timed apart run at
    # clocks several percent apart, and this says what the step bought with the clock set aside
    over_step_above_per_clock: float | None = None


def seed_kernels(seed: Seed, kernels: dict[str, Kernel]) -> list[tuple[str, Kernel]]:
    """(the seed's label, kernel) for every step of the seed's ladder, in catalogue order."""
    return [(origin.label, kernel) for kernel in kernels.values() for origin in kernel.origins
            if origin.seed == seed.file]


def ladder(seed: Seed, precision: str, size: int, points: list[Point], kernels: dict[str, Kernel],
           gpu: Gpu) -> list[Row]:
    """The seed's table for one precision at one size, cuBLAS first; steps with no measurement show as None."""
    at_size = {p.kernel: p for p in points if p.size == size}
    cublas = baseline(precision, kernels)
    reference = at_size.get(cublas.name)
    peak = gpu.peak_tflops(precision)
    steps = [(label, kernel) for label, kernel in seed_kernels(seed, kernels) if kernel.precision == precision]
    if not steps:
        return []
    if not any(kernel.library for _, kernel in steps):
        steps.insert(0, ("cuBLAS", cublas))
    rows = []
    for index, (label, kernel) in enumerate(steps):
        point = at_size.get(kernel.name)
        above = at_size.get(steps[index - 1][1].name) if index and not steps[index - 1][1].library else None
        over = _ratio(point.tflops, above.tflops) if point and above else None
        per_clock = (_ratio(point.tflops / point.sm_clock_mhz, above.tflops / above.sm_clock_mhz)
                     if over and _positive(point.sm_clock_mhz) and _positive(above.sm_clock_mhz) else None)
        rows.append(Row(label, kernel.name, Figures.of(point.tflops if point else None,
                                                       reference.tflops if reference else None, peak,
                                                       point.sm_clock_mhz if point else None),
                        point.power_w if point else None, over, per_clock))
    return rows


def _positive(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def _ratio(value: float, over: float) -> float | None:
    return value / over if math.isfinite(value) and _positive(over) else None


def markdown_table(rows: list[Row]) -> str:
    lines = ["| step | kernel | TFLOP/s | % of cuBLAS | % of peak | median SM clock (MHz) | board power (W) "
             "| x the step above | x the step above, per SM clock |",
             "| :--- | :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.label} | `{r.kernel}` | " + " | ".join(r.figures.texts()) + f" | {cell(r.power_w, 0)} | "
              f"{cell(r.over_step_above, 2)} | {cell(r.over_step_above_per_clock, 2)} |" for r in rows]
    return "\n".join(lines)


# 11 markers against 9 colours: the cycles are coprime, so no two of the first 99 series share a colour and a marker.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "p", "h")
_LINESTYLES = ("-", "--", ":")



def series_styles(names: list[str]) -> dict[str, dict]:
    """matplotlib line keywords per kernel, in the order given: cuBLAS black and thicker, every other kernel its own
    (colour, marker) pair, with the line style changing each time the colours come round again."""
    colours = palette()
    styles, others = {}, 0
    for name in names:
        if name in styles:
            continue
        if name.endswith("/cublas"):
            styles[name] = {"color": "#000000", "marker": "*", "markersize": 10, "linestyle": "-", "linewidth": 3.0,
                            "zorder": 3}
            continue
        # Hollow markers: where two kernels measure the same (e.g. pitched and double_buffer_split_b), both shapes
        # still show, one inside the other.
        styles[name] = {"color": colours[others % len(colours)], "marker": _MARKERS[others % len(_MARKERS)],
                        "markersize": 7, "markerfacecolor": "none", "markeredgewidth": 1.6,
                        "linestyle": _LINESTYLES[others // len(colours) % len(_LINESTYLES)], "linewidth": 1.5,
                        "zorder": 2}
        others += 1
    return styles


def size_tick_labels(sizes: list[int]) -> list[str]:
    """A label per size (ascending), dropped a line where it would run into its neighbour's on a log axis (1000 and
    1024 lie 0.03 octave apart)."""
    if not sizes:
        return []
    span = max(1.0, math.log2(sizes[-1] / sizes[0]))
    labels, lowered = [str(sizes[0])], False
    for before, size in zip(sizes, sizes[1:]):
        lowered = math.log2(size / before) < 0.1 * span and not lowered
        labels.append(("\n" if lowered else "") + str(size))
    return labels


def ladder_sizes(kernel_names: list[str], points: list[Point], baseline_name: str | None = None) -> list[int]:
    """The sizes a ladder's plot spans, ascending: those at which a step of the ladder other than `baseline_name`
    was measured. The baseline is timed at every size some kernel of its precision runs at (cuBLAS FP16 up to 8192
    for the Hopper ladder, down to 1000 for seed 001's), and sizes where it alone stands only squeeze the ladder's
    own points into a corner. Every measured size when the baseline is all there is."""
    steps = {name for name in kernel_names if name != baseline_name}
    measured = [p for p in points if p.kernel in kernel_names and not math.isnan(p.tflops)]
    own = {p.size for p in measured if p.kernel in steps}
    return sorted(own or {p.size for p in measured})


def ladder_figure(title: str, kernel_names: list[str], points: list[Point], baseline_name: str | None = None):
    """The plot of `plot_ladder` as a matplotlib Figure (ImportError without matplotlib)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    figure = Figure(figsize=(11, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    styles = series_styles(kernel_names)
    shown = ladder_sizes(kernel_names, points, baseline_name)
    for name, style in styles.items():
        series = sorted((p.size, p.tflops) for p in points
                        if p.kernel == name and p.size in shown and not math.isnan(p.tflops))
        if series:
            sizes, rates = zip(*series)
            axes.plot(sizes, rates, label=name, **style)
    axes.set_xscale("log", base=2)
    axes.set_xticks(shown, size_tick_labels(shown))
    axes.xaxis.set_minor_locator(NullLocator())
    axes.set_xlabel("M = N = K (log scale)")
    axes.set_ylabel("TFLOP/s")
    axes.set_ylim(bottom=0)
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    # Outside the axes, where no line can run under it; constrained layout makes room for it.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    return figure


def plot_ladder(path: Path, title: str, kernel_names: list[str], points: list[Point],
                baseline_name: str | None = None) -> bool:
    """TFLOP/s against size on a log-2 axis, one line per kernel (once each, in the order given), over the sizes of
    the ladder's own steps (ladder_sizes). False when matplotlib is missing (nothing is written)."""
    try:
        figure = ladder_figure(title, kernel_names, points, baseline_name)
    except ImportError:
        return False
    figure.savefig(path, dpi=110)
    return True


def write_report(out_dir: Path, seeds: list[Seed], kernels: dict[str, Kernel], points: list[Point], gpu: Gpu,
                 header: list[str], counters: dict[str, Reading] | None = None,
                 source: str | None = None) -> list[Path]:
    """README.md with every seed's tables, a PNG per seed and precision, and points.json (with `source`, what the
    figures came from, so that a report drawn again from it still says); returns what was written. With `counters`
    (sgemm.site.counters.read_counters), each step slower than the step above it is followed by Nsight Compute's
    reading of it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = sorted({p.size for p in points})
    written: list[Path] = []
    plots_missing = False
    body = [GENERATED_NOTE, "", f"# Seed ladders on {gpu.name}", "", *header, "", SM_CLOCK_NOTE, "", POWER_NOTE, ""]
    for seed in seeds:
        for precision in dict.fromkeys(kernel.precision for kernel in kernels.values()):
            at = [size for size in seed.sizes if size in sizes] or ([max(sizes)] if sizes else list(seed.sizes))
            # A table whose steps were none of them measured (a GPU too old for them) says nothing: left out.
            reference = baseline(precision, kernels).name
            tables = [(size, rows) for size in at if (rows := ladder(seed, precision, size, points, kernels, gpu))
                      and any(row.figures.tflops for row in rows if row.kernel != reference)]
            if not tables:
                continue
            body += [f"## {seed.number} {precision.upper()}: {seed.title}", "", f"Seed `{seed.file}`.", ""]
            for size, rows in tables:
                body += [f"{size}x{size}x{size}:", "", markdown_table(rows), ""]
                slower = [(row.kernel, row.over_step_above, row.over_step_above_per_clock) for row in rows
                          if row.over_step_above is not None and row.over_step_above < 1.0]
                if counters is not None and (notes := step_notes(counters, slower, size)):
                    body += [*notes, ""]
            rows = tables[0][1]
            png = out_dir / f"{seed.number}-{precision}.png"
            if plot_ladder(png, f"{seed.number} {precision.upper()} on {gpu.name}", [r.kernel for r in rows], points,
                           reference):
                body += [f"![TFLOP/s against size]({png.name})", ""]
                written.append(png)
            else:
                plots_missing = True
    if plots_missing:
        body += ["(Plots left out: matplotlib is not installed.)", ""]
    readme = out_dir / "README.md"
    readme.write_text("\n".join(body))
    data = out_dir / "points.json"
    data.write_text(json.dumps({"gpu": asdict(gpu), "points": [asdict(p) for p in points],
                                **({"source": source} if source else {})}, indent=1))
    return [readme, data, *written]


def gpu_from_dict(entry: dict) -> Gpu:
    """A Gpu as points.json holds it."""
    return Gpu(str(entry["name"]), entry.get("compute_capability"), entry.get("sm_count"),
               None if entry.get("max_sm_clock_mhz") is None else float(entry["max_sm_clock_mhz"]),
               str(entry.get("driver", "unknown")), entry.get("memory_gib"), str(entry.get("card", "")))


def point_from_dict(entry: dict) -> Point:
    """A Point as points.json holds it (a clock that was not recorded is NaN, a power or energy None)."""
    clock, power, joules = entry.get("sm_clock_mhz"), entry.get("power_w"), entry.get("joules_per_gemm")
    return Point(str(entry["kernel"]), int(entry["size"]), float(entry["tflops"]),
                 math.nan if clock is None else float(clock), None if power is None else float(power),
                 None if joules is None else float(joules))


def read_points(path: Path) -> tuple[Gpu, list[Point], str | None]:
    """The GPU, points and source (None where the file predates it) of a points.json that write_report wrote, so a
    report can be drawn again without the results or the GPU (`sgemm report --points`)."""
    try:
        data = json.loads(Path(path).read_text())
        source = data.get("source")
        return (gpu_from_dict(data["gpu"]), [point_from_dict(entry) for entry in data["points"]],
                None if source is None else str(source))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ReportError(f"cannot read the points of a seed ladder report from {path}: {exc!r}") from exc
