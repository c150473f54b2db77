"""Nsight Compute's reading of a ladder step, for the reports: what held back a step that did not pay.

`sgemm report --counters DIR` reads, for each step of a table that is slower than the step above it, the file
DIR/<kernel with '/' as '-'>-<size>.csv (e.g. fp16-wgmma_tma_wide-4096.csv): Nsight Compute's CSV export of one
launch of that case (`ncu --csv --page details --print-details all` with the SECTIONS below, run with
`--clock-control none` so that the GPU keeps the clocks it would have had; `python -m tools.acceptance.ladder_counters`
writes them on a GPU box). The report says, under the table, the step's READINGS: how busy the SMs, the tensor pipe and
the memory system were, L2's hit rate, how busy the issue slots were, a warp's cycles between two instructions and
the stall reasons that took most of them, and the launch's registers and waves.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

SECTIONS = ("SpeedOfLight", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis", "WarpStateStats", "LaunchStats")
TENSOR_PIPE = ("Compute Workload Analysis", "Pipe Utilization (% of active cycles)", "Tensor (All)")
# A SIMT kernel (the FP32 steps) leaves the tensor pipe idle but for a trace: its busy figure says nothing of it.
IDLE_PIPE_PERCENT = 1.0
# (section, body item, metric) as Nsight Compute's details page names them (the body item, a chart of the section,
# is written only with --print-details all; "" for a figure of the section itself), and how the report says it.
READINGS = (
    (("GPU Speed Of Light Throughput", "", "Compute (SM) Throughput"), "SM throughput {}% of peak"),
    (TENSOR_PIPE, "tensor pipe busy {}% of active cycles"),
    (("GPU Speed Of Light Throughput", "", "Memory Throughput"), "memory throughput {}%"),
    (("GPU Speed Of Light Throughput", "", "L2 Cache Throughput"), "L2 throughput {}%"),
    (("GPU Speed Of Light Throughput", "", "DRAM Throughput"), "DRAM throughput {}%"),
    (("Memory Workload Analysis", "", "L2 Hit Rate"), "L2 hit rate {}%"),
    (("Compute Workload Analysis", "", "Issue Slots Busy"), "issue slots busy {}%"),
    (("Launch Statistics", "", "Registers Per Thread"), "registers per thread {}"),
    (("Launch Statistics", "", "Waves Per SM"), "waves per SM {}"),
    (("Warp State Statistics", "", "Warp Cycles Per Issued Instruction"), "{} warp cycles per issued instruction"),
)
# The chart that splits a warp's cycles per issued instruction by stall reason ("Stall Barrier", ...), and how
# many of its largest the report names: the reasons a step waited on.
STALLS = ("Warp State Statistics", "Warp State (All Cycles)")
STALLS_SAID = 3
_COLUMNS = ("ID", "Section Name", "Metric Name", "Metric Value")


class CountersError(ValueError):
    """A counters folder or file that cannot be read; the message names it and why."""


def file_name(kernel: str, size: int) -> str:
    """The name of the reading of `kernel` at `size` in a counters folder."""
    return f"{kernel.replace('/', '-')}-{size}.csv"


def _number(figure: str) -> float:
    """A figure as Nsight Compute writes it (digits grouped by commas, e.g. '1,024.50') as a number."""
    return float(figure.replace(",", ""))


@dataclass(frozen=True)
class Reading:
    """The figures of one launch, by (section, body item, metric), as Nsight Compute wrote them (e.g. '86.06',
    '1,024')."""

    figures: dict[tuple[str, str, str], str]

    def stalls(self) -> list[tuple[str, float]]:
        """The stall reasons of a warp's cycles per issued instruction as Nsight Compute names them, the largest
        first (e.g. ('Barrier', 10.9), ('MIO Throttle', 1.98))."""
        reasons = [(metric.removeprefix("Stall "), _number(value))
                   for (section, item, metric), value in self.figures.items()
                   if (section, item) == STALLS and metric.startswith("Stall ")]
        return sorted(reasons, key=lambda reason: -reason[1])

    def said(self) -> str:
        """The READINGS it holds, then the largest stall reasons, in a line."""
        said = [words.format(value) for key, words in READINGS if (value := self.figures.get(key)) is not None
                and not (key == TENSOR_PIPE and _number(value) < IDLE_PIPE_PERCENT)]
        if stalls := [f"{reason} {cycles:.2f}" for reason, cycles in self.stalls()[:STALLS_SAID] if cycles > 0]:
            said.append(f"stalled most on {', '.join(stalls)}")
        return ", ".join(said)


def read_reading(path: Path) -> Reading:
    """The first launch of an Nsight Compute CSV export (`--csv --page details`); CountersError when it is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise CountersError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    # ncu writes its own lines (==PROF==, the profiled program's output) before and between the CSV's.
    rows = list(csv.reader(io.StringIO("".join(line for line in text.splitlines(keepends=True)
                                               if line.startswith('"')))))
    if not rows or any(column not in rows[0] for column in _COLUMNS):
        raise CountersError(f"{path}: not an Nsight Compute CSV export of the details page (no {', '.join(_COLUMNS)} "
                            "columns): write it with `ncu --csv --page details`")
    at = {column: rows[0].index(column) for column in _COLUMNS}
    # A metric with no rule attached leaves out the rule's trailing columns.
    body = [row for row in rows[1:] if len(row) > max(at.values())]
    if not body:
        raise CountersError(f"{path}: holds no profiled launch")
    first = body[0][at["ID"]]
    # Without --print-details all there is no body item column: every figure is the section's own.
    item = rows[0].index("Body Item Label") if "Body Item Label" in rows[0] else None
    figures = {(row[at["Section Name"]], "" if item is None else row[item], row[at["Metric Name"]]):
               row[at["Metric Value"]]
               for row in body if row[at["ID"]] == first and re.fullmatch(r"[\d.,]+", row[at["Metric Value"]])}
    if not any(key in figures for key, _ in READINGS):
        raise CountersError(f"{path}: holds none of the figures a report reads (sections {', '.join(SECTIONS)})")
    return Reading(figures)


def read_counters(counters_dir: Path, shown: str) -> dict[str, Reading]:
    """Every reading of a counters folder, by file name, read before any work; CountersError where --counters names
    no folder, or a CSV file in it is no reading."""
    if not counters_dir.is_dir():
        raise CountersError(f"--counters {shown}: not a folder of Nsight Compute CSV exports")
    return {path.name: read_reading(path) for path in sorted(counters_dir.glob("*.csv"))}


def step_notes(counters: dict[str, Reading], slower: list[tuple[str, float, float | None]], size: int) -> list[str]:
    """The lines a report writes under its table for the steps slower than the one above them ((kernel, its rate
    over the step above, the same per SM clock or None)): one a step with a reading, then one line naming the steps
    the folder has none of. A step that paid at one clock is said to have lost on the clock it ran at."""
    def bought(ratio: float, per_clock: float | None) -> str:
        if per_clock is None:
            return f"{ratio:.2f}x the step above"
        if per_clock >= 1.0:
            return f"{ratio:.2f}x the step above, {per_clock:.2f}x per SM clock: it lost on the clock it ran at"
        return f"{ratio:.2f}x the step above, {per_clock:.2f}x per SM clock"

    notes = [f"- `{kernel}` did not pay ({bought(ratio, per_clock)}). Nsight Compute, one launch: "
             f"{counters[file_name(kernel, size)].said()}."
             for kernel, ratio, per_clock in slower if file_name(kernel, size) in counters]
    if unread := [f"`{kernel}` ({bought(ratio, per_clock)})" for kernel, ratio, per_clock in slower
                  if file_name(kernel, size) not in counters]:
        notes.append(f"- Did not pay, with no Nsight Compute reading in the counters folder: {'; '.join(unread)}.")
    return notes
