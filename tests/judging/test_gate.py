"""The gate end to end on CPU: real `asv continuous` runs of a synthetic suite whose figures each commit sets, read
back round by round and judged; plus the events benchmarks leave, the report and the exit status."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.asvsuite import SuiteCase
from sgemm.judging.changes import Selection
from sgemm.judging.gate import (EXIT_PASS, EXIT_REGRESSION, EXIT_UNDECIDED, GateResult, Outcome, Pair, Settings,
                                markdown, pairs_for, publish_report, read_events, run_gate)
from sgemm.judging.verdict import Case, Rounds, Verdict, judge
from sgemm.machine import write_machine_file

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
        return {"samples": [0.0], "number": 1}

    def track_power(self, kernel, size, precision):
        return 300.0

    def track_time(self, kernel, size, precision):
        raise AssertionError("the gate runs only the tracks a verdict needs")
"""

CASES = [SuiteCase("Gemm", (kernel, 64, "fp32")) for kernel in ("naive", "float4", "cublas")]
SELECTION = Selection(("fp32/naive", "fp32/float4", "fp32/cublas"),
                      {"fp32/naive": "changed", "fp32/float4": "changed", "fp32/cublas": "control"})


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

    def commit(message: str, slowdown: dict, clock_mhz: dict, readme: str = "figures\n", failing=None) -> str:
        (repo / "figures.py").write_text(f"SLOWDOWN = {slowdown!r}\nCLOCK_MHZ = {clock_mhz!r}\n"
                                         f"FAILING = {failing or {}!r}\n")
        (repo / "README.md").write_text(readme)
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(repo), "commit", "-qm", message], check=True)
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()

    return repo, commit


def gate(repo, base, head, tmp_path, **settings):
    return run_gate(repo, base, head, SELECTION, CASES, "gpu-box", tmp_path / "gate",
                    Settings(**{"rounds": 3, "max_rounds": 3, **settings}), gpu_check=lambda device, timeout: None)


def verdicts(result: GateResult) -> dict[str, Verdict]:
    return {c.label: c.verdict for c in result.judged}


def test_a_slower_kernel_is_the_only_regression(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("head", {"naive": 1.05}, {})
    result = gate(repo, base, head, tmp_path)
    assert verdicts(result) == {"fp32/naive 64x64x64": Verdict.REGRESSION, "fp32/float4 64x64x64": Verdict.SAME}
    assert result.exit_status == EXIT_REGRESSION
    naive = next(c for c in result.judged if c.label.startswith("fp32/naive"))
    assert naive.ratio == pytest.approx(1.05, rel=0.01)
    assert naive.reference == "fp32/cublas at 1 size"
    assert len(naive.case.before.medians_s) == 3 and len(naive.case.after.medians_s) == 3  # one per round
    assert naive.case.after.cards == ("abcdef",) * 3
    # The gate's results stay in its own directory, never in the project's results/.
    assert not (repo / "results").exists()
    assert (tmp_path / "gate" / "results" / "gpu-box").is_dir()


def test_a_clock_drop_alone_is_never_a_regression(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("hot", {"float4": 1.1}, {"float4": 1800.0})  # 10% slower because the clock fell 10%
    result = gate(repo, base, head, tmp_path)
    assert verdicts(result)["fp32/float4 64x64x64"] is Verdict.AMBIGUOUS
    assert result.exit_status == EXIT_UNDECIDED


def test_open_cases_get_more_rounds_up_to_the_cap(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("hot", {"float4": 1.1}, {"float4": 1800.0})  # stays AMBIGUOUS: open until the cap
    result = gate(repo, base, head, tmp_path, max_rounds=6)
    assert result.rounds_run == 6
    float4 = next(c for c in result.judged if c.label.startswith("fp32/float4"))
    naive = next(c for c in result.judged if c.label.startswith("fp32/naive"))
    assert len(float4.case.before.medians_s) == 6  # three more rounds, appended to the first three
    assert len(naive.case.before.medians_s) == 3  # settled: not measured again
    cublas = next(c for c in result.comparisons if c.label.startswith("fp32/cublas"))
    assert len(cublas.case.before.medians_s) == 6  # the control of an open case's precision: in the same rounds


def test_a_documentation_change_passes(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("docs", {}, {}, readme="figures, documented\n")
    result = gate(repo, base, head, tmp_path)
    assert set(verdicts(result).values()) == {Verdict.SAME}
    assert result.exit_status == EXIT_PASS


def test_a_failing_benchmark_says_why_in_the_report(synthetic_repo, tmp_path):
    repo, commit = synthetic_repo
    base = commit("base", {}, {})
    head = commit("broken", {}, {}, failing={"naive": "wrong result: relative error 0.0443 > 1e-05"})
    result = gate(repo, base, head, tmp_path)
    assert [pair.label for pair in result.outcome.failed] == ["fp32/naive 64x64x64"]
    assert result.exit_status == EXIT_UNDECIDED
    row = next(line for line in markdown(result, "test GPU").splitlines() if "**ERROR**" in line)
    assert "head: wrong result: relative error 0.0443 > 1e-05" in row


def test_a_shared_gpu_stops_the_gate_before_asv_runs(synthetic_repo, tmp_path):
    from sgemm.judging.gate import GateError

    repo, commit = synthetic_repo
    base, head = commit("base", {}, {}), commit("head", {"naive": 1.05}, {})

    def busy(device, timeout):
        raise GateError("GPU 0 (NVIDIA H100 80GB HBM3) is in use by pid 4242 (python3, 1,532 MiB); waited 30 s")

    result = run_gate(repo, base, head, SELECTION, CASES, "gpu-box", tmp_path / "gate", Settings(), gpu_check=busy)
    assert result.exit_status == EXIT_UNDECIDED
    assert not (tmp_path / "gate" / "results").exists()  # nothing was measured
    assert "pid 4242 (python3, 1,532 MiB)" in markdown(result, "gpu")


def test_events_name_the_commit_and_survive_a_torn_line(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text(json.dumps({"commit": "c" * 40, "case": "fp32/naive/64x64x64", "kind": "gpu shared",
                                "reason": "the GPU is shared with pid 7"}) + "\n" + '{"commit": "c')
    events = read_events(path)
    assert events == [{"commit": "c" * 40, "case": "fp32/naive/64x64x64", "kind": "gpu shared",
                       "reason": "the GPU is shared with pid 7"}]


def test_a_renamed_kernel_is_compared_with_its_old_name_at_base():
    pairs = pairs_for([SuiteCase.square("fp32/tiled", 1024), SuiteCase.sweep("fp32/tiled", (64, 32, 16)),
                       SuiteCase.square("fp32/naive", 1024)], {"fp32/tiled": "fp32/smem"})
    assert [(p.base.label, p.head.label) for p in pairs] == [
        ("fp32/smem 1024x1024x1024", "fp32/tiled 1024x1024x1024"),
        ("fp32/smem 64x32x16 (shape sweep)", "fp32/tiled 64x32x16 (shape sweep)"),
        ("fp32/naive 1024x1024x1024", "fp32/naive 1024x1024x1024")]
    assert pairs[0].label == "fp32/tiled 1024x1024x1024 (was fp32/smem)"


def rounds(time_s, clock=1980.0):
    return Rounds(tuple(time_s * (1 + 0.001 * d) for d in (-1, 0, 1)), (clock,) * 3, (500,) * 3, 0.0, 300.0,
                  ("abcdef",) * 3)


def result_of(cases, selection=SELECTION, problems=()):
    comparisons = judge(cases)
    outcome = Outcome(sides={Pair(SuiteCase.square(c.kernel, 4096), SuiteCase.square(c.kernel, 4096)):
                             (c.before, c.after) for c in cases})
    return GateResult("a" * 40, "b" * 40, "nvidia-h100", selection, Settings(patterns=(("fp16/*", 0.04),)),
                      comparisons, outcome, 3, list(problems))


def test_report_names_the_gpu_the_verdicts_and_writes_the_job_summary(tmp_path, monkeypatch):
    result = result_of([Case("fp32/naive 4096x4096x4096", "fp32/naive", rounds(1e-3), rounds(1.05e-3), 0.02,
                             references=("fp32/cublas 4096x4096x4096",)),
                        Case("fp32/cublas 4096x4096x4096", "fp32/cublas", rounds(1e-3), rounds(1e-3), 0.02,
                             is_control=True)])
    text = markdown(result, "NVIDIA H100 80GB HBM3, driver 580")
    assert text.startswith("## GEMM gate: FAIL")
    assert "NVIDIA H100 80GB HBM3, driver 580" in text
    assert "cards: base `abcdef`, head `abcdef`" in text
    assert "`fp32/naive` (changed)" in text and "controls: `fp32/cublas`" in text
    assert "`fp16/*` 4.0%" in text
    assert "Controls (cuBLAS; kernels are judged relative to them): fp32/cublas 4096x4096x4096 1.000x" in text
    rows = [line for line in text.splitlines() if line.startswith("| fp32/")]
    assert len(rows) == 1 and "**REGRESSION**" in rows[0] and "1.050" in rows[0]
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    publish_report(text, tmp_path / "gate.md")
    assert (tmp_path / "gate.md").read_text() == text
    assert summary.read_text() == "earlier step\n" + text + "\n"


def test_a_moving_control_no_longer_leaves_a_precision_undecided():
    # Everything of fp32 5% slower, its control too: judged relative to the control, the kernel did not move.
    result = result_of([Case("fp32/naive 4096x4096x4096", "fp32/naive", rounds(1e-3), rounds(1.05e-3), 0.02,
                             references=("fp32/cublas 4096x4096x4096",)),
                        Case("fp32/cublas 4096x4096x4096", "fp32/cublas", rounds(1e-3), rounds(1.05e-3), 0.02,
                             is_control=True)])
    assert result.exit_status == EXIT_PASS
    assert "fp32/cublas 4096x4096x4096 1.050x" in markdown(result, "gpu")


def test_exit_status_rules():
    same = Case("fp32/naive 4096x4096x4096", "fp32/naive", rounds(1e-3), rounds(1e-3), 0.02)
    assert result_of([same]).exit_status == EXIT_PASS
    assert result_of([same], problems=["asv continuous exited 3"]).exit_status == EXIT_UNDECIDED
    undeclared = Selection(("fp32/naive",), {"fp32/naive": "changed"}, undeclared=("`fp32/old` removed",))
    assert result_of([same], selection=undeclared).exit_status == EXIT_UNDECIDED
    shared = result_of([same])
    shared.outcome.shared_gpu.append("the GPU is shared with pid 7")
    assert shared.exit_status == EXIT_UNDECIDED


def test_nothing_to_measure_passes():
    result = GateResult("a" * 40, "b" * 40, "m", Selection(()), Settings(), [], Outcome(), 0, [])
    assert result.exit_status == EXIT_PASS
    assert "nothing: the change touches no kernel" in markdown(result, "gpu")


def test_cli_gate_lists_the_cases_a_change_selects(tmp_path):
    from sgemm.cli import main

    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    done = subprocess.run([sys.executable, "-m", "sgemm", "gate", f"{head}~1", head, "--repo", str(root),
                           "--dry-run", "--size", "1024", "-k", "fp32/naive"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "fp32/naive 1024x1024x1024" in done.stdout.splitlines()
    assert main(["gate", "no-such-commit", head, "--repo", str(root), "--dry-run"]) == EXIT_UNDECIDED
    assert main(["gate", head, head, "--repo", str(root), "--dry-run"]) == EXIT_UNDECIDED  # nothing to compare
    assert main(["gate", f"{head}~1", head, "--rounds", "2", "--dry-run"]) == EXIT_UNDECIDED


def test_an_unexpected_failure_exits_2_never_1(monkeypatch, capsys):
    from sgemm import cli
    from sgemm.judging import gate as gate_module

    def explode(request, dry_run=False):
        raise KeyError("something nobody expected")

    monkeypatch.setattr(gate_module, "gate", explode)
    assert cli.main(["gate", "HEAD~1", "HEAD", "--dry-run"]) == EXIT_UNDECIDED
    assert "sgemm gate: failed: KeyError" in capsys.readouterr().err
