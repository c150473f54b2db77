"""Stand-ins for running the job sandbox (job-sandbox.py) outside an installed runner, shared by the trial on a real
box (trial.py) and the tests (tests/ci/test_job_sandbox.py): its settings written to a temporary folder, and the
launcher started from the repository's copy with them. Plain functions over plain folders.

Where the host has no cgroup v2 with the memory and pids controllers to delegate (a cgroup v1 or hybrid box, as
some CI machines are), `StandInCgroup` records the limits and the job's entry in a plain folder instead; the end of
every process then rests on the PID namespace alone, and the limits are checked for real only where
`delegable_cgroup()` finds a cgroup (tests/ci/test_job_sandbox.py says which ran).
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = ROOT / ".github" / "runner" / "job-sandbox.py"
DRIVER = """
import importlib.util, sys
sys.path.insert(0, {here!r})
spec = importlib.util.spec_from_file_location("job_sandbox", {sandbox!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import sandbox_standins
cgroup = module.JobCgroup if {real} else sandbox_standins.StandInCgroup
sys.exit(module.main(sys.argv[1:], __import__("pathlib").Path({settings!r}), cgroup))
"""


def load():
    """job-sandbox.py as a module (its name holds a dash)."""
    spec = importlib.util.spec_from_file_location("job_sandbox", SANDBOX)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class StandInCgroup:
    """The job's cgroup recorded in a plain folder: limits and the job's entry written, no kernel behind them."""

    def __init__(self, parent: str, memory_max: str, pids_max: str):
        self.path = Path(parent) / f"sgemm-job-{os.getpid()}"
        self.path.mkdir(parents=True)
        (self.path / "memory.max").write_text(f"{memory_max}\n")
        (self.path / "pids.max").write_text(f"{pids_max}\n")

    def enter(self) -> None:
        (self.path / "cgroup.procs").write_text(f"{os.getpid()}\n")

    def events(self, name: str) -> dict:
        return {}

    def kill(self) -> bool:
        (self.path / "killed").write_text("1\n")
        return True

    def remove(self) -> bool:
        return True


def delegable_cgroup():
    """A cgroup v2 folder this process may make children in, with memory and pids offered, or None."""
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        controllers = root / "cgroup.controllers"
        if controllers.is_file() and {"memory", "pids"} <= set(controllers.read_text().split()) \
                and os.access(root, os.W_OK):
            return root
    return None


def write_settings(folder: Path, forbidden: list, **changes) -> Path:
    settings = {"bwrap": shutil.which("bwrap") or "/usr/bin/bwrap", "cgroup": str(folder / "cgroup"),
                "memory_max": str(512 * 2**20), "pids_max": "256", "wheelhouse": None,
                "forbidden": [str(path) for path in forbidden], **changes}
    path = folder / f"sandbox-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(settings))
    return path


def command(settings: Path, *argv: str, real_cgroup: bool = False) -> list:
    """The repository's job-sandbox run with these settings (and the stand-in cgroup unless real_cgroup)."""
    driver = DRIVER.format(here=str(SANDBOX.parent), sandbox=str(SANDBOX), real=real_cgroup, settings=str(settings))
    return [sys.executable, "-I", "-c", driver, *argv]


def run(settings: Path, *argv: str, real_cgroup: bool = False, timeout: float = 120):
    return subprocess.run(command(settings, *argv, real_cgroup=real_cgroup), capture_output=True, text=True,
                          timeout=timeout, check=False)
