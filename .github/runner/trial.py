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

  python3 .github/runner/trial.py [--keep]        (needs PyYAML; the stand-ins it shares with the tests are
                                                   standins.py, beside it)

As root with useradd it also runs the separate-user launcher (job-launch.py) on a throwaway user, removed after, and
says so; otherwise it says it could not.
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import standins


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


def left_behind(runner: dict, before: set, outputs: dict) -> list:
    left = []
    for pid_file in sorted((runner["tmp"] / "pids").iterdir()):
        pid = int(pid_file.read_text())
        if standins.alive(pid):
            left.append(f"process {pid_file.name} (pid {pid}) still running")
    left += [f"process pid {pid} carries the job's mark" for pid in marked_processes(outputs.get("mark", "-"))
             if standins.alive(pid)]
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


def launcher_trial() -> tuple:
    """The separate-user launcher (job-launch.py) with a throwaway job user, where this runs as root with useradd:
    an attack run through it (a `setsid -f` process, a double fork, a write to the checkout, a look for GITHUB_ENV)
    must leave no process of the job user, the checkout unchanged, no GITHUB_ENV in its environment, and fail with 3.
    Returns (passed or None when it could not be exercised, what was printed)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        return None, "not exercised: the separate-user launcher needs root and useradd here"
    import pwd
    import subprocess
    import uuid

    name = f"sgt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    folder = Path(tempfile.mkdtemp(prefix="sgemm-launch-trial-"))
    lines = []
    try:
        user = pwd.getpwnam(name)
        folder.chmod(0o755)
        launcher = standins.install(folder, "history", name)
        job_dir, checkout = folder / "work" / "sgemm-job", folder / "work" / "pr"
        (job_dir / "report").mkdir(parents=True)
        checkout.mkdir()
        (checkout / "kernel.cu").write_text("the pull request's\n")
        for path in (job_dir, checkout, checkout / "kernel.cu", job_dir / "report"):
            os.chown(path, standins.RUNNER_UID, standins.RUNNER_UID)
        (folder / "work").chmod(0o755)
        attack = ('setsid -f sleep 300 > /dev/null 2>&1; ( sleep 301 > /dev/null 2>&1 & );'
                  f' echo x >> {checkout}/kernel.cu;'
                  ' env > "$JOB_DIR/report/env"; sleep 1')
        done = standins.launch(launcher, job_dir, "bash", "-c", attack)
        lines.append(f"== launcher: exit {done.returncode}\n{done.stdout}{done.stderr}")
        left = [f"pid {pid} of the job user still running" for pid in standins.processes_of(user.pw_uid)]
        if (checkout / "kernel.cu").read_text() != "the pull request's\n":
            left.append("the checkout was changed")
        if "GITHUB_ENV" in (job_dir / "report" / "env").read_text():
            left.append("GITHUB_ENV reached the job's code")
        lines.append("== left behind by the launched job: " + ("; ".join(left) or "nothing"))
        return not left and done.returncode == 3, "\n".join(lines)
    finally:
        for pid in standins.processes_of(pwd.getpwnam(name).pw_uid):
            os.kill(pid, 9)
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the staged folder (its path is printed)")
    arguments = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="sgemm-runner-trial-"))
    runner = standins.stage(folder)
    try:
        before = {str(path.relative_to(folder)) for place in (runner["home"], runner["shared"])
                  for path in place.rglob("*")}
        print(f"staged in {folder} as uid {os.getuid()}; the attack, in place of the gate:{standins.ATTACK}")
        first, second, outputs = standins.run_job(runner, standins.ATTACK)
        print(f"== main step: exit {first.returncode}\n{first.stdout}{first.stderr}")
        print(f"== cleanup step: exit {second.returncode}\n{second.stdout}{second.stderr}")
        refused = standins.next_job_refused(runner)
        print(f"== the next job's hook: exit {refused.returncode}\n{refused.stdout}{refused.stderr}")
        flag = runner["flag"].read_text() if runner["flag"].exists() else ""
        print(f"== TAINTED:\n{flag or '(none)'}")
        left = left_behind(runner, before, outputs)
        print("== left behind for a following job:")
        print("\n".join(f"  {line}" for line in left) if left else "  nothing")
        verdict = not left and first.returncode != 0 and second.returncode != 0 and refused.returncode != 0 and flag
        launched, text = launcher_trial()
        print(text)
        verdict = verdict and launched is not False
        print(f"== trial: {'PASS' if verdict else 'FAIL'} (main step {first.returncode}, cleanup step "
              f"{second.returncode}, next job {'refused' if refused.returncode else 'accepted'}, launcher "
              f"{ {True: 'contained it', False: 'FAILED', None: 'not exercised'}[launched] })")
        print("not exercised here: a systemd scope or cgroup v2 kill (the launcher ends by uid; it uses a cgroup only "
              "where one is writable), sudo itself (the launcher runs as root directly), the host lock across two "
              "runners, MPS (no daemon is started)")
        return 0 if verdict else 1
    finally:
        ended = standins.end_started(runner)
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
