"""The dry run's CPU check (sgemm gate BASE HEAD --dry-run --cpu-check --plan FILE) on a copy of this repository:
NVRTC compiles both sides of every selected case for every tracked architecture, with no GPU, and the JSON says
whether anything is left for a GPU to time. The workflow's CPU job rests on this contract."""

import json
import subprocess
import sys

import pytest

from sgemm.gate import cpu_check

# A comment at the top of the file four Hopper kernels are built from (FP16 and BF16, two steps each): the source
# NVRTC reads changes, the program does not.
COMMENT_IN_SHARED_FILE = ("// Hopper's tensor cores", "// A comment.\n// Hopper's tensor cores")
SPIN = ("           int ldb, float beta, float* __restrict__ C, int ldc) {\n",
        "           int ldb, float beta, float* __restrict__ C, int ldc) {\n"
        "    { const long long until = clock64() + 64; while (clock64() < until) {} }\n")


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(project_repo):
    def commit(message, edits):
        for path, (old, new) in edits.items():
            text = (project_repo / path).read_text()
            assert text.count(old) == 1, (path, old)
            (project_repo / path).write_text(text.replace(old, new))
        git(project_repo, "commit", "-qam", message)

    return project_repo, commit


def cpu_check_run(repo, tmp_path, *more):
    plan = tmp_path / "plan.json"
    done = subprocess.run([sys.executable, "-m", "sgemm", "gate", "HEAD~1", "HEAD", "--repo", str(repo), "--dry-run",
                           "--cpu-check", "--plan", str(plan), *more], capture_output=True, text=True)
    return done, json.loads(plan.read_text()) if plan.exists() else None


def test_a_comment_in_a_file_several_kernels_share_leaves_nothing_to_time(repo, tmp_path):
    root, commit = repo
    commit("a comment in wgmma_tma.cu", {"kernels/wgmma_tma.cu": COMMENT_IN_SHARED_FILE})
    done, plan = cpu_check_run(root, tmp_path)
    assert done.returncode == 0, done.stderr
    assert plan["gpu_needed"] is False and plan["to_time"] == []
    assert plan["why"] == "every case is identical machine code"
    assert plan["architectures"] == ["sm_80", "sm_86", "sm_89", "sm_90"]
    assert all(case["identical"] for case in plan["cases"])
    assert len([case for case in plan["cases"] if "wgmma" in case["label"]]) == 8  # 4 kernels, two sizes each
    wgmma = next(case for case in plan["cases"] if case["label"] == "fp16/wgmma_tma 4096x4096x4096")
    assert wgmma["why"] == "identical machine code for sm_90a"  # its own target
    assert "fp16/wgmma_tma 4096x4096x4096: identical machine code for sm_90a" in done.stdout
    assert f"sgemm gate: gpu needed: no: every case is identical machine code ({len(plan['cases'])} of " \
        f"{len(plan['cases'])} cases identical machine code)" in done.stderr


def test_a_kernel_whose_machine_code_changed_is_left_to_time(repo, tmp_path):
    root, commit = repo
    commit("a spin in the naive kernels", {"kernels/fp32_naive.cu": SPIN})
    done, plan = cpu_check_run(root, tmp_path, "--size", "4096", "--no-sweep")
    assert done.returncode == 0, done.stderr
    naive = ["fp32/naive 4096x4096x4096", "fp32/naive_16 4096x4096x4096", "fp32/naive_8 4096x4096x4096",
             "fp32/naive_cols2 4096x4096x4096", "fp32/naive_cols4 4096x4096x4096"]
    assert plan["gpu_needed"] is True and sorted(plan["to_time"]) == naive
    cases = {case["label"]: case for case in plan["cases"]}
    assert cases["fp32/naive 4096x4096x4096"]["why"] == "its machine code differs for sm_80"
    assert cases["fp32/cublas 4096x4096x4096"]["identical"]  # the control: one library


@pytest.mark.parametrize("path, old, reason", [
    ("sgemm/gate/cpu_check.py", '"""Whether a change', "the identity check's own code changed"),
    ("sgemm/measuring/launch.py", "TENSOR_MAP_BYTES = 128", "each side's launches are compared on the GPU"),
])
def test_a_change_to_the_check_itself_or_to_the_measuring_code_goes_to_the_gpu(repo, tmp_path, path, old, reason):
    root, commit = repo
    commit("code", {path: (old, old.replace('"""', '"""(edited) ') if old.startswith('"""') else old + "  # edited"),
                    "kernels/wgmma_tma.cu": COMMENT_IN_SHARED_FILE})
    done, plan = cpu_check_run(root, tmp_path, "-k", "fp16/wgmma_tma", "--size", "4096")
    assert done.returncode == 0, done.stderr
    assert plan["gpu_needed"] is True and reason in plan["why"] and plan["to_time"]


def test_a_change_that_selects_nothing_needs_no_gpu(repo, tmp_path):
    root, commit = repo
    (root / "README.md").write_text("documentation\n")
    git(root, "add", "README.md")
    git(root, "commit", "-qm", "docs")
    done, plan = cpu_check_run(root, tmp_path)
    assert done.returncode == 0 and plan == {**plan, "gpu_needed": False, "why": "the change selects no case",
                                             "cases": []}


def test_without_nvrtc_the_check_says_so_in_one_line_before_any_work(repo, tmp_path, monkeypatch, capsys):
    from sgemm import cli

    root, commit = repo
    commit("a comment in wgmma_tma.cu", {"kernels/wgmma_tma.cu": COMMENT_IN_SHARED_FILE})
    import cuda.bindings

    # As where the package is not installed, whether or not an earlier test of this process imported it.
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", None)
    monkeypatch.delattr(cuda.bindings, "nvrtc", raising=False)
    plan = tmp_path / "plan.json"
    assert cli.main(["gate", "HEAD~1", "HEAD", "--repo", str(root), "--dry-run", "--cpu-check", "--plan",
                     str(plan)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sgemm gate: --cpu-check: NVRTC is not installed here") and err.count("\n") == 1
    assert not plan.exists()


def test_the_answer_names_what_a_workflow_reads():
    found = cpu_check.CpuCheck("a" * 40, "b" * 40, True, "1 case to time", ["sm_90"],
                               [cpu_check.CaseCheck("k 4096", False, "its machine code differs for sm_90")])
    assert set(found.as_json()) == {"base", "head", "gpu_needed", "why", "architectures", "to_time", "cases",
                                    "undeclared"}
    assert found.as_json()["to_time"] == ["k 4096"]
