"""The energy track's reading for a few Hopper cases, each charged REPEATS times in a row, as the history charges
them (record.HISTORY_ENERGY_SETTINGS): joules per GEMM, implied power, window, error bound, flag, and the wall time
each reading took against the cost formula. Writes energy.json and energy.md into the folder given."""

import faulthandler
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cupy

from sgemm.catalogue import get_kernel
from sgemm.measuring import energy, telemetry
from sgemm.measuring.problem import make_problem
from sgemm.measuring.record import HISTORY_ENERGY_SETTINGS, device_info
from sgemm.measuring.verify import verify

KERNELS = ("fp16/cublas", "bf16/cublas", "fp16/wgmma_grouped_tma_store", "bf16/wgmma_grouped_tma_store")
SIZES = (4096, 8192)
REPEATS = 3
UPDATE_PERIOD_S = 0.1  # the counter's slowest period the formula allows for


def joined(values, form: str) -> str:
    return ", ".join(format(value, form) for value in values) or "-"


def main(out: Path) -> int:
    # Where a reading waits, should it not end: every thread's stack to stderr every DUMP_S seconds.
    if os.environ.get("DUMP_S"):
        faulthandler.dump_traceback_later(float(os.environ["DUMP_S"]), repeat=True)
    info = device_info(0)
    try:
        board = energy.board_energy(0, info.name)
    except energy.EnergyUnavailable as exc:
        print(f"no readings: {exc}")
        (out / "energy.md").write_text(f"no readings on {info.name}: {exc}\n")
        return 0
    handle = telemetry.nvml_handle(0)
    rows = []
    for size in SIZES:
        for name in KERNELS:
            kernel = get_kernel(name)
            with cupy.cuda.Device(0):
                problem = make_problem(kernel, size, size, size)
                error = verify(problem)
                for repeat in range(1, REPEATS + 1):
                    print(f"charging {name} {size} #{repeat} (checked, error {error:.1e})", file=sys.stderr, flush=True)
                    began = time.monotonic()
                    try:
                        reading = energy.charge_launch(problem.launch, board, HISTORY_ENERGY_SETTINGS).as_dict()
                    except energy.EnergyUnavailable as exc:
                        reading = {"missing": str(exc)}
                    took = time.monotonic() - began
                    nvml_power = telemetry.collect_power_w(handle)  # NVML's one-second average, for comparison
                    row = dict(kernel=name, size=size, repeat=repeat, relative_error=error, seconds=took,
                               nvml_power_w=nvml_power, **reading)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                del problem
    (out / "energy.json").write_text(json.dumps(rows, indent=1))
    lines = [f"GPU {info.name}, power limit {board.power_limit_w:.0f} W; settings {HISTORY_ENERGY_SETTINGS}", "",
             "| kernel | size | J/GEMM (3 readings) | spread (max/min - 1) | implied W | NVML W after | window s "
             "| error bound | wall s a reading (formula's bound) | flags |",
             "|---|---:|---|---:|---|---|---|---|---|---|"]
    bound = HISTORY_ENERGY_SETTINGS.case_seconds(UPDATE_PERIOD_S)
    for size in SIZES:
        for name in KERNELS:
            mine = [r for r in rows if r["kernel"] == name and r["size"] == size]
            read = [r for r in mine if "joules_per_launch" in r]
            joules = [r["joules_per_launch"] for r in read]
            spread = max(joules) / min(joules) - 1 if joules else float("nan")
            notes = [r.get("flag") or r.get("missing", "") for r in mine]
            lines.append(
                f"| {name} | {size} | {joined(joules, '.4f')} | {spread:.2%} | "
                f"{joined([r['power_w'] for r in read], '.0f')} | {joined([r['nvml_power_w'] for r in mine], '.0f')} | "
                f"{joined([r['window_s'] for r in read], '.2f')} | {joined([r['error_bound'] for r in read], '.2%')} | "
                f"{statistics.median(r['seconds'] for r in mine):.2f} ({bound:.2f}) | "
                f"{'; '.join(note for note in notes if note) or '-'} |")
    cases = len(KERNELS) * len(SIZES)
    lines += ["", f"cost formula: {cases} cases x {bound:.2f} s = "
              f"{energy.cost_per_commit_s(cases, HISTORY_ENERGY_SETTINGS, UPDATE_PERIOD_S):.1f} s a commit at most; "
              f"measured {sum(r['seconds'] for r in rows) / REPEATS:.1f} s a repeat"]
    (out / "energy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
