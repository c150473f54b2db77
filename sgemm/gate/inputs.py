"""What the gate judges by, taken from the base commit: a change can alter what is measured (its kernels, their
catalogue entries, the suite), never how it is built, run or judged.

- asv.conf.json: its build, install and uninstall commands run for both commits where they are measured unpaired,
  and its matrix says what each environment holds. A change that edited them would run its own commands for the
  base commit too, or build both sides its way.
- noise/<machine>.json: the round-to-round noise each verdict weighs a change against. A change that added or
  widened it would pass any regression as noise.
- The thresholds are the command line's and the running package's own (installed from the base commit where the
  gate runs on a pull request); no file of the repository sets them.

Both files are read out of git at the base commit into a folder of the gate's own, before anything of the change
runs; the working tree's copies are not read.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .noise import NOISE_DIR

ASV_CONFIG = "asv.conf.json"


class JudgeInputsError(RuntimeError):
    """The base commit's files cannot be read; the message says which and why."""


@dataclass(frozen=True)
class JudgeInputs:
    commit: str
    asv_config: Path
    noise_file: Path | None  # None: the base commit has no noise file for this machine


def _show(repo: Path, commit: str, path: str) -> bytes | None:
    """The file `path` as `commit` has it; None when the commit has no such file."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", commit, "--", path],
                            check=False, capture_output=True, text=True)
    if listed.returncode:
        raise JudgeInputsError(f"cannot list {path} at {commit[:12]}: {listed.stderr.strip() or 'git failed'}")
    if listed.stdout.strip() != path:
        return None
    done = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{commit}:{path}"], check=False,
                          capture_output=True)
    if done.returncode:
        raise JudgeInputsError(f"cannot read {path} at {commit[:12]}: "
                               f"{done.stderr.decode(errors='replace').strip() or 'not a file'}")
    return done.stdout


def export(repo: Path, base: str, machine: str, dest: Path) -> JudgeInputs:
    """The base commit's asv.conf.json and the machine's noise file, written under `dest` (emptied first)."""
    config = _show(repo, base, ASV_CONFIG)
    if config is None:
        raise JudgeInputsError(f"the base commit {base[:12]} has no {ASV_CONFIG}: nothing says how to build it")
    noise = _show(repo, base, f"{NOISE_DIR}/{machine}.json")
    dest.mkdir(parents=True, exist_ok=True)
    for old in (dest / ASV_CONFIG, dest / NOISE_DIR / f"{machine}.json"):
        old.unlink(missing_ok=True)
    (dest / ASV_CONFIG).write_bytes(config)
    noise_file = None
    if noise is not None:
        noise_file = dest / NOISE_DIR / f"{machine}.json"
        noise_file.parent.mkdir(exist_ok=True)
        noise_file.write_bytes(noise)
    return JudgeInputs(base, dest / ASV_CONFIG, noise_file)
