"""The bisect demo's branch, made without a GPU (--dry-run): its commits, one of which alone changes the Hopper
kernel's source, and the bisect command it would run. The GPU run is `python -m tools.acceptance.bisect_demo OUT`
on an H100."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_the_branch_has_one_slowing_commit_and_the_command_names_its_ends(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tools.acceptance.bisect_demo", str(tmp_path), "--dry-run",
                           "--commits", "16", "--slow-at", "11"], cwd=ROOT, check=False, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    branch = [line.split() for line in lines if line.startswith("  ") and line.strip()[:2].strip().isdigit()]
    assert len(branch) == 16
    marked = [words for words in branch if "slowing" in " ".join(words)]
    assert len(marked) == 1 and marked[0][0] == "11" and "wgmma_grouped_tma_store" in " ".join(marked[0])
    clone = Path(lines[0].split(" in ")[1].split(",")[0])
    assert clone.is_relative_to(tmp_path)  # in OUT, where the demo was told to leave things
    changed = subprocess.run(["git", "-C", str(clone), "log", "--format=%h", "--", "kernels"],
                             check=True, capture_output=True, text=True).stdout.split()
    # the one commit on the branch, then HEAD's
    assert changed[0] == marked[0][1][:len(changed[0])] and len(changed) > 1
    command = next(line for line in lines if line.startswith("$ "))
    assert "bisect fp16/wgmma_grouped_tma_store --size 8192" in command and "--budget-s 480" in command


@pytest.mark.parametrize("bad", [["--percent", "nan"], ["--commits", "0"], ["--size", "0"], ["--max-rounds", "1"],
                                 ["--budget-s", "-1"], ["--slow-at", "17"]])
def test_a_bad_value_is_one_line_before_any_clone(tmp_path, bad):
    done = subprocess.run([sys.executable, "-m", "tools.acceptance.bisect_demo", str(tmp_path / "out"), "--dry-run",
                           *bad], cwd=ROOT, check=False, capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()
