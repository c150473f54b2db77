"""The cross-GPU report: every kernel on every GPU of a merged asv results tree, one table per precision with a
group of columns per GPU (TFLOP/s, joules per GEMM where charged, % of that GPU's cuBLAS, % of its peak, median SM
clock), a bar chart per precision, as Markdown and as a page of the published site.

Each GPU's newest run is read; its SM count and maximum SM clock come from the same run (asv class `Gpu`), so the
report is right wherever it is made.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..catalogue import Kernel, baseline
from ..figures import Figures
from ..gpu import Gpu
from ..results.resultstree import machines
from ..style import PAGE_STYLE, html_with_code, palette
from .ladders import (GENERATED_NOTE, SM_CLOCK_NOTE, NoGemmResults, Point, ReportError, gpu_from_dict, point_from_dict,
                      points_from_asv, recorded_gpu)


@dataclass(frozen=True)
class GpuRun:
    machine: str
    gpu: Gpu
    commit: str
    points: list[Point]


def gpu_runs(results_dir: Path) -> list[GpuRun]:
    """The newest Gemm run of every machine in the tree, in machine-name order."""
    names = machines(results_dir)
    if not names:
        raise ReportError(f"no asv machine directories in {results_dir}")
    runs = []
    for machine in names:
        try:
            points, commit, facets = points_from_asv(Path(results_dir), machine)
        except NoGemmResults:
            continue  # a machine with no Gemm results (e.g. only resource tracks) has nothing to show
        runs.append(GpuRun(machine, recorded_gpu(Path(results_dir), machine, commit, facets), commit, points))
    if not runs:
        raise ReportError(f"no Gemm results for any machine in {results_dir}")
    return runs


def common_size(runs: list[GpuRun]) -> int:
    """The square size every GPU measured that shows the most kernels (the largest of those that tie): kernels are
    timed at different sizes (the tensor-core ladder alone at 8192), and the page shows one."""
    shared = set.intersection(*({p.size for p in run.points} for run in runs))
    if not shared:
        raise ReportError("the GPUs share no measured size: pass one with --size")

    def kernels_at(size: int) -> int:
        return len(set.intersection(*({p.kernel for p in run.points if p.size == size} for run in runs)))

    return max(shared, key=lambda size: (kernels_at(size), size))


def table(precision: str, size: int, runs: list[GpuRun],
          kernels: dict[str, Kernel]) -> list[tuple[str, list[Figures]]]:
    """(kernel, its figures on each GPU) for every kernel of the precision that some GPU measured at the size."""
    cublas = baseline(precision, kernels).name
    rows = []
    for name, kernel in kernels.items():
        if kernel.precision != precision:
            continue
        cells = []
        for run in runs:
            at_size = {p.kernel: p for p in run.points if p.size == size}
            point, reference = at_size.get(name), at_size.get(cublas)
            cells.append(Figures.of(point.tflops, reference.tflops if reference else None,
                                    run.gpu.peak_tflops(precision), point.sm_clock_mhz, point.joules_per_gemm)
                         if point else Figures())
        if any(cell.tflops is not None for cell in cells):
            rows.append((name, cells))
    return rows


COLUMNS = ("TFLOP/s", "J/GEMM", "% cuBLAS", "% peak", "median SM MHz")


def markdown_table(rows: list[tuple[str, list[Figures]]], runs: list[GpuRun]) -> str:
    header = ["kernel"] + [f"{run.gpu.name.removeprefix('NVIDIA ')} {column}" for run in runs for column in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "| :--- |" + " ---: |" * (len(header) - 1)]
    lines += ["| " + " | ".join([f"`{name}`"] + [t for cell in cells for t in cell.texts_with_energy()]) + " |"
              for name, cells in rows]
    return "\n".join(lines)


def html_table(rows: list[tuple[str, list[Figures]]], runs: list[GpuRun]) -> str:
    top = "".join(f'<th colspan="{len(COLUMNS)}">{html.escape(run.gpu.name)}</th>' for run in runs)
    sub = "".join(f"<th>{html.escape(column)}</th>" for _ in runs for column in COLUMNS)
    body = "".join(
        "<tr><td><code>" + html.escape(name) + "</code></td>"
        + "".join(f"<td>{t}</td>" for cell in cells for t in cell.texts_with_energy()) + "</tr>"
        for name, cells in rows)
    return (f'<table><thead><tr><th rowspan="2">kernel</th>{top}</tr><tr>{sub}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


_HATCHES = ("", "//", "..", "xx", "\\\\", "oo")


def bar_figure(title: str, rows: list[tuple[str, list[Figures]]], runs: list[GpuRun]):
    """The chart of `plot` as a matplotlib Figure (ImportError without matplotlib)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height = 0.8 / len(runs)
    figure = Figure(figsize=(11, 1.2 + 0.32 * len(rows) * max(1, len(runs) / 2)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    colours = palette()
    for index, run in enumerate(runs):
        positions = [row + index * height for row in range(len(rows))]
        rates = [cells[index].tflops or 0.0 for _, cells in rows]
        # A hatch as well as a colour, so that GPUs whose colours come round again still differ.
        axes.barh(positions, rates, height=height, label=run.gpu.name, color=colours[index % len(colours)],
                  hatch=_HATCHES[index // len(colours) % len(_HATCHES)], edgecolor="white", linewidth=0.5)
    axes.set_yticks([row + 0.4 - height / 2 for row in range(len(rows))], [name for name, _ in rows], fontsize=7)
    axes.margins(y=0.01)
    axes.invert_yaxis()
    axes.set_xlabel("TFLOP/s")
    axes.set_title(title, fontsize=10)
    axes.grid(True, axis="x", alpha=0.3)
    # Outside the axes: no bar can run under it, however long.
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    return figure


def plot(path: Path, title: str, rows: list[tuple[str, list[Figures]]], runs: list[GpuRun]) -> bool:
    """Horizontal bars of TFLOP/s, a bar per GPU for each kernel. False when matplotlib is missing."""
    try:
        figure = bar_figure(title, rows, runs)
    except ImportError:
        return False
    figure.savefig(path, dpi=100)
    return True



def _runs_lines(runs: list[GpuRun]) -> list[str]:
    lines = []
    for run in runs:
        facts = ", ".join(part for part in (
            f"compute capability {run.gpu.compute_capability_text}" if run.gpu.compute_capability else "",
            f"{run.gpu.sm_count} SMs" if run.gpu.sm_count else "",
            f"max SM clock {run.gpu.max_sm_clock_mhz:.0f} MHz" if run.gpu.max_sm_clock_mhz else "") if part)
        if not (run.gpu.sm_count and run.gpu.max_sm_clock_mhz):
            facts += ("; " if facts else "") + "SM count and max clock not recorded: % peak left out"
        lines.append(f"{run.gpu.name} (asv machine `{run.machine}`, commit {run.commit[:12]}; {facts})")
    return lines


ENERGY_NOTE = ("J/GEMM: the board's energy a launch, the kernel run back to back over a window whose ends are steps "
               "of NVML's energy counter (two seconds and more, after a second's warm-up), L2 as the launches leave "
               "it; charged at 4096 and 8192 only, a reading above the board's power limit left out (-).")
NOTES = ("% cuBLAS: against that GPU's own cuBLAS at the same size and precision. % peak: against the dense FP32 "
         "(FP16 and BF16: tensor cores, FP32 accumulate) rate of that GPU at its maximum SM clock. " + ENERGY_NOTE + " "
         + SM_CLOCK_NOTE)


def write_cross_gpu(out_dir: Path, runs: list[GpuRun], kernels: dict[str, Kernel], size: int,
                    header: list[str]) -> list[Path]:
    """README.md, index.html (a page for the site), a PNG per precision and points.json; returns what was written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"GEMM kernels across GPUs, {size}x{size}x{size}"
    markdown = [GENERATED_NOTE, "", f"# {title}", "", *(f"- {line}" for line in header),
                *(f"- {line}" for line in _runs_lines(runs)), "", NOTES, ""]
    page = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{PAGE_STYLE}</style></head><body>", '<p><a href="../index.html">&larr; benchmark history</a></p>',
            f"<h1>{html.escape(title)}</h1><ul>",
            *(f"<li>{html_with_code(line)}</li>" for line in [*header, *_runs_lines(runs)]),
            f"</ul><p>{html_with_code(NOTES)}</p>"]
    written = []
    for precision in dict.fromkeys(kernel.precision for kernel in kernels.values()):
        rows = table(precision, size, runs, kernels)
        if not rows:
            continue
        markdown += [f"## {precision.upper()}", "", markdown_table(rows, runs), ""]
        page += [f"<h2>{precision.upper()}</h2>", html_table(rows, runs)]
        png = out_dir / f"{precision}.png"
        if plot(png, f"{precision.upper()} TFLOP/s at {size}x{size}x{size}", rows, runs):
            markdown += [f"![{precision.upper()} TFLOP/s per GPU]({png.name})", ""]
            page.append(f'<p><img src="{png.name}" alt="{precision.upper()} TFLOP/s per GPU"></p>')
            written.append(png)
    page.append("</body></html>")
    readme, index, data = out_dir / "README.md", out_dir / "index.html", out_dir / "points.json"
    readme.write_text("\n".join(markdown))
    index.write_text("\n".join(page) + "\n")
    data.write_text(json.dumps([{"machine": run.machine, "commit": run.commit, "gpu": asdict(run.gpu),
                                 "points": [asdict(p) for p in run.points]} for run in runs], indent=1))
    return [readme, index, data, *written]


def read_runs(path: Path) -> list[GpuRun]:
    """The runs of a points.json that write_cross_gpu wrote, so the page can be redrawn without the results tree."""
    try:
        entries = json.loads(Path(path).read_text())
        return [GpuRun(str(entry["machine"]), gpu_from_dict(entry["gpu"]), str(entry["commit"]),
                       [point_from_dict(point) for point in entry["points"]]) for entry in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReportError(f"cannot read the runs of a cross-GPU page from {path}: {exc!r}") from exc


def unmeasured_size(results_dir: Path, size: int, shown: str) -> str | None:
    """Why no GPU in `results_dir` (named `shown` in the message) measured square size `size`, or None when one did:
    a size none measured would make a page with no tables. ReportError when the tree has no Gemm results at all."""
    measured = sorted({point.size for run in gpu_runs(results_dir) for point in run.points})
    if size in measured:
        return None
    return f"--size {size}: no GPU in {shown} measured that size (measured: {', '.join(map(str, measured))})"


def check_measured_size(results_dir: Path, size: int, shown: str) -> None:
    """ReportError unless some GPU in `results_dir` measured square size `size` (unmeasured_size says why)."""
    if problem := unmeasured_size(results_dir, size, shown):
        raise ReportError(problem)


def report_across_gpus(results_dir: Path, out_dir: Path, kernels: dict[str, Kernel], header: list[str],
                       size: int | None = None) -> list[Path]:
    """The cross-GPU report of every machine's newest run in `results_dir`, at `size` (default: common_size),
    written to `out_dir`; ReportError when the results cannot give one."""
    runs = gpu_runs(results_dir)
    return write_cross_gpu(out_dir, runs, kernels, size or common_size(runs), header)


def redraw_across_gpus(points_path: Path, shown: str, out_dir: Path, kernels: dict[str, Kernel], header: list[str],
                       size: int | None = None) -> list[Path]:
    """The cross-GPU report drawn again from the points.json of an earlier one (read_runs), at `size` (default:
    common_size); ReportError when the file holds no page's runs or no GPU of it measured `size`."""
    runs = read_runs(points_path)
    if not runs:
        raise ReportError(f"{shown} holds no GPU's run")
    measured = sorted({point.size for run in runs for point in run.points})
    if size is not None and size not in measured:
        raise ReportError(f"--size {size}: no GPU in {shown} measured it (sizes there: "
                          f"{', '.join(map(str, measured)) or 'none'})")
    return write_cross_gpu(out_dir, runs, kernels, size or common_size(runs), header)


NO_GPU_TITLE = "No GPU results yet"


def write_no_gpu_page(out_dir: Path) -> list[Path]:
    """The cross-GPU page of a tree with no Gemm results (a box without a GPU measures the resource suite alone):
    says so, and how to get some, where the tables would be; it names no path of the box that built it. Returns
    what was written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    steps = [
        "On a box with an NVIDIA GPU, in a clone of this repository: `scripts/history.sh` (it times every kernel "
        "with NVBench at each size and precision, and checks each against FP64 first).",
        "Bring its results here and join them to these: `sgemm merge results <its results> --into merged`.",
        "Publish the joined tree: `sgemm publish --results merged --html <site>`. This page then holds a table and "
        "a bar chart per precision, a column group per GPU, and asv's Gemm histories appear on the front page.",
    ]
    page = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{NO_GPU_TITLE}</title>"
            f"<style>{PAGE_STYLE}</style></head><body>", '<p><a href="../index.html">&larr; benchmark history</a></p>',
            f"<h1>{NO_GPU_TITLE}</h1>",
            "<p>The results this site was built from hold no kernel timings: they come from a box without a GPU, "
            "which records the resource suite alone (registers, shared memory and spills of every kernel, compiled "
            "with no GPU). To compare kernels across GPUs:</p>",
            "<ol>", *(f"<li>{html_with_code(step)}</li>" for step in steps), "</ol></body></html>"]
    index = out_dir / "index.html"
    index.write_text("\n".join(page) + "\n")
    return [index]
