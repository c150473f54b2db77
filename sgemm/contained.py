"""The command lines of what runs a pull request's content (a round's process, a launch probe, asv's builds and
benchmarks), put through the runner's job sandbox when SGEMM_SANDBOX names it (.github/runner/job-sandbox.py).

The code that judges (the gate's statistics and report) stays outside, as the runner's user; inside, the command
sees the paths given here read-only, writes only those given as writable, and reaches only the cards named. With
SGEMM_SANDBOX unset (a developer's own box) the command runs as it is. With it set, a sandbox that is not there is an
error, never a run without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

SANDBOX_VARIABLE = "SGEMM_SANDBOX"
# The runner's settings a measuring process needs; PYTHONPATH where the judge's own code is found through it.
PASSED_VARIABLES = ("SGEMM_CUDA_SITE", "SGEMM_CUDA_EXTRA", "PYTHONPATH")


class SandboxMissing(RuntimeError):
    """SGEMM_SANDBOX names no program this user may run."""


def sandbox_program() -> str | None:
    """The sandbox's path, None where none is asked for; SandboxMissing where one is asked for and not there."""
    program = os.environ.get(SANDBOX_VARIABLE, "")
    if not program:
        return None
    if not (os.path.isabs(program) and os.path.isfile(program) and os.access(program, os.X_OK)):
        raise SandboxMissing(f"{SANDBOX_VARIABLE}={program} is no program this user may run: nothing runs without "
                             "the sandbox")
    return program


def measuring_code() -> list[Path]:
    """What the measuring process imports: this Python's prefix (the job's venv) and sgemm's own folder."""
    places = {Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1]}
    places |= {Path(site).resolve() for name in ("SGEMM_CUDA_SITE", "PYTHONPATH")
               for site in os.environ.get(name, "").split(os.pathsep) if site}
    return sorted(place for place in places if place.exists())


def contained(command: Iterable[str], *, readable: Iterable[Path] = (), writable: Iterable[Path] = (),
              devices: Iterable[int | str] = (), cwd: Path | None = None,
              env: Mapping[str, str] | None = None, machine_file: Path | None = None) -> list[str]:
    """`command` as it must be started: through the sandbox where one is asked for, else unchanged. `env` names the
    variables the command needs beyond the sandbox's own (the sandbox clears the rest); writable paths must exist."""
    command = [str(part) for part in command]
    program = sandbox_program()
    if program is None:
        return command
    args = [program]
    for place in (*measuring_code(), *readable):
        args += ["--ro", str(place)]
    for place in writable:
        args += ["--rw", str(place)]
    for device in devices:
        args += ["--gpu", str(device)]
    if machine_file is not None:
        args += ["--machine-file", str(machine_file)]
    if cwd is not None:
        args += ["--cwd", str(cwd)]
    passed = {name: os.environ[name] for name in PASSED_VARIABLES if os.environ.get(name)}
    passed.update(env or {})
    passed["PATH_PREFIX"] = str(Path(sys.executable).parent)
    for name, value in sorted(passed.items()):
        args += ["--env", f"{name}={value}"]
    return [*args, "--", *command]
