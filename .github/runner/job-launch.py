#!/usr/bin/python3 -I
"""Runs what executes a pull request's content (the gate, asv's builds, the benchmark processes, NVRTC) as the job
user, a user of its own that owns nothing on the box, and ends everything it started by that user's id.

  sudo -n /usr/local/libexec/sgemm-runner/job-launch JOB_DIR [--env NAME=VALUE]... -- COMMAND [ARG]...

The runner's user may run this one root-owned program as root (the sudoers rule install-hook.sh writes) and nothing
else. It:
- refuses unless it runs as root, the job user exists and runs no process now (another job's code would still be
  there), and, on the gate's runner, the root-owned marker of an ephemeral runner exists (written when the runner's
  VM or container was provisioned);
- takes the host's lock, so that one job at a time runs a pull request's code on a box that serves both runners;
- hands the job user JOB_DIR's home, caches and temp folder (JOB_DIR itself stays the runner's user's, which it
  can pass through and not change), and clears the environment: HOME, TMPDIR, the XDG folders and the caches under
  JOB_DIR, PATH with JOB_DIR's venv first, no pip configuration, MPS's pipe and log folders set to a root-owned
  folder (no job user can start an MPS daemon there that another job's CUDA would connect to), and only these from
  --env: ALLOWED below. No GITHUB_*, RUNNER_*, ACTIONS_*, BASH_ENV or LD_* reaches the job's code; the checkouts
  (base/, pr/) are the runner's user's and so read-only to it;
- runs the command as the job user (its own groups alone, no new privileges), in a cgroup of its own where the host
  has a writable cgroup v2, and waits for it;
- then ends every process of the job user: stops and kills them from a process of that user (`kill -1`, which
  reaches every process of the user at once, whatever session or cgroup it moved to), until none is left; anything
  that outlived the command fails the job (exit 3) and sets the flag TAINTED, which makes the job-started hook
  refuse every later job until an administrator has looked;
- gives what the job user made under JOB_DIR back to the runner's user, so that the job's later steps can read the
  report and remove the folder.
It exits with the command's status, or 3 when something outlived it, or 2 when it refused to run.

Installed by install-hook.sh as a root-owned copy with ROLE, STATE_DIR, JOB_USER, WORK_ROOT, MARKER and RUN_DIR
written in; the copy in the repository refuses to run. Needs root, setuid and /proc; a writable cgroup v2 is used
where there is one (the end by uid does not need it).
"""

import fcntl
import os
import pwd
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROLE = "@ROLE@"
STATE_DIR = "@STATE_DIR@"
JOB_USER = "@JOB_USER@"
WORK_ROOT = "@WORK_ROOT@"  # JOB_DIR must lie under it (the runner's _work folder)
EPHEMERAL_MARKER = "@MARKER@"  # /etc/sgemm-runner/ephemeral
RUN_DIR = "@RUN_DIR@"  # /run/sgemm-runner: root's, the host's lock and MPS's folder
MPS_DIR = f"{RUN_DIR}/mps"
CGROUP_ROOT = Path("/sys/fs/cgroup")
OWNED = ("home", "cache", "config", "data", "state", "tmp", "work", "report", "gate", "history", "results", "env",
         "html")  # JOB_DIR's folders the job user writes
ALLOWED = {"SGEMM_CUDA_SITE", "SGEMM_CUDA_EXTRA", "CUDA_VISIBLE_DEVICES", "PIP_FIND_LINKS", "PIP_NO_INDEX",
           "BASE_SHA", "HEAD_SHA", "RANGE_INPUT", "LANG"}
PASSES = 50


def refuse(message: str) -> int:
    print(f"::error::job-launch: {message}; not run (it would run uncontained)", flush=True)
    return 2


def user_processes(uid: int) -> list:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path("/proc", entry, "status").read_text()
        except OSError:
            continue
        real = re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE)
        state = re.search(r"^State:\s+(\S)", status, re.MULTILINE)
        if real and int(real.group(1)) == uid and state and state.group(1) not in "ZX":
            found.append(int(entry))
    return found


def describe(pid: int) -> str:
    try:
        args = Path("/proc", str(pid), "cmdline").read_bytes().split(b"\0")
        return f"pid {pid} ({' '.join(a.decode(errors='replace') for a in args if a)[:160]})"
    except OSError:
        return f"pid {pid}"


def signal_all_of(uid: int, gid: int, number: int) -> None:
    """kill(-1) from a process of the user: every process the user has, at once, none of anyone else's."""
    child = os.fork()
    if child == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.kill(-1, number)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(child, 0)


def end_all_of(uid: int, gid: int) -> tuple:
    """(what was running, what could not be ended)."""
    seen = {}
    for _ in range(PASSES):
        left = user_processes(uid)
        if not left:
            return list(seen.values()), []
        for pid in left:
            seen.setdefault(pid, describe(pid))
        signal_all_of(uid, gid, signal.SIGSTOP)
        signal_all_of(uid, gid, signal.SIGKILL)
        time.sleep(0.05)
    return list(seen.values()), [describe(pid) for pid in user_processes(uid)]


def taint(findings: list) -> None:
    with open(Path(STATE_DIR, "TAINTED"), "a") as flag:
        flag.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} job-launch: " + "; ".join(findings) + "\n")


def job_dir_problem(job_dir: Path, runner_uid: int):
    if not WORK_ROOT.startswith("/") or not os.path.isabs(job_dir) or ".." in job_dir.parts:
        return f"JOB_DIR {job_dir} is not an absolute path under {WORK_ROOT}"
    if job_dir.is_symlink() or not job_dir.is_dir():
        return f"JOB_DIR {job_dir} is not a folder"
    real = Path(os.path.realpath(job_dir))
    if not real.is_relative_to(os.path.realpath(WORK_ROOT)):
        return f"JOB_DIR {job_dir} is not under the runner's work folder {WORK_ROOT}"
    if real.stat().st_uid != runner_uid:
        return f"JOB_DIR {job_dir} does not belong to the runner's user (uid {runner_uid})"
    if closed := [str(part) for part in real.parents if not os.stat(part).st_mode & 0o001]:
        return f"the job user cannot pass through {closed[0]} to JOB_DIR (chmod o+x it, or move the runner's folder)"
    return None


def parse(argv: list):
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        return None
    split = argv.index("--")
    given, command = argv[:split], argv[split + 1:]
    job_dir, extra = Path(given[0]), {}
    rest = given[1:]
    while rest:
        if len(rest) < 2 or rest[0] != "--env" or "=" not in rest[1]:
            return None
        name, value = rest[1].split("=", 1)
        if name not in ALLOWED:
            raise ValueError(f"--env {name}: only {', '.join(sorted(ALLOWED))} reach the job's code")
        extra[name] = value
        rest = rest[2:]
    return job_dir, extra, command


def environment(job_dir: Path, extra: dict) -> dict:
    places = {name: str(job_dir / folder) for name, folder in (
        ("HOME", "home"), ("TMPDIR", "tmp"), ("XDG_CACHE_HOME", "cache"), ("XDG_CONFIG_HOME", "config"),
        ("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state"), ("CUPY_CACHE_DIR", "cache/cupy"),
        ("CUDA_CACHE_PATH", "cache/nv"), ("PIP_CACHE_DIR", "cache/pip"))}
    return {**places, **extra, "PATH": f"{job_dir / 'venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "JOB_DIR": str(job_dir), "PIP_CONFIG_FILE": os.devnull, "PYTHONNOUSERSITE": "1",
            "CUDA_MPS_PIPE_DIRECTORY": MPS_DIR, "CUDA_MPS_LOG_DIRECTORY": MPS_DIR,
            # The checkouts are the runner's user's: git refuses another user's repository unless told.
            "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}


def make_cgroup():
    """A cgroup v2 folder of this run's own, or None where the host has no writable one (the end by uid holds)."""
    if not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None
    folder = CGROUP_ROOT / f"sgemm-job-{os.getpid()}"
    try:
        folder.mkdir()
    except OSError:
        return None
    return folder


def chown_tree(root: Path, uid: int, gid: int) -> None:
    for folder, folders, files in os.walk(root):
        for name in [*folders, *files]:
            os.lchown(os.path.join(folder, name), uid, gid)
    os.lchown(root, uid, gid)


def main(argv: list) -> int:
    if "@" in STATE_DIR + JOB_USER + ROLE + WORK_ROOT + EPHEMERAL_MARKER + RUN_DIR:
        print("job-launch: this is the repository's copy, not installed (install-hook.sh)", file=sys.stderr)
        return 2
    try:
        parsed = parse(argv)
    except ValueError as exc:
        return refuse(str(exc))
    if parsed is None:
        return refuse("usage: job-launch JOB_DIR [--env NAME=VALUE]... -- COMMAND [ARG]...")
    job_dir, extra, command = parsed
    if os.geteuid() != 0:
        return refuse("not run as root (sudo -n, by the rule install-hook.sh wrote)")
    runner_uid = int(os.environ.get("SUDO_UID", "-1"))
    if runner_uid <= 0:
        return refuse("not run through sudo by the runner's user")
    try:
        job = pwd.getpwnam(JOB_USER)
    except KeyError:
        return refuse(f"the job user {JOB_USER} does not exist (install-hook.sh makes it)")
    if job.pw_uid in (0, runner_uid):
        return refuse(f"the job user {JOB_USER} is root or the runner's user")
    if ROLE == "gate" and not (os.path.isfile(EPHEMERAL_MARKER) and os.stat(EPHEMERAL_MARKER).st_uid == 0):
        return refuse(f"the gate runs only on an ephemeral runner, and {EPHEMERAL_MARKER} (root's, written when it "
                      "was provisioned) is not there")
    if problem := job_dir_problem(job_dir, runner_uid):
        return refuse(problem)
    os.makedirs(MPS_DIR, mode=0o755, exist_ok=True)
    lock = open(f"{RUN_DIR}/host.lock", "a")  # noqa: SIM115 - held until this process ends
    fcntl.flock(lock, fcntl.LOCK_EX)  # one job's code at a time on this box
    if running := user_processes(job.pw_uid):
        findings = [f"{describe(pid)} of the job user was running before this job" for pid in running]
        end_all_of(job.pw_uid, job.pw_gid)
        taint(findings)
        return refuse("; ".join(findings))
    os.chmod(job_dir, 0o711)  # the job user passes through; the runner's user alone changes it
    for name in OWNED:
        (job_dir / name).mkdir(exist_ok=True)
        chown_tree(job_dir / name, job.pw_uid, job.pw_gid)
    cgroup = make_cgroup()

    def become_job_user():
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))
        os.setsid()
        os.setgroups([])
        os.setgid(job.pw_gid)
        os.setuid(job.pw_uid)

    print(f"job-launch: {' '.join(command)[:200]} as {JOB_USER} (uid {job.pw_uid})"
          f"{f', cgroup {cgroup}' if cgroup else ', no writable cgroup v2: ended by uid alone'}", flush=True)
    try:
        status = subprocess.run(command, env=environment(job_dir, extra), cwd=job_dir / "work", check=False,
                                preexec_fn=become_job_user).returncode  # noqa: PLW1509 - the point of it
    except OSError as exc:
        status = 127
        print(f"::error::job-launch: cannot run {command[0]}: {exc}", flush=True)
    outlived, unended = end_all_of(job.pw_uid, job.pw_gid)
    if cgroup is not None:
        try:
            cgroup.rmdir()
        except OSError as exc:
            unended.append(f"cgroup {cgroup} not empty ({exc})")
    for name in OWNED:
        chown_tree(job_dir / name, runner_uid, os.stat(job_dir).st_gid)
    os.chmod(job_dir, 0o700)
    findings = [f"{text} outlived the job's command: ended" for text in outlived]
    findings += [f"{text} outlived the job's command and could not be ended" for text in unended]
    for finding in findings:
        print(f"::error::{finding}", flush=True)
    if findings:
        taint(findings)
        print(f"::error::{STATE_DIR}/TAINTED now makes the runner refuse every job until an administrator has "
              "checked the box and removed it", flush=True)
        return 3
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
