"""The gate end to end on the CPU.

Unpaired: real `asv continuous` runs of a synthetic suite whose figures each commit sets, read back round by round.
Paired: a copy of this repository's kernels and catalogue, changed commit by commit, each round's process stood in
for by a script that writes the ratios a GPU would (the real one needs a GPU: scripts/gpu-check.sh runs it); the
trees, the same-program check (NVRTC, no GPU), the looks, the verdicts, the report and the exit status are real.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import LAUNCH_METHOD, seed_asv_virtualenv

from sgemm.gate.changes import Selection, select_kernels
from sgemm.gate.report import markdown
from sgemm.gate.run import (EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED, MIXED, PAIRED, UNPAIRED, GateResult, Settings,
                            run_gate)
from sgemm.gate.verdict import Verdict
from sgemm.results.asvsuite import SuiteCase
from sgemm.results.machine import write_machine_file
from sgemm.rounds import session
from sgemm.rounds.session import GpuNotFree

ROOT = Path(__file__).resolve().parents[2]

# --- Unpaired: asv continuous over a synthetic suite -------------------------------------------------------------

# The suite reads its figures from the package installed from the commit under test, as the real one does. Each
# process is one round: its median scatters by 0.2% around the commit's time, as between-process noise does.
SUITE = """
import json
import os
import random


class Gemm:
    params = [["naive", "float4", "cublas"], [64], ["fp32"]]
    param_names = ["kernel", "size", "precision"]

    def setup(self, kernel, size, precision):
        import figures
        if kernel in figures.FAILING:
            with open(os.environ["SGEMM_CASE_EVENTS"], "a") as out:
                out.write(json.dumps({"commit": os.environ["ASV_COMMIT"], "case": f"fp32/{kernel}/64x64x64",
                                      "kind": "failed", "reason": figures.FAILING[kernel]}) + "\\n")
            raise ValueError(figures.FAILING[kernel])
        self.time = 1e-3 * figures.SLOWDOWN.get(kernel, 1.0) * (1 + 0.002 * random.gauss(0, 1))
        self.clock = figures.CLOCK_MHZ.get(kernel, 1980.0)
        self.throttled = figures.THROTTLED_MS.get(kernel, 0.0)

    def track_round_time(self, kernel, size, precision):
        return {"samples": [self.time], "number": 1}

    track_round_time.unit = "seconds"

    def track_round_sm_clock(self, kernel, size, precision):
        return {"samples": [self.clock], "number": 1}

    def track_round_samples(self, kernel, size, precision):
        return {"samples": [500], "number": 1}

    def track_card(self, kernel, size, precision):
        return {"samples": [0xabcdef], "number": 1}

    def track_throttled(self, kernel, size, precision):
        return {"samples": [self.throttled], "number": 1}

    def track_power(self, kernel, size, precision):
        return 300.0

    def track_time(self, kernel, size, precision):
        raise AssertionError("the gate runs only the tracks a verdict needs")
"""

CASES = [SuiteCase("Gemm", (kernel, 64, "fp32")) for kernel in ("naive", "float4", "cublas")]
SELECTION = Selection(("fp32/naive", "fp32/float4", "fp32/cublas"),
                      {"fp32/naive": "changed", "fp32/float4": "changed", "fp32/cublas": "control"},
                      everything="shared code changed: sgemm/measuring/measure.py")


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def committer(monkeypatch):
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)


@pytest.fixture
def synthetic_repo(tmp_path, monkeypatch, committer, asv_virtualenv):
    """A git repository whose commits differ only in the figures the suite will read; the virtualenv asv would make
    for its configuration is already where the gate's asv looks for it (work_dir/unpaired/env), as on a box that
    gated before."""
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "benchmarks" / "bench_gemm.py").write_text(SUITE)
    install = ("in-dir={env_dir} python -c \"import shutil, site; "
               "shutil.copy(r'{build_dir}/figures.py', site.getsitepackages()[0])\"")
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "figures", "repo": ".", "branches": ["main"], "environment_type": "virtualenv",
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"], "build_command": [],
        "install_command": [install], "uninstall_command": [], "benchmark_dir": "benchmarks",
        "results_dir": "results", "html_dir": "html", "launch_method": LAUNCH_METHOD}))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    write_machine_file({"machine": "gpu-box", "gpu": "NVIDIA H100 80GB HBM3", "arch": "x86_64", "cpu": "x",
                        "num_cpu": "1", "os": "Linux", "ram": "1"}, home / ".asv-machine.json")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    seed_asv_virtualenv(asv_virtualenv, tmp_path / "gate" / "unpaired" / "env")

    def commit(message: str, slowdown: dict, clock_mhz: dict, readme: str = "figures\n", failing=None,
               throttled=None) -> str:
        (repo / "figures.py").write_text(f"SLOWDOWN = {slowdown!r}\nCLOCK_MHZ = {clock_mhz!r}\n"
                                         f"FAILING = {failing or {}!r}\nTHROTTLED_MS = {throttled or {}!r}\n")
        (repo / "README.md").write_text(readme)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", message)
        return git(repo, "rev-parse", "HEAD")

    return repo, commit


def no_wait(device, timeout):
    return None


def unpaired_gate(repo, base, head, tmp_path, **settings):
    return run_gate(repo, base, head, SELECTION, CASES, "gpu-box", tmp_path / "gate",
                    Settings(**{"rounds": 3, "max_rounds": 3, **settings}), gpu_check=no_wait)


def verdicts(result: GateResult) -> dict[str, Verdict]:
    return {c.label: c.verdict for c in result.judged}


def test_unpaired_a_slower_kernel_is_the_only_regression(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("head", {"naive": 1.05}, {})
    result = unpaired_gate(repo, base, head, tmp_path)
    assert result.method == UNPAIRED and "sgemm/measuring/measure.py" in result.unpaired_because
    assert verdicts(result) == {"fp32/naive 64x64x64": Verdict.REGRESSION, "fp32/float4 64x64x64": Verdict.SAME}
    assert result.exit_status == EXIT_REGRESSION
    naive = next(c for c in result.judged if c.label.startswith("fp32/naive"))
    assert naive.ratio == pytest.approx(1.05, rel=0.01)
    assert len(naive.case.before.medians_s) == 3 and len(naive.case.after.medians_s) == 3  # one per round
    assert naive.case.after.cards == ("abcdef",) * 3
    # The gate's results stay in its own directory, never in the project's results/.
    assert not (repo / "results").exists()
    assert (tmp_path / "gate" / "unpaired" / "results" / "gpu-box").is_dir()
    control = next(c for c in result.comparisons if c.case.is_control)
    assert control.label == "fp32/cublas 64x64x64"  # measured as context, outside the family


def test_unpaired_the_sandbox_gets_a_copy_of_the_machine_file_in_the_gates_folder(synthetic_repo, tmp_path,
                                                                                   monkeypatch):
    # The runner's home is none of the job's: a sandbox that forbids it refused ~/.asv-machine.json and the NVBench
    # path ran nothing inside it (an H200 box, lab/2026-11-28-sandbox-gpu).
    from sgemm.gate import unpaired

    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("slower", {"naive": 1.05}, {})
    given = []
    monkeypatch.setattr(unpaired, "contained", lambda command, **options: given.append(options) or command)
    unpaired_gate(repo, base, head, tmp_path)
    machine_file = given[0]["machine_file"]
    assert machine_file.is_relative_to(tmp_path / "gate")
    assert json.loads(machine_file.read_text()) == json.loads((Path.home() / ".asv-machine.json").read_text())
    assert all(options["machine_file"] == machine_file for options in given)


def test_unpaired_a_clock_drop_alone_is_never_a_regression(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("hot", {"float4": 1.1}, {"float4": 1800.0})  # 10% slower because the clock fell 10%
    result = unpaired_gate(repo, base, head, tmp_path)
    assert verdicts(result)["fp32/float4 64x64x64"] is Verdict.AMBIGUOUS
    assert result.exit_status == EXIT_UNDECIDED


def test_unpaired_at_the_power_cap_a_slowdown_is_ambiguous_and_names_pairing(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {}, throttled={"naive": 120.0})
    head = commit("capped", {"naive": 1.05}, {}, throttled={"naive": 300.0})
    result = unpaired_gate(repo, base, head, tmp_path)
    naive = next(c for c in result.judged if c.label.startswith("fp32/naive"))
    assert naive.verdict is Verdict.AMBIGUOUS and "power cap" in naive.why
    assert result.exit_status == EXIT_UNDECIDED


def test_unpaired_open_cases_get_more_rounds_up_to_the_cap(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("hot", {"float4": 1.1}, {"float4": 1800.0})  # stays AMBIGUOUS: open until the cap
    result = unpaired_gate(repo, base, head, tmp_path, max_rounds=5, extra_rounds=0)
    assert result.rounds == 5
    float4 = next(c for c in result.judged if c.label.startswith("fp32/float4"))
    naive = next(c for c in result.judged if c.label.startswith("fp32/naive"))
    assert len(float4.case.before.medians_s) == 5  # more rounds, appended to the first three
    assert len(naive.case.before.medians_s) == 3  # decided at the first look: not measured again
    assert naive.level.rounds_before == 0 and float4.level.rounds_before == 3


def test_unpaired_a_documentation_change_passes(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("docs", {}, {}, readme="figures, documented\n")
    result = unpaired_gate(repo, base, head, tmp_path)
    assert set(verdicts(result).values()) == {Verdict.SAME}
    assert result.exit_status == EXIT_PASS


def test_unpaired_a_failing_benchmark_says_why_in_the_report(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("broken", {}, {}, failing={"naive": "wrong result: relative error 0.0443 > 1e-05"})
    result = unpaired_gate(repo, base, head, tmp_path)
    assert list(result.failed) == ["fp32/naive 64x64x64"]
    assert result.exit_status == EXIT_UNDECIDED
    row = next(line for line in markdown(result, "test GPU").splitlines() if "**ERROR**" in line)
    assert "head: wrong result: relative error 0.0443 > 1e-05" in row


def test_a_shared_gpu_stops_the_gate_before_anything_runs(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base, head = commit("base", {}, {}), commit("head", {"naive": 1.05}, {})

    def busy(device, timeout):
        raise GpuNotFree("GPU 0 (NVIDIA H100 80GB HBM3) is in use by pid 4242 (python3, 1,532 MiB); waited 30 s")

    result = run_gate(repo, base, head, SELECTION, CASES, "gpu-box", tmp_path / "gate", Settings(), gpu_check=busy)
    assert result.exit_status == EXIT_UNDECIDED
    assert not (tmp_path / "gate" / "unpaired" / "results").exists()  # nothing was measured
    assert "pid 4242 (python3, 1,532 MiB)" in markdown(result, "gpu")


# --- Paired: this repository's kernels, the round process stood in for ----------------------------------------------

# A stand-in for `python -m sgemm.measuring.ab PLAN OUT`: each case's ratio from RATIOS (1.0 unless named), scattered
# by 0.03% a round as paired rounds are on an H100, the scatter drawn from a seed of the round's own file, so that a
# test's rounds are the same every run; a case named in FAILING fails at head.
FAKE_ROUND = """
import json, random, sys
random.seed(sys.argv[2].rsplit("/", 1)[-1])
plan = json.load(open(sys.argv[1]))
ratios = json.loads(open(sys.argv[1].rsplit("/", 1)[0] + "/../../../fake-ratios.json").read())
with open(sys.argv[2], "a") as out:
    for case in plan["cases"]:
        label = case["label"]
        if label in ratios.get("failing", {}):
            line = {"label": label, "failed": {"side": "head", "kind": "wrong result", \
"reason": ratios["failing"][label]}}
        else:
            ratio = ratios.get("ratios", {}).get(label, 1.0) * (1 + 0.0003 * random.gauss(0, 1))
            side = {"median_s": 1e-3, "sm_clock_mhz": 1400.0, "joules": float("nan"), "relative_error": 1e-6,
                    "library": ""}
            line = {"label": label, "ratio": ratio, "interval": [ratio, ratio], "pairs": 20, "launches_per_block": 10,
                    "seconds": 0.5, "joules_per_launch": 1.1, "sides": \
{"base": side, "head": dict(side, median_s=1e-3 * ratio)}}
        out.write(json.dumps(line) + "\\n")
"""


@pytest.fixture
def kernel_repo(project_repo, tmp_path, monkeypatch):
    """This project's kernels, catalogue and measuring code in a scratch repository, and a fake round process."""
    repo = project_repo
    fake = tmp_path / "fake_round.py"
    fake.write_text(FAKE_ROUND)
    monkeypatch.setattr(session, "ROUND_COMMAND", (sys.executable, str(fake)))

    def commit(message: str, edits: dict) -> str:
        for path, (old, new) in edits.items():
            text = (repo / path).read_text()
            assert text.count(old) == 1, (path, old)
            (repo / path).write_text(text.replace(old, new))
        git(repo, "commit", "-qam", message)
        return git(repo, "rev-parse", "HEAD")

    return repo, commit


SPIN = ("const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {\n",
        "const float* __restrict__ B, int ldb, float beta, float* __restrict__ C, int ldc) {\n"
        "    { const long long until = clock64() + 64; while (clock64() < until) {} }\n")
COMMENT = ("#include <mma.h>\n", "#include <mma.h>\n// a comment: the same program\n")


def paired_gate(repo, base, head, tmp_path, ratios=None, failing=None, gpu_check=no_wait, **settings):
    (tmp_path / "fake-ratios.json").write_text(json.dumps({"ratios": ratios or {}, "failing": failing or {}}))
    selection = select_kernels(str(repo), base, head)
    cases = [SuiteCase.square(name, 4096) for name in selection.kernels]
    return run_gate(repo, base, head, selection, cases, "gpu-box", tmp_path / "gate",
                    Settings(**{"rounds": 3, "max_rounds": 6, **settings}), gpu_check=gpu_check)


def test_paired_a_half_percent_slowdown_is_a_regression_and_a_comment_is_the_same_program(kernel_repo, tmp_path):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("spin in the warptile kernel; a comment in the WMMA kernel",
                  {"kernels/fp32_warptile.cu": SPIN, "kernels/fp16_wmma.cu": COMMENT})
    result = paired_gate(repo, base, head, tmp_path, ratios={"fp32/warptile 4096x4096x4096": 1.005})
    assert result.method == PAIRED and not result.unpaired_because
    assert verdicts(result) == {"fp32/warptile 4096x4096x4096": Verdict.REGRESSION}
    assert "the same program: cubin sha256" in result.unchanged["fp16/wmma_naive 4096x4096x4096"]
    assert "one library in one process" in result.unchanged["fp32/cublas 4096x4096x4096"]  # the control
    assert result.exit_status == EXIT_REGRESSION
    warptile = result.judged[0]
    assert warptile.ratio == pytest.approx(1.005, abs=0.0005) and warptile.case.rounds == 3
    rows = {line.split(" | ")[0][2:]: line for line in markdown(result, "H100").splitlines() if line.startswith("| f")}
    assert "**REGRESSION**" in rows["fp32/warptile 4096x4096x4096"]
    assert "untimed: base and head build the same program" in rows["fp16/wmma_naive 4096x4096x4096"]
    # Each round was one process over every timed case; the trees were the two commits'.
    assert result.processes == 3
    assert (tmp_path / "gate" / "paired" / "trees" / "head" / "kernels" / "fp32_warptile.cu").read_text().count(
        "while (clock64() < until)") == 1


def test_paired_time_unchanged_times_the_same_program_and_finds_it_the_same(kernel_repo, tmp_path):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("a comment", {"kernels/fp16_wmma.cu": COMMENT})
    result = paired_gate(repo, base, head, tmp_path, time_unchanged=True)
    assert not result.unchanged
    assert verdicts(result) == {"fp16/wmma_naive 4096x4096x4096": Verdict.SAME,
                                "fp16/cublas 4096x4096x4096": Verdict.SAME}
    assert result.exit_status == EXIT_PASS


def test_paired_a_build_wrong_at_one_side_is_an_error_naming_it(kernel_repo, tmp_path):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("spin", {"kernels/fp32_warptile.cu": SPIN})
    result = paired_gate(repo, base, head, tmp_path, failing={"fp32/warptile 4096x4096x4096": "relative error 3e-2"})
    assert result.failed == {"fp32/warptile 4096x4096x4096": "head: wrong result: relative error 3e-2"}
    assert result.exit_status == EXIT_UNDECIDED
    assert not result.judged  # no figure of a wrong kernel


def test_paired_a_shared_gpu_is_undecided(kernel_repo, tmp_path):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("spin", {"kernels/fp32_warptile.cu": SPIN})

    def busy(device, timeout):
        raise GpuNotFree("GPU 0 is in use by pid 7 (python3, 10 MiB); waited 30 s")

    result = paired_gate(repo, base, head, tmp_path, gpu_check=busy)
    assert result.exit_status == EXIT_UNDECIDED and "pid 7" in result.shared_gpu[0]


def test_a_change_of_the_measuring_code_is_measured_unpaired_and_says_why(kernel_repo):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("the timer", {"sgemm/measuring/paired.py": ("CONFIDENCE = 0.95", "CONFIDENCE = 0.95  # edited")})
    selection = select_kernels(str(repo), base, head)
    assert selection.everything and "sgemm/measuring/paired.py" in selection.everything


# --- Paired, resumed: a gate cut off takes over its earlier rounds -------------------------------------------------

# A stand-in for the round process whose figures are fixed: a case's k-th round (counted over the round files in its
# folder) always has the same ratio, so that a gate cut off and resumed meets the very lines an uninterrupted one
# does. With "cut_after" set, the process writes half a line and dies once the folder holds that many lines.
FIXED_ROUND = """
import json, random, sys
from pathlib import Path
plan_path = Path(sys.argv[1])
setup = json.loads((plan_path.parent / ".." / ".." / ".." / "fake-ratios.json").read_text())
def complete(path):
    for text in path.read_text().splitlines():
        try:
            yield json.loads(text)
        except ValueError:
            pass
earlier = [line["label"] for path in plan_path.parent.glob("round-*.jsonl") for line in complete(path)]
with open(sys.argv[2], "a") as out:
    for case in json.loads(plan_path.read_text())["cases"]:
        label = case["label"]
        if setup.get("cut_after") is not None and len(earlier) >= setup["cut_after"]:
            out.write('{"label": "' + label + '", "rat')
            sys.exit(1)
        noise = random.Random(f"{label}/{earlier.count(label)}").gauss(0, 1)
        ratio = setup["ratios"].get(label, 1.0) * (1 + setup["spread"].get(label, 0.0003) * noise)
        side = {"median_s": 1e-3, "sm_clock_mhz": 1400.0, "joules": 1.0, "relative_error": 1e-6, "library": ""}
        out.write(json.dumps({"label": label, "ratio": ratio, "interval": [ratio, ratio], "pairs": 20,
                              "launches_per_block": 10, "seconds": 0.5, "joules_per_launch": 1.1,
                              "sides": {"base": side, "head": dict(side, median_s=1e-3 * ratio)}}) + "\\n")
        earlier.append(label)
"""

WARPTILE, WMMA = "fp32/warptile 4096x4096x4096", "fp16/wmma_naive 4096x4096x4096"
# A clear regression, decided at the first look, and a noisy case, open until the most rounds.
FIXED_RATIOS, FIXED_SPREAD = {WARPTILE: 1.005, WMMA: 1.0}, {WMMA: 0.003}


class Cut(Exception):
    """The gate killed between two rounds."""


def cut_after(calls: int):
    made = []

    def check(device, timeout):
        made.append(1)
        if len(made) > calls:
            raise Cut
    return check


@pytest.fixture
def fixed_repo(kernel_repo, tmp_path, monkeypatch):
    repo, commit = kernel_repo
    fixed = tmp_path / "fixed_round.py"
    fixed.write_text(FIXED_ROUND)
    monkeypatch.setattr(session, "ROUND_COMMAND", (sys.executable, str(fixed)))
    base = git(repo, "rev-parse", "HEAD")
    head = commit("spin in the warptile kernel; a comment in the WMMA kernel",
                  {"kernels/fp32_warptile.cu": SPIN, "kernels/fp16_wmma.cu": COMMENT})
    return repo, commit, base, head


def fixed_gate(repo, base, head, where: Path, cut=None, gpu_check=no_wait, sizes=(4096,), devices=None,
               **settings):
    """A gate whose work folder is where/gate; `time_unchanged`, so that both changed kernels are timed."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "fake-ratios.json").write_text(json.dumps({"ratios": FIXED_RATIOS, "spread": FIXED_SPREAD,
                                                        "cut_after": cut}))
    selection = select_kernels(str(repo), base, head)
    cases = [SuiteCase.square(name, size) for name in selection.kernels if "cublas" not in name for size in sizes]
    return run_gate(repo, base, head, selection, cases, "gpu-box", where / "gate",
                    Settings(**{"rounds": 3, "max_rounds": 6, "time_unchanged": True, **settings}),
                    gpu_check=gpu_check, devices=devices)


def judged(result: GateResult) -> dict:
    return {c.label: (c.verdict, c.ratio, c.interval, c.q_value, c.case.rounds, c.level.rounds_before)
            for c in result.judged}


def test_paired_a_gate_cut_off_mid_round_resumes_and_judges_as_if_never_cut(fixed_repo, tmp_path, capsys):
    repo, _, base, head = fixed_repo
    whole = fixed_gate(repo, base, head, tmp_path / "whole")
    assert judged(whole)[WARPTILE][0] is Verdict.REGRESSION and judged(whole)[WARPTILE][4] == 3
    assert judged(whole)[WMMA][4] == 6  # open at 3 rounds: more rounds, so the resumed gate must reach the later look
    assert not whole.resumed
    # Killed in round 2, after its first case and half a line of the next (cut_after: 2 cases + 1 line), then stopped
    # before round 3 could start.
    with pytest.raises(Cut):
        fixed_gate(repo, base, head, tmp_path / "cut", cut=3, gpu_check=cut_after(2))
    rounds = tmp_path / "cut" / "gate" / "paired" / "rounds"
    assert (rounds / "round-2.jsonl").read_text().endswith('"rat')  # the half line is there
    capsys.readouterr()
    resumed = fixed_gate(repo, base, head, tmp_path / "cut")
    assert judged(resumed) == judged(whole)  # the same verdicts, ratios, intervals, q values and rounds
    assert resumed.exit_status == whole.exit_status == EXIT_REGRESSION
    # Rounds 1 and 2 were taken over (two cases, then one: the half line is measured again), the rest measured.
    assert resumed.resumed.startswith(f"2 rounds of 2 cases reused from {rounds} (3 case rounds, written 20")
    said = capsys.readouterr().err
    assert f"sgemm gate: resuming: 2 rounds of 2 cases reused from {rounds}" in said
    assert "sgemm gate: round 3: done in " in said  # every round says how long it took
    assert resumed.processes == whole.processes - 1  # round 2's missing case went into round 3
    assert sorted(p.name for p in rounds.glob("*.jsonl")) == [f"round-{n}.jsonl" for n in range(1, 8)]
    assert "; resumed: 2 rounds of 2 cases reused" in markdown(resumed, "H100")


def test_paired_a_gate_given_more_rounds_takes_over_the_rounds_it_had(fixed_repo, tmp_path):
    repo, _, base, head = fixed_repo
    whole = fixed_gate(repo, base, head, tmp_path / "whole")
    short = fixed_gate(repo, base, head, tmp_path / "again", max_rounds=3)
    assert judged(short)[WMMA][4] == 3
    more = fixed_gate(repo, base, head, tmp_path / "again")
    assert judged(more) == judged(whole)
    assert more.resumed.startswith("3 rounds of 2 cases reused") and more.processes == 3


def test_paired_rounds_of_other_commits_are_set_aside_never_mixed_in(fixed_repo, tmp_path):
    repo, commit, base, head = fixed_repo
    fixed_gate(repo, base, head, tmp_path / "reused", max_rounds=3)
    # Another head with the same kernels, so that only the commit tells the rounds apart.
    other = commit("a comment elsewhere", {"kernels/fp16_wmma.cu": ("// a comment: the same program\n",
                                                                    "// a comment: the same program, reworded\n")})
    fresh = fixed_gate(repo, base, other, tmp_path / "fresh")
    result = fixed_gate(repo, base, other, tmp_path / "reused")
    assert judged(result) == judged(fresh) and result.processes == fresh.processes
    assert result.resumed == f"no round reused from {tmp_path / 'reused' / 'gate' / 'paired' / 'rounds'}; " \
                             "3 rounds of another plan moved aside"
    aside = list((tmp_path / "reused" / "gate" / "paired" / "set-aside").iterdir())
    assert len(aside) == 1 and sorted(p.name for p in aside[0].glob("*.plan.json")) == \
        ["round-1.plan.json", "round-2.plan.json", "round-3.plan.json"]
    plans = [json.loads(p.read_text()) for p in (tmp_path / "reused" / "gate" / "paired" / "rounds").glob("*.json")]
    assert {plan["identity"]["head"] for plan in plans} == {other}


@pytest.mark.parametrize("change", ["settings", "device", "build", "shape"])
def test_paired_rounds_planned_otherwise_are_not_reused(fixed_repo, tmp_path, change):
    repo, _, base, head = fixed_repo
    fixed_gate(repo, base, head, tmp_path / "w", max_rounds=3)
    rounds = tmp_path / "w" / "gate" / "paired" / "rounds"
    for path in rounds.glob("*.plan.json"):
        plan = json.loads(path.read_text())
        if change == "settings":
            plan["settings"]["max_s"] *= 2
        elif change == "device":
            plan["device"] = 1
        elif change == "build":
            plan["cases"][0]["builds"]["head"] = "0" * 64
        else:
            plan["cases"][0]["shape"] = [4096, 4096, 2048]
        path.write_text(json.dumps(plan))
    result = fixed_gate(repo, base, head, tmp_path / "w")
    if change in ("settings", "device"):  # the whole round is another plan's
        assert result.resumed.endswith("3 rounds of another plan moved aside") and "no round reused" in result.resumed
        assert result.processes == fixed_gate(repo, base, head, tmp_path / "fresh").processes
        assert judged(result) == judged(fixed_gate(repo, base, head, tmp_path / "whole"))
    else:  # that case alone is measured again; the other case's lines are this gate's
        assert result.resumed.startswith("3 rounds of 1 cases reused") and "moved aside" not in result.resumed
        label = json.loads((rounds / "round-1.plan.json").read_text())["cases"][0]["label"]
        ratios = {number: [line["ratio"] for line in map(json.loads, (rounds / f"round-{number}.jsonl").read_text()
                                                          .splitlines()) if line["label"] == label]
                  for number in range(1, result.processes + 4)}
        again = [ratio for number in range(4, result.processes + 4) for ratio in ratios[number]]
        case = next(c for c in result.judged if c.label == label)
        assert case.case.paired.ratios == tuple(again[:case.case.rounds])  # none of rounds 1 to 3


def test_a_paired_gate_leaves_an_unpaired_gates_work_alone(fixed_repo, tmp_path):
    repo, _, base, head = fixed_repo
    unpaired = tmp_path / "w" / "gate" / "unpaired"
    for name, text in (("results/gpu-box/abc-virtualenv.json", '{"results": {}}'), ("case-events.jsonl", "{}\n"),
                       ("asv.conf.json", "{}")):
        (unpaired / name).parent.mkdir(parents=True, exist_ok=True)
        (unpaired / name).write_text(text)
    before = {path: path.read_bytes() for path in unpaired.rglob("*") if path.is_file()}
    result = fixed_gate(repo, base, head, tmp_path / "w")
    assert not result.resumed
    assert {path: path.read_bytes() for path in unpaired.rglob("*") if path.is_file()} == before


# --- Exit status and report ----------------------------------------------------------------------------------------


def test_exit_status_rules():
    result = GateResult("a" * 40, "b" * 40, "m", Selection(("fp32/naive",), {"fp32/naive": "changed"}), Settings())
    assert result.exit_status == EXIT_PASS
    result.problems.append("asv continuous exited 3")
    assert result.exit_status == EXIT_UNDECIDED
    undeclared = GateResult("a" * 40, "b" * 40, "m", Selection((), undeclared=("`fp32/old` removed",)), Settings())
    assert undeclared.exit_status == EXIT_UNDECIDED
    shared = GateResult("a" * 40, "b" * 40, "m", Selection(()), Settings(), shared_gpu=["pid 7"])
    assert shared.exit_status == EXIT_UNDECIDED


def test_nothing_to_measure_passes():
    result = GateResult("a" * 40, "b" * 40, "m", Selection(()), Settings())
    assert result.exit_status == EXIT_PASS
    assert "nothing: the change touches no kernel" in markdown(result, "gpu")


def test_the_default_threshold_follows_how_a_case_is_measured():
    settings = Settings(patterns=(("fp16/*", 0.01),))
    assert settings.threshold_for("fp32/naive", PAIRED) == 0.0025
    assert settings.threshold_for("fp32/naive", UNPAIRED) == 0.02
    assert settings.threshold_for("fp16/mma_naive", PAIRED) == 0.01
    assert Settings(threshold=0.005).threshold_for("fp32/naive", UNPAIRED) == 0.005


# --- The measuring code changed: each case's launch as each side's own code makes it -----------------------------

# A stand-in for sgemm/gate/launch_probe.py (which needs a GPU): every case launches alike, unless
# fake-launches.json changes a field of one case for one prober: "base" or "head" (that side's own code), or
# "gate-base" / "gate-head" (the running package, on that side's kernels).
FAKE_PROBE = """
import hashlib, json, sys
from pathlib import Path
plan = json.load(open(sys.argv[1]))
code, tree = Path(plan["code"]).resolve(), Path(plan["tree"]).resolve()
prober = tree.name if code == tree else "gate-" + tree.name
changes = json.loads((tree.parents[3] / "fake-launches.json").read_text()).get(prober, {})
cases = {}
for case in plan["cases"]:
    launch = {"api": "cuLaunchKernelEx", "grid": [4, 4, 1], "block": [256, 1, 1], "shared_memory": 0,
              "program": {"source_sha256": hashlib.sha256(case["kernel"].encode()).hexdigest()},
              "arguments": [{"bytes": "00"}]}
    launch.update(changes.get(case["label"], {}))
    cases[case["label"]] = {"launches": [launch]}
Path(sys.argv[2]).write_text(json.dumps({"sgemm": str(code), "cases": cases}))
"""

MEASURING_EDIT = {"sgemm/measuring/launch.py": ("TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap)",
                                                "TENSOR_MAP_BYTES = 128  # sizeof(CUtensorMap), as the driver has it")}


@pytest.fixture
def probed_repo(kernel_repo, tmp_path, monkeypatch):
    from sgemm.gate import launches

    fake = tmp_path / "fake_probe.py"
    fake.write_text(FAKE_PROBE)
    monkeypatch.setattr(launches, "PROBE_COMMAND", (sys.executable, str(fake)))

    def changed_launches(**by_prober):
        (tmp_path / "fake-launches.json").write_text(json.dumps(by_prober))

    changed_launches()
    return (*kernel_repo, changed_launches)


def measuring_gate(repo, base, head, tmp_path, kernels=("fp32/naive", "fp32/warptile", "fp32/cublas"), **settings):
    (tmp_path / "fake-ratios.json").write_text(json.dumps({"ratios": settings.pop("ratios", {}), "failing": {}}))
    selection = select_kernels(str(repo), base, head)
    cases = [SuiteCase.square(name, 4096) for name in kernels]
    return run_gate(repo, base, head, selection, cases, "gpu-box", tmp_path / "gate",
                    Settings(**{"rounds": 3, "max_rounds": 6, **settings}), gpu_check=no_wait)


def test_a_measuring_refactor_that_changes_no_launch_times_nothing_and_says_why(probed_repo, tmp_path):
    repo, commit, _ = probed_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("a comment in the launch code", MEASURING_EDIT)
    result = measuring_gate(repo, base, head, tmp_path)
    assert result.selection.everything and "sgemm/measuring/launch.py" in result.selection.everything
    assert set(result.unchanged) == {"fp32/naive 4096x4096x4096", "fp32/warptile 4096x4096x4096",
                                     "fp32/cublas 4096x4096x4096"}
    assert not result.comparisons and result.processes == 0 and result.exit_status == EXIT_PASS
    assert not (tmp_path / "gate" / "unpaired").exists() and not (tmp_path / "gate" / "paired").exists()
    report = markdown(result, "H100")
    assert "3 SAME untimed" in report and "nothing timed" in report
    row = next(line for line in report.splitlines() if line.startswith("| fp32/naive"))
    assert "the measuring code changed (sgemm/measuring/launch.py), the kernel's launch did not" in row
    # Each side's code was exported whole, so that its own package described its launches.
    assert (tmp_path / "gate" / "launches" / "code" / "head" / "sgemm" / "measuring" / "launch.py").read_text() \
        .count("as the driver has it") == 1


def test_a_changed_program_the_gate_launches_alike_is_paired_and_only_it_is_timed(probed_repo, tmp_path):
    repo, commit, changed_launches = probed_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("a spin in warptile, and a comment in the launch code", {**MEASURING_EDIT,
                                                                           "kernels/fp32_warptile.cu": SPIN})
    spun = {"fp32/warptile 4096x4096x4096": {"program": {"source_sha256": "warptile with a spin"}}}
    changed_launches(head=spun, **{"gate-head": spun})
    result = measuring_gate(repo, base, head, tmp_path, ratios={"fp32/warptile 4096x4096x4096": 1.004})
    assert result.method == PAIRED and not result.unpaired_cases
    assert verdicts(result) == {"fp32/warptile 4096x4096x4096": Verdict.REGRESSION}
    assert set(result.unchanged) == {"fp32/naive 4096x4096x4096", "fp32/cublas 4096x4096x4096"}
    assert result.exit_status == EXIT_REGRESSION


class FakeUnpairedRounds:
    """Stands in for asv continuous: every round of a case at 1 ms on both sides, 0.2% apart between processes."""

    made: list = []

    def __init__(self, repo, base, head, pairs, machine, work_dir, thresholds, noise, controls, nvbench_args,
                 asv_config):
        from sgemm.gate.unpaired import AsvOutcome

        self.pairs, self.thresholds, self.controls = {p.label: p for p in pairs}, thresholds, controls
        self.done, self.outcome, self.problems = {}, AsvOutcome(), []
        FakeUnpairedRounds.made.append(sorted(self.pairs))

    def measure(self, wanted):
        import random

        from sgemm.rounds.evidence import Case, Rounds

        labels, rounds = list(wanted), max(wanted.values())

        def side():
            return Rounds(tuple(1e-3 * (1 + 0.002 * random.gauss(0, 1)) for _ in range(rounds)), (1980.0,) * rounds)

        for label in labels:
            self.done[label] = rounds
        return {label: Case(label, self.pairs[label].head.kernel, self.thresholds[label], before=side(),
                            after=side()) for label in labels}


def test_a_launch_the_gate_cannot_reproduce_is_the_only_case_measured_unpaired(probed_repo, tmp_path, monkeypatch):
    from sgemm.gate import run as gate_run

    repo, commit, changed_launches = probed_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("warptile's grid in the launch code", MEASURING_EDIT)
    changed_launches(head={"fp32/warptile 4096x4096x4096": {"grid": [2, 4, 1]}})
    FakeUnpairedRounds.made = []
    monkeypatch.setattr(gate_run, "UnpairedRounds", FakeUnpairedRounds)
    result = measuring_gate(repo, base, head, tmp_path)
    assert FakeUnpairedRounds.made == [["fp32/warptile 4096x4096x4096"]]
    assert result.method == UNPAIRED and not result.unpaired_because
    why = result.unpaired_cases["fp32/warptile 4096x4096x4096"]
    assert "grid[0]: 4 → 2" in why and "the gate's code launches head's build otherwise (launches[0].grid[0]: 2 by " \
        "head's own code, 4 by the gate's)" in why
    assert set(result.unchanged) == {"fp32/naive 4096x4096x4096", "fp32/cublas 4096x4096x4096"}
    assert "Unpaired, fp32/warptile 4096x4096x4096: its launch changed" in markdown(result, "H100")


def test_paired_and_unpaired_cases_are_judged_as_one_gate(probed_repo, tmp_path, monkeypatch):
    from sgemm.gate import run as gate_run

    repo, commit, changed_launches = probed_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("a spin in warptile; naive's block in the launch code", {**MEASURING_EDIT,
                                                                           "kernels/fp32_warptile.cu": SPIN})
    spun = {"fp32/warptile 4096x4096x4096": {"program": {"source_sha256": "warptile with a spin"}}}
    changed_launches(head={**spun, "fp32/naive 4096x4096x4096": {"block": [128, 1, 1]}}, **{"gate-head": spun})
    monkeypatch.setattr(gate_run, "UnpairedRounds", FakeUnpairedRounds)
    result = measuring_gate(repo, base, head, tmp_path)
    assert result.method == MIXED
    assert {c.label: bool(c.case.paired) for c in result.comparisons} == {
        "fp32/warptile 4096x4096x4096": True, "fp32/naive 4096x4096x4096": False}
    assert "**paired** (1 case)" in markdown(result, "H100") and "**unpaired** (1 case)" in markdown(result, "H100")


def test_launches_that_cannot_be_compared_send_every_case_unpaired_saying_why(probed_repo, tmp_path, monkeypatch):
    from sgemm.gate import launches, run as gate_run

    repo, commit, _ = probed_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("a comment in the launch code", MEASURING_EDIT)
    monkeypatch.setattr(launches, "PROBE_COMMAND", (sys.executable, "-c", "import sys; sys.exit(3)"))
    monkeypatch.setattr(gate_run, "UnpairedRounds", FakeUnpairedRounds)
    result = measuring_gate(repo, base, head, tmp_path)
    assert result.method == UNPAIRED and "the launches could not be compared" in result.unpaired_because
    assert not result.unchanged and len(result.comparisons) == 3


# --- L2: flushed before every launch by default, warm when asked -----------------------------------------------------


@pytest.mark.parametrize("l2, flushed, said", [("flushed", True, "L2 flushed before every launch"),
                                               ("warm", False, "L2 warm (--l2 warm)")])
def test_paired_rounds_flush_l2_unless_asked_to_leave_it_warm_and_the_report_says_which(kernel_repo, tmp_path, l2,
                                                                                       flushed, said):
    repo, commit = kernel_repo
    base = git(repo, "rev-parse", "HEAD")
    head = commit("spin", {"kernels/fp32_warptile.cu": SPIN})
    result = paired_gate(repo, base, head, tmp_path, ratios={"fp32/warptile 4096x4096x4096": 1.005}, l2=l2)
    plans = [json.loads(path.read_text()) for path in (tmp_path / "gate" / "paired" / "rounds").glob("*.plan.json")]
    assert plans and {plan["settings"]["flush_l2"] for plan in plans} == {flushed}
    report = markdown(result, "H100")
    assert f"timed in alternating blocks, {said}" in report and f"process, {said}" in report
    # either way the launches run back to back, at the power cap where a kernel reaches it: the footnote says so
    assert "the launches of a block back to back" in report and "power cap" in report


def test_a_noise_file_learned_with_l2_warm_is_set_aside_for_flushed_rounds(tmp_path):
    from dataclasses import asdict

    from sgemm.gate.noise import read, write
    from sgemm.rounds.evidence import Noise
    from sgemm.rounds.session import round_settings

    path = tmp_path / "noise.json"
    write(path, "box", {}, 0, {"fp32/naive 4096x4096x4096": Noise(0.0003, 24)}, 3, asdict(round_settings("warm")))
    noise, why = read(path, "box", asdict(round_settings("flushed")))
    assert "paired" not in noise and "its paired noise was set aside" in why and '"flush_l2": false' in why
    assert read(path, "box", asdict(round_settings("warm")))[0]["paired"]


# --- Every GPU of the box: cases spread by cost, each case's rounds on one card, one family --------------------------


def test_cases_are_spread_over_the_cards_by_cost_each_keeping_its_card_and_judged_as_one_family(fixed_repo, tmp_path,
                                                                                               capsys):
    repo, _, base, head = fixed_repo
    where = tmp_path / "two"
    checked = []
    result = fixed_gate(repo, base, head, where, gpu_check=lambda device, timeout: checked.append(device),
                        sizes=(4096, 8192), devices=[0, 1])
    asked = 2 * sum("cublas" not in name for name in select_kernels(str(repo), base, head).kernels)
    rounds = where / "gate" / "paired" / "rounds"
    devices_of: dict[str, set] = {}
    for path in rounds.glob("*.plan.json"):
        plan = json.loads(path.read_text())
        for case in plan["cases"]:
            devices_of.setdefault(case["label"], set()).add(plan["device"])
    assert all(len(devices) == 1 for devices in devices_of.values())  # a case's rounds on one card
    assert set().union(*devices_of.values()) == {0, 1} and set(checked) == {0, 1}
    # The two 8192 cases (eight times the work) go to different cards.
    big = [label for label in devices_of if "8192" in label]
    assert len(big) == 2 and {next(iter(devices_of[label])) for label in big} == {0, 1}
    assert result.cards == {label: next(iter(devices)) for label, devices in devices_of.items()}
    assert {c.level.family for c in result.judged} == {asked}
    assert judged(result)[WARPTILE][0] is Verdict.REGRESSION
    assert "round 1: 2 cases paired in one process on GPU 0" in capsys.readouterr().err
    assert "spread over 2 GPUs (0, 1) by cost, each case's rounds on one card" in markdown(result, "H100")


def test_each_round_process_sees_only_its_own_card_and_a_sandbox_binds_that_cards_node(fixed_repo, tmp_path,
                                                                                       monkeypatch):
    # Seeing every card of the box, each round's process held a context on the first card too, where that card's own
    # round counted them as co-tenants (four H100s under CUDA_VISIBLE_DEVICES=1,2,3): the judge narrows each process
    # to its card by UUID, and names the card's device node, not CUDA's number for it, to a sandbox.
    repo, _, base, head = fixed_repo
    where = tmp_path / "narrowed"
    monkeypatch.setattr(session, "one_card", lambda device: session.OneCard(f"GPU-{device}", 10 + device))
    started = []
    real_popen = session.subprocess.Popen

    def popen(command, **options):
        started.append((command, options.get("env") or {}))
        return real_popen(command, **options)

    monkeypatch.setattr(session.subprocess, "Popen", popen)
    sandboxed = []
    monkeypatch.setattr(session, "contained", lambda command, **options: sandboxed.append(options) or command)
    fixed_gate(repo, base, head, where, max_rounds=3, devices=[0, 1])
    for path in (where / "gate" / "paired" / "rounds").glob("*.plan.json"):
        plan = json.loads(path.read_text())
        assert plan["cuda_device"] == 0 and plan["device"] in (0, 1)
    rounds = [env for command, env in started if any(str(part).endswith(".plan.json") for part in command)]
    assert rounds and len(rounds) == len(sandboxed)
    seen = {env["CUDA_VISIBLE_DEVICES"] for env in rounds}
    assert seen == {"GPU-0", "GPU-1"}
    assert {tuple(options["devices"]) for options in sandboxed} == {(10,), (11,)}
    assert {options["env"]["CUDA_VISIBLE_DEVICES"] for options in sandboxed} == {"GPU-0", "GPU-1"}
    # The gate's compile cache, writable, named to each round: a sandboxed round starts with an empty home.
    caches = where / "gate" / "paired" / "compile-cache"
    for options in sandboxed:
        assert caches in options["writable"]
        assert {options["env"][name] for name in session.COMPILE_CACHES} == {str(caches / "cupy"),
                                                                            str(caches / "sgemm")}


def test_a_card_is_narrowed_by_its_uuid_and_left_alone_where_nvml_cannot_list_the_cards(monkeypatch):
    from sgemm.measuring import cards, telemetry

    box = [cards.Card(index, "NVIDIA H100 80GB HBM3", f"GPU-{index}") for index in range(3)]
    monkeypatch.setattr(cards, "visible_cards", lambda: box)
    monkeypatch.setattr(telemetry, "device_minor", lambda uuid: 7)
    assert session.one_card(2) == session.OneCard("GPU-2", 7)
    assert session.one_card(3) is None

    def no_nvml():
        raise cards.CardsError("NVML is not available")

    monkeypatch.setattr(cards, "visible_cards", no_nvml)
    assert session.one_card(0) is None


def test_the_gpus_asked_for_are_checked_against_the_cards_the_process_may_use(kernel_repo, monkeypatch, capsys):
    from sgemm import cli
    from sgemm.measuring import cards

    repo, commit = kernel_repo
    commit("spin", {"kernels/fp32_warptile.cu": SPIN})

    monkeypatch.setattr(cards, "visible_cards", lambda: [cards.Card(0, "NVIDIA H100 80GB HBM3", "GPU-a"),
                                                         cards.Card(1, "NVIDIA H200", "GPU-b")])
    for asked, said in (("3", "--gpus 3: this process may use 2 GPUs, not 3"),
                        ("all", "--gpus all: the GPUs are not one model (GPU 0: NVIDIA H100 80GB HBM3, GPU 1: NVIDIA "
                                "H200)")):
        assert cli.main(["gate", "HEAD~1", "HEAD", "--repo", str(repo), "--gpus", asked]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"sgemm gate: {said}") and err.count("\n") == 1


# --- Rounds that end soon: a case's time by how far it is from a decision --------------------------------------------


def open_comparison(ratios, noise=None):
    from sgemm.gate.verdict import Level, judge
    from sgemm.rounds.evidence import Case, PairedRounds, spend

    [comparison] = judge([Case("k", "fp32/k", 0.0025, paired=PairedRounds(tuple(ratios)), noise=noise)],
                         Level(spend(3, 0, 9), 40, 9))
    return comparison


def test_a_case_near_its_decision_gets_a_short_round_and_one_far_from_it_a_long_one():
    from sgemm.gate.run import round_time
    from sgemm.rounds.evidence import Noise

    near = open_comparison((1.0004, 0.9996, 1.0001), Noise(0.0021, 12))
    far = open_comparison((1.0030, 0.9970, 1.0001))
    past = open_comparison((1.0040, 1.0020, 1.0030))  # its estimate already beyond 0.25%, not yet significant
    assert near.open and far.open and past.open
    assert round_time(near, 4.0, 12.0) < 6.0
    assert round_time(far, 4.0, 12.0) == 12.0 and round_time(past, 4.0, 12.0) == 12.0
    assert 4.0 <= round_time(near, 4.0, 12.0)


def test_the_rounds_after_a_look_give_each_open_case_its_own_time(fixed_repo, tmp_path):
    repo, _, base, head = fixed_repo
    result = fixed_gate(repo, base, head, tmp_path / "w")
    rounds = tmp_path / "w" / "gate" / "paired" / "rounds"
    plans = {int(path.name.split("-")[1].split(".")[0]): json.loads(path.read_text())
             for path in rounds.glob("*.plan.json")}
    assert all(not plans[n].get("max_s") for n in (1, 2, 3))  # before the first look, every case the settings' time
    later = [plans[n] for n in sorted(plans) if n > 3]
    assert later and all(set(plan["max_s"]) == {case["label"] for case in plan["cases"]} for plan in later)
    assert all(4.0 <= seconds <= 12.0 for plan in later for seconds in plan["max_s"].values())
    assert judged(result)[WMMA][4] > 3
