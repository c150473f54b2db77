"""Real git histories of this project's kernels and catalogue, made in tmp folders, and a stand-in for the paired
rounds that returns chosen ratios per commit: what `sgemm bisect` and `sgemm confirm` are tested on without a GPU.
(A module of its own, not a conftest: other tests import tests/conftest.py as `conftest`.)"""

import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sgemm.bisect.compare import Round, Unmeasurable

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
KERNEL = "fp32/warptile"
SIZE = 4096


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True,
                          text=True).stdout.strip()


def without_kernel(catalogue: str, name: str) -> str:
    """The catalogue's text with the [[kernel]] table of `name` taken out."""
    tables = re.split(r"(?m)^(?=\[\[kernel\]\]\n)", catalogue)
    kept = [table for table in tables if f'\nname = "{name}"\n' not in table]
    assert len(kept) == len(tables) - 1, name
    return "".join(kept)


@dataclass
class History:
    """A repository whose commits are listed oldest first: commits[0] the root."""

    path: Path
    commits: list[str] = field(default_factory=list)

    def commit(self, message: str, edit=None) -> str:
        if edit:
            edit(self.path)
        else:
            with open(self.path / "NOTES.md", "a") as notes:
                notes.write(f"{message}\n")
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        self.commits.append(git(self.path, "rev-parse", "HEAD"))
        return self.commits[-1]


def make_history(folder: Path, count: int, first_catalogue: str | None = None, name: str = "repo") -> History:
    """A repository of the project's kernels and catalogue in `folder`, with `count` commits after its root, each
    adding a line of notes."""
    path = folder / name
    (path / "sgemm").mkdir(parents=True)
    shutil.copytree(ROOT / "kernels", path / "kernels")
    catalogue = (ROOT / "sgemm" / "catalogue.toml").read_text()
    (path / "sgemm" / "catalogue.toml").write_text(first_catalogue or catalogue)
    git(path, "init", "-q", "-b", "main")
    history = History(path)
    history.commit("root")
    for number in range(1, count + 1):
        history.commit(f"change {number}")
    return history


class FakeBuilds:
    """Rounds whose ratios are chosen per commit (1.0 where none is), with a little noise; commits in `broken`
    cannot be timed; `noise_of` gives some commits noise of their own. `calls` lists the commit of every round
    asked for."""

    method = "stood in for by a test"

    def __init__(self, ratios: dict[str, float], broken: dict[str, str] | None = None, noise: float = 0.0004,
                 seed: int = 1, interrupt_after: int | None = None, noise_of: dict[str, float] | None = None):
        self.ratios, self.broken, self.noise, self.noise_of = ratios, broken or {}, noise, noise_of or {}
        self.rng = random.Random(seed)
        self.calls: list[str] = []
        self.interrupt_after = interrupt_after

    def round(self, commit: str) -> Round:
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt("stopped by the test")
        self.calls.append(commit)
        if commit in self.broken:
            raise Unmeasurable(self.broken[commit])
        ratio = self.ratios.get(commit, 1.0) * self.rng.gauss(1, self.noise_of.get(commit, self.noise))
        return Round(ratio, 1e-3, 1e-3 * ratio, 1500.0, 1500.0, 0.01)


