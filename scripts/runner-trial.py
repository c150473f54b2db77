#!/usr/bin/env python3
"""A trial of the GPU job's containment on a real box (no runner service needed): stages a runner's places in a
temporary folder (its user's home with the runner folder and _work, a stand-in for /tmp, the state folder, the
installed job-cleanup.py and job-started hook), runs the gate's main step as gpu-gate.yml has it with an attack in
place of the gate (a `setsid -f` process, a double fork, BASH_ENV and LD_PRELOAD into $GITHUB_ENV, a folder into
$GITHUB_PATH, a forged output, ~/.gitconfig, ~/.profile, a systemd user unit, files outside its folder), then the
cleanup step, then asks the hook whether the next job may run. Prints each step's exit status and everything left
that a following job could see; exits 0 when nothing is left, both steps failed and the next job is refused.

It changes no GPU setting and starts no MPS daemon (the attack touches no GPU); every process it starts that is
still running at the end is ended by its id, and the temporary folder is removed (--keep keeps it).

  python3 scripts/runner-trial.py [--keep]        (needs PyYAML and pytest, as the tests do)
"""

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_simulation():
    spec = importlib.util.spec_from_file_location("job_cleanup_simulation", ROOT / "tests" / "test_job_cleanup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def marked_processes(mark: str) -> list:
    found = []
    for entry in os.listdir("/proc"):
        try:
            environment = Path("/proc", entry, "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry.isdigit() and f"SGEMM_JOB_MARK={mark}".encode() in environment and int(entry) != os.getpid():
            found.append(int(entry))
    return found


def left_behind(sim, runner: dict, before: set, outputs: dict) -> list:
    left = []
    for pid_file in sorted((runner["tmp"] / "pids").iterdir()):
        pid = int(pid_file.read_text())
        if sim.alive(pid):
            left.append(f"process {pid_file.name} (pid {pid}) still running")
    left += [f"process pid {pid} carries the job's mark" for pid in marked_processes(outputs.get("mark", "-"))
             if sim.alive(pid)]
    for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE"):
        text = runner["files"][name].read_text()
        if text:
            left.append(f"${name} still holds {text.strip()!r} (the runner would apply it to the next step)")
    if set(outputs) != {"session", "mark", "started"}:
        left.append(f"the main step's outputs are {sorted(outputs)}")
    now = {str(path.relative_to(runner["tmp"])) for place in (runner["home"], runner["shared"])
           for path in place.rglob("*") if not path.is_relative_to(runner["home"] / "actions-runner" / "_work")}
    left += [f"{path} was not there before the job" for path in sorted(now - before)]
    return left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the staged folder (its path is printed)")
    arguments = parser.parse_args()
    sim = load_simulation()
    folder = Path(tempfile.mkdtemp(prefix="sgemm-runner-trial-"))
    runner = sim.stage(folder)
    try:
        before = {str(path.relative_to(folder)) for place in (runner["home"], runner["shared"])
                  for path in place.rglob("*")}
        print(f"staged in {folder} as uid {os.getuid()}; the attack, in place of the gate:{sim.ATTACK}")
        first, second, outputs = sim.run_job(runner, sim.ATTACK)
        print(f"== main step: exit {first.returncode}\n{first.stdout}{first.stderr}")
        print(f"== cleanup step: exit {second.returncode}\n{second.stdout}{second.stderr}")
        refused = sim.next_job_refused(runner)
        print(f"== the next job's hook: exit {refused.returncode}\n{refused.stdout}{refused.stderr}")
        flag = runner["flag"].read_text() if runner["flag"].exists() else ""
        print(f"== TAINTED:\n{flag or '(none)'}")
        left = left_behind(sim, runner, before, outputs)
        print("== left behind for a following job:")
        print("\n".join(f"  {line}" for line in left) if left else "  nothing")
        verdict = not left and first.returncode != 0 and second.returncode != 0 and refused.returncode != 0 and flag
        print(f"== trial: {'PASS' if verdict else 'FAIL'} (main step {first.returncode}, cleanup step "
              f"{second.returncode}, next job {'refused' if refused.returncode else 'accepted'})")
        return 0 if verdict else 1
    finally:
        ended = sim.end_started(runner)
        if ended:
            print(f"ended what the trial started and the cleanup missed, by id: {ended}")
        if arguments.keep:
            print(f"kept {folder}")
        else:
            for path in folder.rglob("*"):
                if path.is_dir() and not path.is_symlink():
                    path.chmod(0o700)
            shutil.rmtree(folder)


if __name__ == "__main__":
    sys.exit(main())
