#!/usr/bin/env python3
"""Does the gate tell real slowdowns from noise on this GPU box, and refuse a GPU it does not have to itself?

In a scratch clone of HEAD, with the working tree's uncommitted changes committed on top, it makes three commits:
SLOW_1 and SLOW_3 make fp32/warptile spin for a few SM cycles per unit of K at the start of every block (about 1% and
3% slower; the spin is a template parameter that is 0 everywhere else, so every other kernel compiles as before), and
DOCS changes documentation only. Steps (--steps, default all of them):

  docs   N documentation-only gates (--docs-runs, default 3) with every kernel selected at one size (--docs-size):
         expected exit 0, no REGRESSION and no IMPROVEMENT.
  slow   the gate from HEAD to SLOW_1 (threshold 0.5%) and to SLOW_3 (default threshold), each the gate of one
         changed kernel at the suite's default sizes: expected exit 1 naming fp32/warptile alone; then one process
         measures the three variants side by side (NVBench, in-process A/B) to give the ratios the gate should report.
  busy   a process running FP16 cuBLAS on the GPU, then a gate: expected exit 2 within 60 s naming that process.

Each gate's report and log land in OUTPUT_DIR; a summary table is printed last. Needs what `sgemm gate` needs
(SGEMM_CUDA_SITE; offline, PIP_NO_INDEX and PIP_FIND_LINKS). Exit 0 when every gate ended as expected.
Usage: scripts/gate-selftest.py [OUTPUT_DIR] [--steps docs,slow,busy] [--docs-runs 3] [--docs-size 2048]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KERNEL = "fp32/warptile"
SOURCE = "kernels/fp32_warptile.cu"
TEMPLATE = "template <int BM, int BN, int BK, int WM, int WN, int WN_ITERS, int TM, int TN, int THREADS>"
BODY_START = "const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {\n"
INSTANTIATION = "gemm_warptile<128, 128, 16, 64, 64, 4, 8, 4, 128>"
ENTRY = f'entry = "{INSTANTIATION}"'
# SM cycles of spin per unit of K: a block's main loop takes K / BK steps, so a spin proportional to K costs the same
# share of the time at every size. ~2.3M cycles per block at 4096 on an H100 make 6 about 1% and 18 about 3%.
SPIN_1, SPIN_3 = 6, 18
SPIN = """    if constexpr (SPIN_PER_K > 0) {  // gate self-test: an injected slowdown
        const long long until = clock64() + static_cast<long long>(SPIN_PER_K) * K;
        while (clock64() < until) {
        }
    }
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_clone(source: Path) -> tuple[Path, dict[str, str]]:
    """The scratch clone and its commits: HEAD, SLOW_1, SLOW_3 (on top of SLOW_1's parent) and DOCS."""
    clone = Path(tempfile.mkdtemp(prefix="gate-selftest-")) / "clone"
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
    git(clone, "config", "user.name", "gate self-test")
    git(clone, "config", "user.email", "gate-selftest@localhost")
    # The working tree as it is (tracked and untracked files git does not ignore), so that what is measured is what
    # is being checked, committed or not.
    for name in git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (source / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, clone / name)
        elif name and (clone / name).exists():
            (clone / name).unlink()  # deleted in the working tree
    git(clone, "add", "-A")
    if git(clone, "status", "--porcelain"):
        git(clone, "commit", "-qm", "the working tree")
    commits = {"HEAD": git(clone, "rev-parse", "HEAD")}
    kernel, catalogue = clone / SOURCE, clone / "sgemm/catalogue.toml"
    text = kernel.read_text()
    if text.count(TEMPLATE) != 1 or text.count(BODY_START) != 1 or catalogue.read_text().count(ENTRY) != 1:
        sys.exit(f"{SOURCE} or fp32/warptile's catalogue entry is not the one this self-test edits")
    spun = text.replace(TEMPLATE, TEMPLATE[:-1] + ", int SPIN_PER_K = 0>").replace(BODY_START, BODY_START + SPIN)
    original_catalogue = catalogue.read_text()
    for name, spin in (("SLOW_1", SPIN_1), ("SLOW_3", SPIN_3)):
        git(clone, "checkout", "-q", commits["HEAD"])
        kernel.write_text(spun)
        catalogue.write_text(original_catalogue.replace(ENTRY, ENTRY[:-2] + f', {spin}>"'))
        git(clone, "commit", "-qam", f"{KERNEL}: {spin} SM cycles of spin per unit of K")
        commits[name] = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", commits["HEAD"])
    with open(clone / "README.md", "a") as readme:
        readme.write("\nGate self-test: a documentation-only change.\n")
    git(clone, "commit", "-qam", "README: one more line")
    commits["DOCS"] = git(clone, "rev-parse", "HEAD")
    return clone, commits


def run_gate(clone: Path, out: Path, name: str, base: str, head: str, *args: str) -> dict:
    git(clone, "checkout", "-q", head)
    started = time.monotonic()
    report = out / f"{name}.md"
    with open(out / f"{name}.log", "w") as log:
        status = subprocess.run([sys.executable, "-m", "sgemm", "gate", base, head, "--report", str(report), *args],
                                cwd=clone, stdout=subprocess.DEVNULL, stderr=log).returncode
    text = report.read_text() if report.exists() else ""
    rows = [line for line in text.splitlines() if re.match(r"^\| \S+/\S+ ", line)]
    flagged = [(row.split("|")[1].strip(), row.split("|")[11].strip().strip("*")) for row in rows
               if re.search(r"\*\*(REGRESSION|IMPROVEMENT|AMBIGUOUS|ERROR)\*\*", row)]
    result = {"name": name, "exit": status, "seconds": round(time.monotonic() - started), "cases": len(rows),
              "flagged": flagged, "rows": rows}
    print(f"{name}: exit {status}, {result['seconds']} s, {len(rows)} cases, not SAME: {flagged or '-'}", flush=True)
    return result


def direct_ratios(clone: Path, sizes: list[int], processes: int = 3) -> dict[int, dict[str, float]]:
    """The three variants measured side by side in one process, in a few processes: each spin's time over no spin's,
    per size, the geometric mean over the processes."""
    script = f"""
import dataclasses, json, sys
from sgemm.catalogue import get_kernel
from sgemm.measuring.record import Case, run_cases
base = get_kernel({KERNEL!r})
variants = {{spin: dataclasses.replace(base, name=f"{{base.name}}_spin{{spin}}",
                                      entry={INSTANTIATION[:-1]!r} + f", {{spin}}>") for spin in (0, {SPIN_1}, {SPIN_3})}}
cases = [Case(variants[spin], s, s, s) for s in {sizes!r} for spin in variants]
results = run_cases(cases)
print(json.dumps({{case.id: results[case.id].median_s for case in cases}}))
"""
    logs: dict[int, dict[str, list[float]]] = {size: {"1%": [], "3%": []} for size in sizes}
    for _ in range(processes):
        done = subprocess.run([sys.executable, "-c", script], cwd=clone, capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            return {}
        medians = json.loads(done.stdout.strip().splitlines()[-1])
        for size in sizes:
            of = {spin: medians[f"{KERNEL}_spin{spin}/{size}x{size}x{size}"] for spin in (0, SPIN_1, SPIN_3)}
            logs[size]["1%"].append(math.log(of[SPIN_1] / of[0]))
            logs[size]["3%"].append(math.log(of[SPIN_3] / of[0]))
    return {size: {key: math.exp(sum(values) / len(values)) for key, values in by.items()} for size, by in logs.items()}


def start_fp16_load() -> subprocess.Popen:
    """Another tenant: FP16 cuBLAS at 8192 in a loop for two minutes, as seen bringing the GPU to its power cap."""
    script = """
import time
import cupy
from sgemm.catalogue import get_kernel
from sgemm.measuring.problem import make_problem
problem = make_problem(get_kernel("fp16/cublas"), 8192, 8192, 8192)
print("running", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    problem.launch()
    cupy.cuda.Device().synchronize()
"""
    load = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    load.stdout.readline()  # "running": its CUDA context exists, so NVML lists it
    return load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="gate-selftest")
    parser.add_argument("--steps", default="docs,slow,busy")
    parser.add_argument("--docs-runs", type=int, default=3)
    parser.add_argument("--docs-size", type=int, default=2048)
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clone, commits = make_clone(Path(__file__).resolve().parents[1])
    sys.path.insert(0, str(clone))
    from sgemm.catalogue import default_sizes

    sizes = default_sizes(clone / "sgemm/catalogue.toml")
    gates, failures = [], 0

    def expect(result: dict, status: int, flagged_kernels: set[str] | None = None, also: bool = True) -> None:
        nonlocal failures
        named = {case.split(" ")[0] for case, verdict in result["flagged"] if verdict == "REGRESSION"}
        ok = also and result["exit"] == status and (flagged_kernels is None or named == flagged_kernels)
        if status == 0:
            ok = ok and not result["flagged"]
        result["expected"] = status
        result["ok"] = ok
        failures += not ok
        gates.append(result)

    if "slow" in steps:
        expect(run_gate(clone, out, "slow-1", commits["HEAD"], commits["SLOW_1"], "--threshold", "0.5"), 1, {KERNEL})
        expect(run_gate(clone, out, "slow-3", commits["HEAD"], commits["SLOW_3"]), 1, {KERNEL})
        git(clone, "checkout", "-q", commits["SLOW_3"])
        ratios = direct_ratios(clone, sizes)
        (out / "direct-ab.json").write_text(json.dumps(ratios, indent=1))
        print("\nIn-process A/B (the three variants in one NVBench process, three such processes; time with spin / "
              "without), against the gates' ratios:")
        for result, key in ((gates[-2], "1%"), (gates[-1], "3%")):
            for row in result["rows"]:
                cells = [c.strip() for c in row.split("|")]
                if cells[1].startswith(KERNEL + " "):
                    size = int(cells[1].split(" ")[1].split("x")[0])
                    direct = ratios.get(size, {}).get(key, float("nan"))
                    print(f"  {key} {cells[1]}: gate {cells[4]}, direct {direct:.3f}, "
                          f"difference {abs(float(cells[4]) - direct) * 100:.2f} points; detectable {cells[7]}; "
                          f"{cells[11]}")
    if "docs" in steps:
        for run in range(1, args.docs_runs + 1):
            expect(run_gate(clone, out, f"docs-{run}", commits["HEAD"], commits["DOCS"], "-k", "fp32", "-k", "fp16",
                            "--size", str(args.docs_size), "--no-sweep"), 0)
    if "busy" in steps:
        load = start_fp16_load()
        try:
            result = run_gate(clone, out, "busy", commits["HEAD"], commits["SLOW_3"], "--size", "1024")
            report = (out / "busy.md").read_text() if (out / "busy.md").exists() else ""
            named = f"pid {load.pid}" in report or f"pid {load.pid}" in (out / "busy.log").read_text()
            print(f"\nbusy GPU: the gate {'named' if named else 'did not name'} the other process (pid {load.pid}) "
                  f"and exited {result['exit']} after {result['seconds']} s")
            expect(result, 2, also=named and result["seconds"] <= 60)
        finally:
            load.kill()
            load.wait()

    print("\n| gate | exit (expected) | wall | cases | not SAME |")
    print("|---|---|---:|---:|---|")
    for g in gates:
        flagged = ", ".join(f"{case} {verdict}" for case, verdict in g["flagged"]) or "-"
        print(f"| {g['name']} | {g['exit']} ({g['expected']}){'' if g['ok'] else ' FAILED'} | {g['seconds']} s | "
              f"{g['cases']} | {flagged} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
