"""What a history run recorded, as one table a row per commit: read back from the results asv wrote, so that the
table says what is on disk (and what the site will show), not what the run meant to do.

A row: the commit, its date, the Gemm cases timed (a GPU box), the kernels the resource suite compiled and the
range of their registers and shared memory, how many spill, and how many benchmarks failed. A commit asv recorded
nothing of says so.
"""

from __future__ import annotations

import ast
import datetime
import itertools
import math

from ..results.asvsuite import RESOURCES, RunReader

GEMM_RATES = ("bench_gemm.Gemm.track_tflops", "bench_gemm.GemmShapes.track_tflops")
HEADER = ("commit", "date", "Gemm cases timed", "kernels compiled", "registers/thread", "shared memory/block",
          "spilling", "failed")


def _values(run: RunReader, name: str) -> list[tuple[tuple, float | None]]:
    """(parameters, value) of every combination of one benchmark in the run; empty when it was not run."""
    results = run.run
    if name not in results.get_all_result_keys():
        return []
    params = results.get_result_params(name)
    combos = [tuple(ast.literal_eval(value) for value in combo) for combo in itertools.product(*params)]
    return list(zip(combos, results.get_result_value(name, params)))


def _measured(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _span(values: list[float], unit: str = "") -> str:
    if not values:
        return "-"
    low, high = min(values), max(values)
    return (f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}") + unit


def row(commit: str, run: RunReader | None) -> tuple[str, ...]:
    """The table's row of one commit (its run, or None when asv recorded nothing of it)."""
    if run is None:
        return (commit[:8], "-", "nothing recorded: see asv's log", "", "", "", "", "")
    date = datetime.datetime.fromtimestamp(run.date / 1000, datetime.UTC).strftime("%Y-%m-%d") \
        if run.date else "-"
    failed = sum(value is None for name in run.run.get_all_result_keys()
                 for _, value in _values(run, name))
    rates = [value for name in GEMM_RATES for _, value in _values(run, name) if _measured(value)]
    registers = [(params[0], value) for params, value in _values(run, f"{RESOURCES}.track_registers")
                 if _measured(value)]
    shared = [value for _, value in _values(run, f"{RESOURCES}.track_shared_memory") if _measured(value)]
    spilling = {params[0] for method in ("track_spill_stores", "track_spill_loads")
                for params, value in _values(run, f"{RESOURCES}.{method}") if _measured(value) and value > 0}
    compiled = len({kernel for kernel, _ in registers})
    return (commit[:8], date, str(len(rates)) if rates else "-", str(compiled) if registers else "-",
            _span([value for _, value in registers]), _span(shared, " B"),
            str(len(spilling)) if registers else "-", str(failed))


def table(rows: list[tuple[str, ...]]) -> list[str]:
    """The rows under the header, each column as wide as its widest cell."""
    widths = [max(len(cells[column]) for cells in [HEADER, *rows]) for column in range(len(HEADER))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip() for cells in [HEADER, *rows]]


def summary(runs: list[RunReader], commits: tuple[str, ...]) -> list[str]:
    """The table of `commits` (in the order given) from a machine's runs."""
    by_commit = {run.commit: run for run in runs}
    return table([row(commit, by_commit.get(commit)) for commit in commits])
