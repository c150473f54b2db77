""".github/runner/trial.py, the containment trial an operator runs on a real box, run here as it would be there: it
stages a runner in a temporary folder, runs the attack through the gate's main and cleanup steps (and, as root with
useradd, through the separate-user launcher), and passes only when nothing is left and the next job is refused."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_trial_contains_the_attack_and_leaves_nothing():
    done = subprocess.run([sys.executable, str(ROOT / ".github" / "runner" / "trial.py")], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "== left behind for a following job:\n  nothing\n" in done.stdout
    assert "== trial: PASS (main step 3, cleanup step 1, next job refused" in done.stdout
    if shutil.which("bwrap"):  # .ci/run installs it, so in CI the sandbox's part always runs
        assert "== left behind by the sandboxed job: nothing" in done.stdout and "sandbox contained it" in done.stdout
