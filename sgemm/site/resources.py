"""The site's resource page: what each kernel costs on chip (registers, shared memory, local memory and spills per
thread or block, from ptxas's report of the resource suite), as bar charts that read at a glance and a table.

asv draws each resource track as a history: a line per kernel and architecture against commits. That answers "did
this commit change it", but not "which kernels use the most registers", and a box without a GPU (or any box, on its
first run) has a history of few commits. This page shows the newest commit's figures side by side, one bar per
kernel, every axis from zero, and links to asv's histories.

The figures do not depend on the machine (NVRTC compiles for each architecture with no GPU), so the newest run of
any machine in the tree is the one shown.
"""

from __future__ import annotations

import ast
import datetime
import html
import itertools
import math
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ..results import asvsuite
from ..style import PAGE_STYLE, palette
from .ladders import ReportError

# (asv method, chart title, scale to the unit shown, what the page says of it)
TRACKS = (
    ("track_registers", "registers / thread", 1, "registers per thread"),
    ("track_shared_memory", "static shared memory / block (KiB)", 1024,
     "static shared memory per block; the dynamic shared memory a kernel is launched with is not in ptxas's report"),
    ("track_local_memory", "local memory / thread (bytes)", 1, "the stack frame per thread, spills included"),
    ("track_spill_stores", "spill stores / thread (bytes)", 1, "bytes per thread spilled to local memory"),
)


@dataclass(frozen=True)
class ResourceRun:
    """One run's resource figures: by (kernel, arch), each track's value (only those measured)."""

    machine: str
    commit: str
    date: int | None  # asv's commit date, in milliseconds
    kernels: list[str]  # in the suite's order
    archs: list[str]
    figures: dict[str, dict[tuple[str, str], float]]  # track -> (kernel, arch) -> value

    def shown_arch(self, kernel: str) -> str | None:
        """The architecture a kernel's bar stands for: the newest it was compiled for."""
        found = [arch for arch in self.archs if (kernel, arch) in self.figures.get("track_registers", {})]
        return found[-1] if found else None


def _figures(run: asvsuite.RunReader, method: str) -> tuple[list[tuple], dict[tuple[str, str], float]]:
    results, name = run.run, f"{asvsuite.RESOURCES}.{method}"
    if name not in results.get_all_result_keys():
        return [], {}
    params = results.get_result_params(name)
    combos = [tuple(ast.literal_eval(value) for value in combo) for combo in itertools.product(*params)]
    values = results.get_result_value(name, params)
    return combos, {combo: value for combo, value in zip(combos, values)
                    if value is not None and not math.isnan(value)}


def newest_run(results_dir: Path) -> ResourceRun:
    """The newest run (by commit date) of any machine in the tree with resource figures; ReportError without one."""
    found = []
    for machine in sorted(path.parent.name for path in Path(results_dir).glob("*/machine.json")):
        for run in asvsuite.runs(Path(results_dir), machine):
            combos, registers = _figures(run, "track_registers")
            if registers:
                found.append((run.date or 0, machine, run, combos))
    if not found:
        raise ReportError(f"no resource figures for any machine in {results_dir}")
    date, machine, run, combos = max(found, key=lambda item: item[0])
    kernels = list(dict.fromkeys(kernel for kernel, _ in combos))
    archs = list(dict.fromkeys(arch for _, arch in combos))
    figures = {method: _figures(run, method)[1] for method, *_ in TRACKS}
    return ResourceRun(machine, run.commit, date or None, kernels, archs, figures)


def resource_figure(run: ResourceRun):
    """A panel per track, a bar per kernel (on the architecture shown_arch names), kernel names once, on the left;
    each axis from zero. ImportError without matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    kernels = [kernel for kernel in run.kernels if run.shown_arch(kernel)]
    figure = Figure(figsize=(13, 1.4 + 0.2 * len(kernels)), layout="constrained")
    FigureCanvasAgg(figure)
    axes_row = figure.subplots(1, len(TRACKS), sharey=True)
    precisions = list(dict.fromkeys(kernel.split("/")[0] for kernel in kernels))
    colours = dict(zip(precisions, palette()))
    rows = range(len(kernels))
    for axes, (method, title, scale, _) in zip(axes_row, TRACKS):
        values = [run.figures[method].get((kernel, run.shown_arch(kernel)), 0.0) / scale for kernel in kernels]
        axes.barh(rows, values, color=[colours[kernel.split("/")[0]] for kernel in kernels], height=0.7)
        axes.set_title(title, fontsize=10)
        axes.set_xlim(left=0, right=max(values + [0]) * 1.12 or 1)
        axes.grid(True, axis="x", alpha=0.3)
        axes.tick_params(axis="x", labelsize=8)
        for row, value in zip(rows, values):  # zero too: a bar too short to see is not a missing figure
            axes.annotate(f"{value:g}", (value, row), xytext=(2, 0), textcoords="offset points", va="center",
                          fontsize=6)
        if not any(values):
            axes.text(0.5, 0.5, "0 for every kernel", transform=axes.transAxes, ha="center", va="center",
                      fontsize=10, color="#555555", backgroundcolor="white")
    first = axes_row[0]
    first.set_yticks(list(rows), [f"{kernel} ({run.shown_arch(kernel)})" for kernel in kernels], fontsize=7)
    first.set_ylim(len(kernels) - 0.5, -0.5)  # the suite's order, top down
    return figure


HISTORY_CURVES = 8  # as many lines as asv draws by default


def history_fragment(run: ResourceRun, method: str) -> str:
    """The fragment of asv's page of one track that draws the history of the kernels with the largest figures, on
    the architecture of the largest (one architecture: asv draws a line, and a legend entry, per kernel and
    architecture selected, drawn or not). asv's default (its first kernels, on the first architecture) draws eight
    equal lines on an axis whose every label reads the same. asv names parameter values as their repr."""
    figures = run.figures.get(method, {})
    shown = [(figures[kernel, arch], kernel, arch) for kernel in run.kernels
             if (kernel, arch := run.shown_arch(kernel)) in figures]
    fragment = f"{asvsuite.RESOURCES}.{method}"
    if not shown or not max(shown)[0]:
        return fragment  # every figure 0: any selection draws the same line
    arch = max(shown, key=lambda item: item[0])[2]
    ranked = [kernel for _, kernel, at in sorted(shown, key=lambda item: -item[0]) if at == arch][:HISTORY_CURVES]
    query = [("p-kernel", kernel) for kernel in ranked] + [("p-arch", arch)]
    return fragment + "?" + "&".join(f"{key}={urllib.parse.quote(repr(value), safe='')}" for key, value in query)


def _date(run: ResourceRun) -> str:
    return (datetime.datetime.fromtimestamp(run.date / 1000, datetime.UTC).strftime("%Y-%m-%d")
            if run.date else "date unknown")


def write_resource_page(out_dir: Path, run: ResourceRun, history_link: str = "../index.html") -> list[Path]:
    """index.html (the chart and a table of registers per architecture) and resources.png in `out_dir`; returns
    what was written. The chart is left out, and the page says so, without matplotlib."""
    out_dir.mkdir(parents=True, exist_ok=True)
    title = f"What each kernel costs on chip, at commit {run.commit[:8]}"
    links = ", ".join(f'<a href="{history_link}#{html.escape(history_fragment(run, method))}">'
                      f"{html.escape(name)}</a>" for method, name, _, _ in TRACKS)
    page = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{PAGE_STYLE}</style></head><body>",
            f'<p><a href="{history_link}">&larr; benchmark history</a></p>', f"<h1>{html.escape(title)}</h1>",
            f"<p>ptxas's report of every kernel compiled by NVRTC (no GPU needed), as the resource suite recorded it "
            f"for commit <code>{run.commit[:12]}</code> ({_date(run)}, asv machine <code>{html.escape(run.machine)}"
            f"</code>). A bar per kernel, on the newest architecture it is built for (named beside it); the table "
            f"gives the registers on each. How each changed from commit to commit, for the kernels with the largest "
            f"figures: asv's histories of {links}.</p>",
            "<ul>", *(f"<li>{html.escape(title)}: {html.escape(note)}</li>" for _, title, _, note in TRACKS), "</ul>"]
    written = []
    png = out_dir / "resources.png"
    try:
        figure = resource_figure(run)
    except ImportError:
        page.append("<p>(The chart is left out: matplotlib is not installed where the site was built.)</p>")
    else:
        figure.savefig(png, dpi=100)
        written.append(png)
        page.append(f'<p><img src="{png.name}" alt="registers, shared memory, local memory and spills per kernel">'
                    "</p>")
    head = "".join(f"<th>{html.escape(arch)}</th>" for arch in run.archs)
    registers = run.figures["track_registers"]
    body = "".join("<tr><td><code>" + html.escape(kernel) + "</code></td>" + "".join(
        f"<td>{registers[kernel, arch]:g}</td>" if (kernel, arch) in registers else "<td>-</td>"
        for arch in run.archs) + "</tr>" for kernel in run.kernels)
    page += ["<h2>Registers per thread, on each architecture</h2>",
             "<p>-: no figure for that architecture at this commit (the Hopper ladder is built for sm_90a alone, "
             "the rest for the generic architectures).</p>",
             f'<table><thead><tr><th>kernel</th>{head}</tr></thead><tbody>{body}</tbody></table>',
             "</body></html>"]
    index = out_dir / "index.html"
    index.write_text("\n".join(page) + "\n")
    return [index, *written]
