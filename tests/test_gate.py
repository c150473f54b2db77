"""The gate end to end on CPU: real `asv continuous` runs of a synthetic suite whose figures each commit sets, read
back and judged; plus the case keys, the asv configuration it writes and its report."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.changes import Selection
from sgemm.gate import (EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED, CaseKey, GateResult, Outcome, cases_for,
                        markdown, publish_report, run_gate)
from sgemm.machine import write_machine_file
from sgemm.verdict import Side, Verdict, compare

# The suite reads its figures from the package installed from the commit under test, as the real one does.
SUITE = """
import random


class Gemm:
    params = [["naive", "float4", "cublas"], [64], ["fp32"]]
    param_names = ["kernel", "size", "precision"]

    def setup(self, kernel, size, precision):
        import figures
        self.time = 1e-3 * figures.SLOWDOWN.get(kernel, 1.0)
        self.clock = figures.CLOCK_MHZ.get(kernel, 1980.0)

    def track_time(self, kernel, size, precision):
        noise = random.Random()
        return {"samples": [self.time * (1 + 0.002 * noise.gauss(0, 1)) for _ in range(40)], "number": 1}

    track_time.unit = "seconds"

    def track_sm_clock(self, kernel, size, precision):
        return {"samples": [self.clock] * 40, "number": 1}

    def track_throttled(self, kernel, size, precision):
        return {"samples": [0.0], "number": 1}

    def track_power(self, kernel, size, precision):
        return 300.0

    def track_tflops(self, kernel, size, precision):
        raise AssertionError("the gate runs only the tracks a verdict needs")
"""

CASES = [CaseKey("Gemm", (kernel, 64, "fp32")) for kernel in ("naive", "float4", "cublas")]


@pytest.fixture
def synthetic_repo(tmp_path, monkeypatch):
    """A git repository whose commits differ only in the figures the suite will read."""
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
        "results_dir": "results", "html_dir": "html"}))
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    for name, value in (("GIT_AUTHOR_NAME", "t"), ("GIT_AUTHOR_EMAIL", "t@t"), ("GIT_COMMITTER_NAME", "t"),
                        ("GIT_COMMITTER_EMAIL", "t@t")):
        monkeypatch.setenv(name, value)
    write_machine_file({"machine": "gpu-box", "gpu": "NVIDIA H100 80GB HBM3", "arch": "x86_64", "cpu": "x",
                        "num_cpu": "1", "os": "Linux", "ram": "1"}, home / ".asv-machine.json")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)

    def commit(message: str, slowdown: dict, clock_mhz: dict, readme: str = "figures\n") -> str:
        (repo / "figures.py").write_text(f"SLOWDOWN = {slowdown!r}\nCLOCK_MHZ = {clock_mhz!r}\n")
        (repo / "README.md").write_text(readme)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()

    return repo, commit


def gate(repo, base, head, tmp_path):
    selection = Selection(tuple(f"fp32/{case.params[0]}" for case in CASES))
    return run_gate(repo, base, head, selection, CASES, "gpu-box", tmp_path / "gate", rounds=2, threshold=0.02,
                    patterns=[])


def verdicts(result: GateResult) -> dict[str, Verdict]:
    return {c.case: c.verdict for c in result.comparisons}


def test_a_slower_kernel_is_the_only_regression_and_a_clock_drop_is_never_one(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    # naive 5% slower at the same clock; cuBLAS 10% slower because its clock fell 10%: the change did not do that.
    head = commit("head", {"naive": 1.05, "cublas": 1.1}, {"cublas": 1800.0})
    result = gate(repo, base, head, tmp_path)
    assert verdicts(result) == {"fp32/naive 64x64x64": Verdict.REGRESSION, "fp32/float4 64x64x64": Verdict.SAME,
                                "fp32/cublas 64x64x64": Verdict.AMBIGUOUS}
    assert result.remeasured == ["fp32/cublas 64x64x64"]
    assert result.exit_status == EXIT_REGRESSION
    naive = next(c for c in result.comparisons if c.case.startswith("fp32/naive"))
    assert naive.ratio == pytest.approx(1.05, rel=0.01)
    assert len(naive.before.samples_s) == 80  # 40 samples x 2 interleaved rounds
    # The gate's results stay in its own directory, never in the project's results/.
    assert not (repo / "results").exists()
    assert (tmp_path / "gate" / "results" / "gpu-box").is_dir()


def test_a_documentation_change_passes(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("docs", {}, {}, readme="figures, documented\n")
    result = gate(repo, base, head, tmp_path)
    assert set(verdicts(result).values()) == {Verdict.SAME}
    assert result.exit_status == EXIT_PASS


def test_a_failing_benchmark_leaves_the_gate_undecided(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("broken", {"naive": "not a number"}, {})  # setup raises TypeError at head
    result = gate(repo, base, head, tmp_path)
    assert [case.label for case in result.outcome.failed] == ["fp32/naive 64x64x64"]
    assert result.exit_status == EXIT_UNDECIDED
    assert "**ERROR**" in markdown(result, "test GPU", 0.02, [])


def test_case_patterns_select_exactly_one_parameter_combination():
    case = CaseKey("Gemm", ("float4", 4096, "fp32"))
    pattern = re.compile(case.pattern())
    assert pattern.search("bench_gemm.Gemm.track_time('float4', 4096, 'fp32')")
    assert pattern.search("bench_gemm.Gemm.track_sm_clock('float4', 4096, 'fp32')")
    assert not pattern.search("bench_gemm.Gemm.track_tflops('float4', 4096, 'fp32')")
    assert not pattern.search("bench_gemm.Gemm.track_time('float4', 40960, 'fp32')")
    assert not pattern.search("bench_gemm.Gemm.track_time('float4_2', 4096, 'fp32')")
    shapes = CaseKey("GemmShapes", ("fp32/naive_32", "4096x128x4096"))
    assert re.search(shapes.pattern(), "bench_gemm.GemmShapes.track_time('fp32/naive_32', '4096x128x4096')")
    assert shapes.label == "fp32/naive_32 4096x128x4096 (shape sweep)"


def test_cases_cover_the_suite_classes_that_run_a_kernel():
    cases = cases_for(("fp32/naive", "fp16/cublas"), [1024, 2048], ["fp32/naive"], [(64, 32, 16)])
    assert [c.label for c in cases] == ["fp32/naive 1024x1024x1024", "fp32/naive 2048x2048x2048",
                                        "fp32/naive 64x32x16 (shape sweep)", "fp16/cublas 1024x1024x1024",
                                        "fp16/cublas 2048x2048x2048"]
    controls = cases_for(("fp32/naive", "fp32/cublas"), [1024], ["fp32/naive", "fp32/cublas"], [(64, 32, 16)],
                         controls=("fp32/cublas",))
    assert [c.label for c in controls] == ["fp32/naive 1024x1024x1024", "fp32/naive 64x32x16 (shape sweep)",
                                           "fp32/cublas 1024x1024x1024"]


def side(time_s, clock=1980.0, throttled=0.0):
    samples = [time_s * (1 + 0.001 * ((i % 7) - 3)) for i in range(60)]
    return Side(samples, None, clock, throttled, 300.0)


def test_report_names_the_gpu_the_verdicts_and_writes_the_job_summary(tmp_path, monkeypatch):
    comparisons = [compare("fp32/naive 4096x4096x4096", side(1e-3), side(1.05e-3), 0.02),
                   compare("fp32/cublas 4096x4096x4096", side(1e-3), side(1e-3), 0.02)]
    outcome = Outcome(sides={CaseKey("Gemm", ("naive", 4096, "fp32")): (side(1e-3), side(1.05e-3))})
    result = GateResult("a" * 40, "b" * 40, "nvidia-h100", Selection(("fp32/naive", "fp32/cublas"),
                        {"fp32/naive": "kernels/fp32_naive.cu changed", "fp32/cublas": "control"}),
                        2, comparisons, outcome, [], [])
    text = markdown(result, "NVIDIA H100 80GB HBM3, driver 580", 0.02, [("fp16/*", 0.04)])
    assert text.startswith("## GEMM gate: FAIL")
    assert "NVIDIA H100 80GB HBM3, driver 580" in text
    assert "`fp32/naive` (kernels/fp32_naive.cu changed); controls: `fp32/cublas`" in text
    assert "`fp16/*` 4%" in text
    rows = [line for line in text.splitlines() if line.startswith("| fp32/")]
    assert rows[0].startswith("| fp32/naive") and "**REGRESSION**" in rows[0] and "1.050" in rows[0]
    assert rows[1].startswith("| fp32/cublas") and rows[1].split("|")[7].strip() == "SAME"
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    publish_report(text, tmp_path / "gate.md")
    assert (tmp_path / "gate.md").read_text() == text
    assert summary.read_text() == "earlier step\n" + text + "\n"


def test_a_slower_control_means_the_box_moved_not_the_change():
    slower, same = (side(1e-3), side(1.05e-3)), (side(1e-3), side(1e-3))
    selection = Selection(("fp32/naive", "fp32/cublas", "fp16/mma", "fp16/cublas"),
                          {"fp32/naive": "kernels/fp32_naive.cu changed", "fp32/cublas": "control",
                           "fp16/mma": "kernels/fp16_mma.cu changed", "fp16/cublas": "control"})

    def result(**cases):
        comparisons = [compare(f"{name} 4096x4096x4096", *pair, 0.02) for name, pair in cases.items()]
        return GateResult("a" * 40, "b" * 40, "m", selection, 2, comparisons, Outcome(), [], [])

    moved = result(**{"fp32/naive": slower, "fp32/cublas": slower, "fp16/mma": same, "fp16/cublas": same})
    assert [c.case for c in moved.moved_controls] == ["fp32/cublas 4096x4096x4096"]
    assert moved.exit_status == EXIT_UNDECIDED
    assert "**The box moved:** the control fp32/cublas 4096x4096x4096 reads 1.050x" in \
        markdown(moved, "gpu", 0.02, [])
    # A regression in the other precision, whose control held still, is the change's.
    other = result(**{"fp32/naive": same, "fp32/cublas": slower, "fp16/mma": slower, "fp16/cublas": same})
    assert other.exit_status == EXIT_REGRESSION
    assert result(**{"fp32/naive": slower, "fp32/cublas": same}).exit_status == EXIT_REGRESSION
    assert result(**{"fp32/naive": same, "fp32/cublas": same}).exit_status == EXIT_PASS


def test_nothing_compared_is_undecided():
    result = GateResult("a" * 40, "b" * 40, "m", Selection(()), 2, [], Outcome(), [], [])
    assert result.exit_status == EXIT_UNDECIDED
    assert "UNDECIDED" in markdown(result, "gpu", 0.02, [])


def test_cli_gate_lists_the_cases_a_change_selects(tmp_path):
    from sgemm.cli import main

    root = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    done = subprocess.run([sys.executable, "-m", "sgemm", "gate", head, head, "--repo", str(root), "--dry-run",
                           "--size", "1024"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # No change: only the cuBLAS controls, at the one size asked for (controls skip the shape sweep).
    assert done.stdout.splitlines() == ["fp32/cublas 1024x1024x1024", "fp16/cublas 1024x1024x1024"]
    assert main(["gate", "no-such-commit", head, "--repo", str(root), "--dry-run"]) == EXIT_UNDECIDED
    with pytest.raises(SystemExit) as bad:
        main(["gate", head, head, "--threshold-for", "fp16/*", "--dry-run"])
    assert bad.value.code == 2

