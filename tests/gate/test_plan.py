"""The `sgemm gate` command's work, without a GPU: what a change selects and how it will be measured (the dry run),
the refusals that come before any work, and the report's way out."""

import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.gate.plan import input_problem, publish_report
from sgemm.gate.run import EXIT_UNDECIDED

ROOT = Path(__file__).resolve().parents[2]


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """This project's last two commits, cloned: a clean tree, as the gate requires, whatever this checkout holds
    uncommitted while its tests run."""
    clone = tmp_path_factory.mktemp("checkout") / "sgemm"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{ROOT}", str(clone)], check=True,
                   capture_output=True)
    return clone


def test_cli_gate_lists_the_cases_a_change_selects_and_how_they_are_measured(checkout, monkeypatch):
    from sgemm.cli import main

    monkeypatch.chdir(checkout)
    head = git(checkout, "rev-parse", "HEAD")
    done = subprocess.run([sys.executable, "-m", "sgemm", "gate", f"{head}~1", head, "--repo", str(checkout),
                           "--dry-run", "--size", "1024", "-k", "fp32/naive"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "fp32/naive 1024x1024x1024" in done.stdout.splitlines()
    assert "sgemm gate: measured " in done.stderr
    assert main(["gate", "no-such-commit", head, "--repo", str(checkout), "--dry-run"]) == EXIT_UNDECIDED
    assert main(["gate", head, head, "--repo", str(checkout), "--dry-run"]) == EXIT_UNDECIDED  # nothing to compare
    assert main(["gate", f"{head}~1", head, "--rounds", "2", "--dry-run"]) == EXIT_UNDECIDED
    assert main(["gate", f"{head}~1", head, "--rounds", "5", "--max-rounds", "4", "--dry-run"]) == EXIT_UNDECIDED


def test_cli_gate_refuses_kernels_asked_for_at_a_size_they_are_not_timed_at(checkout, capsys):
    from sgemm.cli import main

    head = git(checkout, "rev-parse", "HEAD")
    assert main(["gate", f"{head}~1", head, "--repo", str(checkout), "--dry-run", "-k", "bf16/wgmma_tma",
                 "--size", "1024"]) == EXIT_UNDECIDED
    assert "no case of the suite measures that" in capsys.readouterr().err


def test_inputs_the_parser_cannot_see_are_checked_before_git_asv_or_the_gpu(checkout, tmp_path):
    assert "no sgemm/catalogue.toml" in input_problem(str(tmp_path), [], None, [], 3, 10, None)
    assert input_problem(str(checkout), [], None, [("nothing/*", 0.01)], 3, 10, None) == (
        "--threshold-for 'nothing/*' matches no kernel in the working tree's catalogue")
    assert input_problem(str(checkout), [], None, [], 5, 4, None) == "--max-rounds 4 is below --rounds 5"
    assert input_problem(str(checkout), [], None, [], 3, 10, str(tmp_path / "noise.json")).endswith(": no such file")
    assert input_problem(str(checkout), ["fp32"], None, [("fp32/*", 0.01)], 3, 10, None) is None


def test_cli_dry_run_names_a_kernel_gone_undeclared_and_exits_2(project_repo, capsys):
    from sgemm.cli import main

    repo = project_repo
    base = git(repo, "rev-parse", "HEAD")
    catalogue = (repo / "sgemm" / "catalogue.toml").read_text()
    start = catalogue.index('[[kernel]]\nname = "fp32/naive_8"')
    end = catalogue.index("[[kernel]]", start + 1)
    (repo / "sgemm" / "catalogue.toml").write_text(catalogue[:start] + catalogue[end:])
    git(repo, "commit", "-qam", "fp32/naive_8 gone, undeclared")
    head = git(repo, "rev-parse", "HEAD")
    assert main(["gate", base, head, "--repo", str(repo), "--dry-run"]) == EXIT_UNDECIDED
    assert "not measured, not declared: fp32/naive_8: in base's catalogue and gone from head's" in \
        capsys.readouterr().err


def test_an_unexpected_failure_exits_2_never_1(checkout, monkeypatch, capsys):
    from sgemm import cli
    from sgemm.gate import plan

    monkeypatch.chdir(checkout)
    def explode(request, **options):
        raise KeyError("something nobody expected")

    monkeypatch.setattr(plan, "gate", explode)
    assert cli.main(["gate", "HEAD~1", "HEAD", "--dry-run"]) == EXIT_UNDECIDED
    assert "sgemm gate: failed: KeyError" in capsys.readouterr().err


def test_the_report_is_written_and_appended_to_the_job_summary(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    publish_report("## GEMM gate: PASS", tmp_path / "gate.md")
    assert (tmp_path / "gate.md").read_text() == "## GEMM gate: PASS"
    assert summary.read_text() == "earlier step\n## GEMM gate: PASS\n"
