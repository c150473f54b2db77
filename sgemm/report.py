"""Seed ladder reports: each seed worklog's table (kernel, TFLOP/s, % of cuBLAS, % of the GPU's peak, SM clock)
rebuilt from measurements on one GPU, with a plot of TFLOP/s against size per seed and precision.

Measurements come from what `asv run` recorded for one machine, or from a fresh run of the cases on this GPU; both
become `Point`s, and the tables and plots are made from those alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from . import asvsuite
from .catalogue import Kernel, Seed
from .peak import peak_tflops

class ReportError(RuntimeError):
    """The measurements asked for cannot be found or read; the message says which and why."""


@dataclass(frozen=True)
class Point:
    """One kernel at one square size."""

    kernel: str
    size: int
    tflops: float
    sm_clock_mhz: float


@dataclass(frozen=True)
class Gpu:
    name: str
    compute_capability: int | None = None  # e.g. 90
    sm_count: int | None = None
    max_sm_clock_mhz: float | None = None
    driver: str = "unknown"

    def peak_tflops(self, precision: str) -> float | None:
        if not (self.compute_capability and self.sm_count and self.max_sm_clock_mhz):
            return None
        return peak_tflops(precision, self.compute_capability, self.sm_count, self.max_sm_clock_mhz)


def points_from_asv(results_dir: Path, machine: str, commit: str | None = None) -> tuple[list[Point], str, dict]:
    """The Gemm figures of one machine's run: of the newest commit (asv dates a run by its commit), or of the commit
    whose hash starts with `commit`.

    Returns the points, the commit hash, and the machine's asv entry (its facets).
    """
    machine_dir = Path(results_dir) / machine
    if not (machine_dir / "machine.json").is_file():
        known = sorted(p.parent.name for p in Path(results_dir).glob("*/machine.json"))
        raise ReportError(f"no asv results for machine {machine!r} in {results_dir} (machines there: "
                          f"{', '.join(known) or 'none'})")
    try:
        found = [r for r in asvsuite.runs(Path(results_dir), machine) if r.values(asvsuite.GEMM, asvsuite.TFLOPS)]
        facets = json.loads((machine_dir / "machine.json").read_text())
    except (OSError, ValueError, KeyError) as exc:
        raise ReportError(f"cannot read the asv results in {machine_dir}: {exc}") from exc
    if commit:
        found = [r for r in found if r.commit.startswith(commit)]
    if not found:
        raise ReportError(f"no Gemm results for machine {machine!r}" + (f" at commit {commit}" if commit else ""))
    run = found[-1]
    clocks = run.values(asvsuite.GEMM, asvsuite.SM_CLOCK)
    points = []
    for case, rate in run.values(asvsuite.GEMM, asvsuite.TFLOPS).items():
        if rate is None or math.isnan(rate):
            continue
        clock = clocks.get(case)
        points.append(Point(case.kernel, case.shape[0], rate, math.nan if clock is None else clock))
    return points, run.commit, facets


def points_from_cases(results: dict) -> list[Point]:
    """Points from `record.run_cases` output (square cases only; failed cases are left out)."""
    return [Point(r.kernel, r.m, r.tflops, r.mean_sm_clock_mhz) for r in results.values()
            if not isinstance(r, BaseException) and r.m == r.n == r.k]


@dataclass(frozen=True)
class Row:
    label: str  # the seed's own name for the step
    kernel: str
    tflops: float | None
    percent_of_cublas: float | None
    percent_of_peak: float | None
    sm_clock_mhz: float | None


def seed_kernels(seed: Seed, kernels: dict[str, Kernel]) -> list[tuple[str, Kernel]]:
    """(the seed's label, kernel) for every step of the seed's ladder, in catalogue order."""
    return [(origin.label, kernel) for kernel in kernels.values() for origin in kernel.origins
            if origin.seed == seed.file]


def ladder(seed: Seed, precision: str, size: int, points: list[Point], kernels: dict[str, Kernel],
           gpu: Gpu) -> list[Row]:
    """The seed's table for one precision at one size, cuBLAS first; steps with no measurement show as None."""
    at_size = {p.kernel: p for p in points if p.size == size}
    baseline = at_size.get(f"{precision}/cublas")
    peak = gpu.peak_tflops(precision)
    steps = [(label, kernel) for label, kernel in seed_kernels(seed, kernels) if kernel.precision == precision]
    if not steps:
        return []
    if not any(kernel.library for _, kernel in steps):
        steps.insert(0, ("cuBLAS", kernels[f"{precision}/cublas"]))
    rows = []
    for label, kernel in steps:
        point = at_size.get(kernel.name)
        rate = point.tflops if point else None
        rows.append(Row(
            label, kernel.name, rate,
            100 * rate / baseline.tflops if rate and baseline else None,
            100 * rate / peak if rate and peak else None,
            point.sm_clock_mhz if point and not math.isnan(point.sm_clock_mhz) else None,
        ))
    return rows


def _cell(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown_table(rows: list[Row]) -> str:
    lines = ["| step | kernel | TFLOP/s | % of cuBLAS | % of peak | SM clock (MHz) |",
             "| :--- | :--- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.label} | `{r.kernel}` | {_cell(r.tflops, 2)} | {_cell(r.percent_of_cublas, 1)} | "
              f"{_cell(r.percent_of_peak, 1)} | {_cell(r.sm_clock_mhz, 0)} |" for r in rows]
    return "\n".join(lines)


def plot_ladder(path: Path, title: str, kernel_names: list[str], points: list[Point]) -> bool:
    """TFLOP/s against size, one line per kernel. False when matplotlib is missing (nothing is written)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    figure, axes = plt.subplots(figsize=(9, 5.5))
    for name in kernel_names:
        series = sorted((p.size, p.tflops) for p in points if p.kernel == name)
        if series:
            sizes, rates = zip(*series)
            axes.plot(sizes, rates, marker="o", label=name, linewidth=2.5 if name.endswith("/cublas") else 1.5)
    axes.set_xlabel("M = N = K")
    axes.set_ylabel("TFLOP/s")
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_report(out_dir: Path, seeds: list[Seed], kernels: dict[str, Kernel], points: list[Point], gpu: Gpu,
                 header: list[str]) -> list[Path]:
    """README.md with every seed's tables, a PNG per seed and precision, and points.json; returns what was written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = sorted({p.size for p in points})
    written: list[Path] = []
    plots_missing = False
    body = [f"# Seed ladders on {gpu.name}", "", *header, ""]
    for seed in seeds:
        for precision in ("fp32", "fp16"):
            size = seed.size if seed.size in sizes else (max(sizes) if sizes else seed.size)
            rows = ladder(seed, precision, size, points, kernels, gpu)
            if not rows:
                continue
            body += [f"## {seed.number} {precision.upper()}: {seed.title}", "",
                     f"Seed `{seed.file}`, {size}x{size}x{size}.", "", markdown_table(rows), ""]
            png = out_dir / f"{seed.number}-{precision}.png"
            if plot_ladder(png, f"{seed.number} {precision.upper()} on {gpu.name}", [r.kernel for r in rows], points):
                body += [f"![TFLOP/s against size]({png.name})", ""]
                written.append(png)
            else:
                plots_missing = True
    if plots_missing:
        body += ["(Plots left out: matplotlib is not installed.)", ""]
    readme = out_dir / "README.md"
    readme.write_text("\n".join(body))
    data = out_dir / "points.json"
    data.write_text(json.dumps({"gpu": asdict(gpu), "points": [asdict(p) for p in points]}, indent=1))
    return [readme, data, *written]
