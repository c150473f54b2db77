"""Does the gate tell real slowdowns from noise on this GPU box, and refuse a GPU it does not have to itself?

In a scratch clone of HEAD, with the working tree's uncommitted changes committed on top, it makes these commits,
each on top of HEAD:
  DOCS    documentation only.
  SLOW_G  the TMA-store epilogue of kernels/wgmma_specialized.cu spins SPIN_G SM cycles per tile: the Hopper
          ladder's last step (fp16/ and bf16/wgmma_grouped_tma_store) about 0.5% slower at 8192; steps c to f of the
          same file do not take that branch, and compile to the programs they were.
  SLOW_S  kernels/fp32_naive.cu's 32 x 32 instantiation spins SPIN_S SM cycles before its K loop: fp32/naive about
          0.4% slower at 4096, the file's four other kernels unchanged programs.
  TILE    kernels/fp32_vectorized.cu writes a thread's column groups of C out in the other order: for each of its
          seven kernels a new program. On an H100 at 4096 three of them run at the same speed and four faster (by up
          to 6%: the compiler schedules the epilogue differently).
Steps (--steps, default all of them), each a gate run as `sgemm gate` in the clone, its report kept:
  aa     --aa-runs A/A gates (HEAD -> DOCS) of every kernel at 4096, the shape sweep left out, timing forced:
         expected exit 0 and no verdict but SAME. The first gate's rounds teach the paired noise file the later
         ones use (written to OUT/noise.json).
  slow_g, slow_s  HEAD -> SLOW_G and HEAD -> SLOW_S with default options: expected exit 1 naming exactly the
         changed kernels (and their precision twins); then each again at 4096 with timing forced, every
         unchanged kernel of the same file SAME; and tools/acceptance/ab_events.py's ratio for the changed kernels (the
         geometric mean of EVENTS_PROCESSES processes, each with its interval), to compare.
  tile   HEAD -> TILE at 4096: expected exit 0 (no regression), the file's seven kernels timed, no REGRESSION.
  busy   a process running FP16 cuBLAS on the GPU, then a gate: expected exit 2 within 60 s naming that process.
The slowdowns are tools/acceptance/inject.py's spins. Writes OUT/selftest.md (a summary table, then every report)
and OUT/selftest.json. Exit 0 when every gate ended as expected. Usage, from the repository root on a GPU box:
    python -m tools.acceptance.gate_selftest [OUT] [--steps aa,slow_g,slow_s,tile,busy] [--aa-runs 3]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sgemm import sourcetree
from sgemm.rounds.evidence import Effect
from tools.acceptance import inject
from tools.parser import ToolParser

ROOT = Path(__file__).resolve().parents[2]

# Cycles of spin per tile in the TMA-store epilogue: ~140k cycles a tile of 128 x 256 x 8192 at the power cap's clock.
SPIN_G = 800
# Cycles of spin before the K loop of each 32 x 32 block of fp32/naive: K of them made it 0.43% slower at 4096 on an
# H100. The same spin after the stores made it 0.65% faster at 4096 (and slower at 1024 and 2048), and spins in the
# element-by-element path of fp32_vectorized.cu moved its time by -3.4% and +3.5% whatever their length: where code
# is added can change how the compiler schedules, and the hardware runs, the whole kernel.
SPIN_S = "K"


def slow_g(tree: Path) -> None:
    inject.spin(tree, inject.TMA_STORE_EPILOGUE, str(SPIN_G), f"Gate self-test: an injected slowdown, {SPIN_G} SM "
                "cycles a tile.")


def slow_s(tree: Path) -> None:
    inject.spin(tree, inject.NAIVE_BEFORE_K_LOOP, SPIN_S, "Gate self-test: an injected slowdown, before the K loop.")


def tile(tree: Path) -> None:
    """fp32_vectorized.cu's column groups of C written out in the other order: new programs, not slower ones."""
    inject.replace_once(tree / "kernels" / "fp32_vectorized.cu",
                        "        for (int g = 0; g < GROUPS; ++g) {\n            const int col = block_col",
                        "        for (int g = GROUPS - 1; g >= 0; --g) {\n            const int col = block_col")


EDITS = {"SLOW_G": slow_g, "SLOW_S": slow_s, "TILE": tile}
CHANGED = {"SLOW_G": {"fp16/wgmma_grouped_tma_store", "bf16/wgmma_grouped_tma_store"},
           "SLOW_S": {"fp32/naive"}}
EVENTS_CASES = {"SLOW_G": [("fp16/wgmma_grouped_tma_store", 8192), ("bf16/wgmma_grouped_tma_store", 8192),
                           ("fp16/wgmma_grouped_tma_store", 4096)],
                "SLOW_S": [("fp32/naive", 4096)]}
EVENTS_PROCESSES = 3


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def make_clone(source: Path) -> tuple[Path, dict[str, str]]:
    clone = Path(tempfile.mkdtemp(prefix="gate-selftest-")) / "clone"
    subprocess.run(["git", "clone", "-q", str(source), str(clone)], check=True)
    git(clone, "config", "user.name", "gate self-test")
    git(clone, "config", "user.email", "gate-selftest@localhost")
    # The working tree as it is (tracked and untracked files git does not ignore): what is measured is what is being
    # checked, committed or not.
    for name in git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if name and (source / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, clone / name)
        elif name and (clone / name).exists():
            (clone / name).unlink()
    git(clone, "add", "-A")
    if git(clone, "status", "--porcelain"):
        git(clone, "commit", "-qm", "the working tree")
    commits = {"HEAD": git(clone, "rev-parse", "HEAD")}
    for name, edit in EDITS.items():
        git(clone, "checkout", "-q", commits["HEAD"])
        try:
            edit(clone)
        except inject.InjectError as exc:
            sys.exit(f"gate-selftest: {name}: {exc}")
        git(clone, "commit", "-qam", f"self-test: {name}")
        commits[name] = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", commits["HEAD"])
    with open(clone / "README.md", "a") as readme:
        readme.write("\nGate self-test: a documentation-only change.\n")
    git(clone, "commit", "-qam", "README: one more line")
    commits["DOCS"] = git(clone, "rev-parse", "HEAD")
    return clone, commits


def run_gate(clone: Path, out: Path, work: Path, name: str, base: str, head: str, *args: str) -> dict:
    git(clone, "checkout", "-q", head)
    started = time.monotonic()
    report = out / f"{name}.md"
    with open(out / f"{name}.log", "w") as log:
        status = subprocess.run([sys.executable, "-m", "sgemm", "gate", base, head, "--report", str(report),
                                 "--work", str(work / name), *args], cwd=clone, stdout=subprocess.DEVNULL,
                                stderr=log).returncode
    text = report.read_text() if report.exists() else ""
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in text.splitlines()
            if re.match(r"^\| \S+/\S+ ", line)]
    timed = [row for row in rows if row[7] not in ("0", "")]
    flagged = [(row[0], row[10].strip("*")) for row in rows if row[10].strip("*") != "SAME"]
    detectable = sorted(float(row[6].rstrip("%")) for row in timed if row[6].endswith("%"))
    result = {"name": name, "exit": status, "seconds": round(time.monotonic() - started), "cases": len(rows),
              "timed": len(timed), "flagged": flagged, "rows": rows,
              "median_detectable_percent": detectable[len(detectable) // 2] if detectable else None,
              "rounds": max((int(row[7]) for row in timed), default=0)}
    print(f"{name}: exit {status}, {result['seconds']} s, {len(rows)} cases ({len(timed)} timed), "
          f"not SAME: {flagged or '-'}", flush=True)
    return result


def events_ratio(clone: Path, commits: dict[str, str], name: str, kernel: str, size: int) -> tuple[float, str]:
    """tools/acceptance/ab_events.py's ratio in EVENTS_PROCESSES processes: their geometric mean, and in words each
    process's ratio with its interval and a 95% t-interval over the processes (a ratio moves more between processes
    than within one)."""
    trees = Path(tempfile.mkdtemp(prefix="ab-events-"))
    for side in ("HEAD", name):
        sourcetree.export(clone, commits[side], trees / side)
    found = []
    for _ in range(EVENTS_PROCESSES):
        # Run from this checkout, whatever commit the clone has checked out: the timer is this repository's.
        done = subprocess.run([sys.executable, "-m", "tools.acceptance.ab_events", str(trees / "HEAD"),
                               str(trees / name), kernel, str(size)], cwd=ROOT, capture_output=True, text=True)
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
            return float("nan"), "the events script failed"
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    logs = [math.log(one["ratio"]) for one in found]
    over = Effect(statistics.fmean(logs), statistics.stdev(logs), (len(logs),), len(logs) - 1)
    each = ", ".join(f"{one['ratio']:.4f}" + (" ({:.4f}–{:.4f})".format(*one["interval"]) if one.get("interval")
                                               else "") for one in found)
    return over.ratio, (f"geometric mean of {len(found)} processes ({each}; 95% over the processes "
                        "{:.4f}–{:.4f})".format(*over.interval(0.95)))


def start_fp16_load(clone: Path) -> subprocess.Popen:
    """Another tenant: FP16 cuBLAS at 8192 in a loop for two minutes."""
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
    load = subprocess.Popen([sys.executable, "-c", script], cwd=clone, stdout=subprocess.PIPE, text=True)
    load.stdout.readline()  # "running": its CUDA context exists, so NVML lists it
    return load


def machine(clone: Path) -> str:
    return subprocess.run([sys.executable, "-c", "from sgemm.results.machine import detect_identity, machine_name; "
                           "print(machine_name(detect_identity()))"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip()


def main() -> int:
    parser = ToolParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default="gate-selftest")
    parser.add_argument("--steps", default="aa,slow_g,slow_s,tile,busy")
    parser.add_argument("--aa-runs", type=int, default=3)
    parser.add_argument("--aa-first", type=int, default=1, help="the number of the first A/A gate (to go on from "
                        "earlier ones)")
    parser.add_argument("--noise", help="a paired noise file to give the A/A gates from the first on")
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gate-selftest-work-"))
    clone, commits = make_clone(ROOT)
    gates, failures, notes = [], 0, []

    def expect(result: dict, status: int, flagged_kernels: set[str] | None = None, also: bool = True) -> None:
        nonlocal failures
        named = {case.split(" ")[0] for case, verdict in result["flagged"] if verdict == "REGRESSION"}
        ok = also and result["exit"] == status and (flagged_kernels is None or named == flagged_kernels)
        if status == 0:
            ok = ok and not result["flagged"]
        result.update(expected=status, ok=ok)
        failures += not ok
        gates.append(result)

    if "aa" in steps:
        noise = args.noise
        for run in range(args.aa_first, args.aa_first + args.aa_runs):
            options = ["-k", "fp32", "-k", "fp16", "-k", "bf16", "--size", "4096", "--no-sweep", "--time-unchanged"]
            result = run_gate(clone, out, work, f"aa-{run}", commits["HEAD"], commits["DOCS"], *options,
                              *(["--noise", noise] if noise else []))
            result["noise_file"] = bool(noise)
            expect(result, 0)
            if run == 1 and not noise:
                noise = str(out / "noise.json")
                done = subprocess.run([sys.executable, "-m", "sgemm", "noise", "--rounds", str(work / "aa-1"),
                                       "--machine", machine(clone), "--out", noise], cwd=clone, capture_output=True,
                                      text=True)
                notes.append(f"noise from aa-1: {done.stdout.strip() or done.stderr.strip()}")
    for name in ("SLOW_G", "SLOW_S"):
        lower = name.lower()
        if lower not in steps:
            continue
        expect(run_gate(clone, out, work, lower, commits["HEAD"], commits[name]), 1, CHANGED[name])
        expect(run_gate(clone, out, work, f"{lower}-forced", commits["HEAD"], commits[name], "--time-unchanged",
                        "--size", "4096"), 1, CHANGED[name])
        for kernel, at in EVENTS_CASES[name]:
            ratio, how = events_ratio(clone, commits, name, kernel, at)
            gate_rows = [row for g in gates if g["name"] in (lower, f"{lower}-forced") for row in g["rows"]
                         if row[0] == f"{kernel} {at}x{at}x{at}" and row[3]]
            gate_ratio = float(gate_rows[0][3]) if gate_rows else float("nan")
            difference = abs(gate_ratio - ratio) * 100
            notes.append(f"{kernel} at {at}: gate {gate_ratio:.4f} ({gate_rows[0][4] if gate_rows else '-'}), "
                         f"CuPy events alone {ratio:.4f}, {how}: {difference:.2f} points apart")
            failures += not difference <= 0.2
    if "tile" in steps:
        result = run_gate(clone, out, work, "tile", commits["HEAD"], commits["TILE"], "--size", "4096")
        result["flagged"] = [f for f in result["flagged"] if f[1] != "IMPROVEMENT"]  # a change may be faster
        expect(result, 0, also=result["timed"] == 7)
    if "busy" in steps:
        load = start_fp16_load(clone)
        try:
            result = run_gate(clone, out, work, "busy", commits["HEAD"], commits["SLOW_G"], "--size", "4096")
            log = (out / "busy.log").read_text()
            named = f"pid {load.pid}" in log or f"pid {load.pid}" in ((out / "busy.md").read_text()
                                                                      if (out / "busy.md").exists() else "")
            notes.append(f"busy GPU: the gate {'named' if named else 'did not name'} the other process "
                         f"(pid {load.pid}) and exited {result['exit']} after {result['seconds']} s")
            expect(result, 2, also=named and result["seconds"] <= 60)
        finally:
            load.kill()
            load.wait()

    table = ["| gate | exit (expected) | wall | cases (timed) | rounds | median detectable | not SAME |",
             "|---|---|---:|---:|---:|---:|---|"]
    for g in gates:
        flagged = ", ".join(f"{case} {verdict}" for case, verdict in g["flagged"]) or "-"
        table.append(f"| {g['name']} | {g['exit']} ({g['expected']}){'' if g['ok'] else ' FAILED'} | {g['seconds']} s"
                     f" | {g['cases']} ({g['timed']}) | {g['rounds']} | {g['median_detectable_percent']}% | "
                     f"{flagged} |")
    summary = "\n".join(table + [""] + [f"- {note}" for note in notes])
    print("\n" + summary)
    reports = [f"\n\n# {g['name']}\n\n" + ((out / f"{g['name']}.md").read_text()
                                         if (out / f"{g['name']}.md").exists() else "(no report)") for g in gates]
    (out / "selftest.md").write_text(summary + "".join(reports))
    (out / "selftest.json").write_text(json.dumps({"gates": gates, "notes": notes, "commits": commits}, indent=1))
    for g in gates:  # the reports are in selftest.md; the logs' tails say what went wrong
        (out / f"{g['name']}.md").unlink(missing_ok=True)
        log = out / f"{g['name']}.log"
        if g["ok"]:
            log.unlink(missing_ok=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
