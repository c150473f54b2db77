"""tools/acceptance/gate_selftest.py's clone, made without a GPU (the gates it then runs need one): the working tree
as it is, committed or not, then one commit per edit on top of it, each changing its one file: the two spins of
tools/acceptance/inject.py, the reordered tile, and a documentation-only change."""

import subprocess
import tempfile

from tools.acceptance import gate_selftest


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_clone_holds_the_working_tree_and_one_commit_per_edit(project_repo, tmp_path, monkeypatch):
    (project_repo / "README.md").write_text("# sgemm\n")
    git(project_repo, "add", "README.md")
    git(project_repo, "commit", "-qm", "a README")
    (project_repo / "NOTES.md").write_text("not committed yet\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the clone's scratch folder, removed with tmp_path
    clone, commits = gate_selftest.make_clone(project_repo)
    assert set(commits) == {"HEAD", "SLOW_G", "SLOW_S", "TILE", "DOCS"}
    assert git(clone, "show", f"{commits['HEAD']}:NOTES.md") == "not committed yet"
    changed = {name: git(clone, "diff", "--name-only", commits["HEAD"], commit) for name, commit in commits.items()}
    assert changed == {"HEAD": "", "SLOW_G": "kernels/wgmma_specialized.cu", "SLOW_S": "kernels/fp32_naive.cu",
                       "TILE": "kernels/fp32_vectorized.cu", "DOCS": "README.md"}
    for name in ("SLOW_G", "SLOW_S"):
        assert "clock64() < until" in git(clone, "diff", commits["HEAD"], commits[name]), name
    assert git(clone, "rev-parse", "HEAD") == commits["DOCS"]
