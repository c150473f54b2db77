#!/usr/bin/python3 -I
"""The containment of one GPU job on a runner that outlives it: what the job's code started or planted is ended
or removed, and if there was anything the job fails and the runner is marked TAINTED, which makes the job-started
hook refuse every later job until an administrator has looked at the box.

  job-cleanup.py step   Run by the main step's EXIT trap, in the main step's own session (the step exports
                        SGEMM_JOB_MARK and JOB_OUTPUTS first). Ends every process of the step's session and every
                        process carrying the job's mark, then checks the step's own file commands: the step writes
                        nothing to $GITHUB_ENV, $GITHUB_PATH or $GITHUB_STATE and exactly JOB_OUTPUTS to
                        $GITHUB_OUTPUT, so anything else there was written by the code it ran. It is emptied (or put
                        back) before the runner reads it, which happens once the step has exited: a BASH_ENV, PATH
                        entry or LD_PRELOAD planted there would run inside every later step of the job, this one's
                        cleanup included.
  job-cleanup.py job    Run by an `if: always()` step after the main step, with JOB_MARK, JOB_SESSION and
                        JOB_STARTED (the main step's outputs; JOB_STARTED in ns). Ends the session's and the mark's
                        processes again, reports every other process of the runner's user that is not this step's
                        ancestor (the runner's own: Runner.Worker, Runner.Listener, run.sh), and removes every file
                        of the runner's user changed since JOB_STARTED in its home, the runner's directory, /tmp,
                        /var/tmp and /dev/shm, except the job's workspace, RUNNER_TEMP and the runner's logs (_diag).
                        --watch DIR (repeatable) replaces those places and --keep DIR adds to what is spared; a test
                        or trial passes --only-marked, which spares the user's other processes.

A process is the job's when it is in the main step's session (asv gives each benchmark a process group of its own,
so a group would not hold them) or carries SGEMM_JOB_MARK=<the job's mark> in its environment (what `setsid -f`,
a double fork or nohup starts keeps it). Each is stopped first, so that none forks while the others are killed,
then killed by its id; a pass repeats until none is left.

What it cannot see (the README's security section says what follows from it): a process that left the session and
started itself again with a cleared environment (`env -i setsid -f ...`) is found only as "another process of the
runner's user", reported but not ended; a file the job changed that belongs to another user and is writable by
everyone; whatever the job sent over the network. And it runs as the runner's user, like the job's code: a job
that rewrote the runner's own programs, or a process that escaped both marks, can outlast it. Only a job user
other than the runner's, or a runner thrown away after each job, closes that.

Installed by install-hook.sh as a root-owned copy with STATE_DIR below written in; the copy in the repository
refuses to run. `python3 -I`: no PYTHONPATH, PYTHONHOME or user site a job could have set is read.
"""

import argparse
import os
import pwd
import re
import signal
import stat
import sys
import time
from pathlib import Path

STATE_DIR = "@STATE_DIR@"
MARK_VARIABLE = "SGEMM_JOB_MARK"
FILE_COMMANDS = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE")  # the GPU jobs' own steps write none of these
SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm")
MARK = re.compile(r"[0-9a-f]{32}")
PASSES = 50
CLOCK_SLACK_NS = 20_000_000


def proc_table() -> dict:
    """pid -> (state, ppid, session) of every process still there."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
        table[int(entry)] = (fields[0], int(fields[1]), int(fields[3]))
    return table


def lineage(pid: int, table: dict) -> list:
    chain = []
    while pid > 0 and pid in table and pid not in chain:
        chain.append(pid)
        pid = table[pid][1]
    return chain


def describe(pid: int) -> str:
    try:
        args = Path("/proc", str(pid), "cmdline").read_bytes().split(b"\0")
        text = " ".join(arg.decode(errors="replace") for arg in args if arg)
    except OSError:
        text = "?"
    return f"pid {pid} ({text[:160]})"


def carries(pid: int, mark: str) -> bool:
    try:
        environment = Path("/proc", str(pid), "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{MARK_VARIABLE}={mark}".encode() in environment


def owner(pid: int):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def the_jobs(table: dict, mark: str, session: int) -> list:
    """The job's processes, less this one's ancestors and what this one started."""
    me = os.getpid()
    spared = set(lineage(me, table))
    found = []
    for pid, (state, _, sid) in table.items():
        if pid in spared or state in "ZX" or me in lineage(pid, table):
            continue
        if (session and sid == session) or (mark and carries(pid, mark)):
            found.append(pid)
    return found


def end_processes(mark: str, session: int) -> list:
    seen = {}
    for _ in range(PASSES):
        left = the_jobs(proc_table(), mark, session)
        if not left:
            return [f"{text} outlived the job: ended" for text in seen.values()]
        for pid in left:
            seen.setdefault(pid, describe(pid))
            _signal(pid, signal.SIGSTOP)  # stopped, it cannot fork while the others are killed
        for pid in left:
            _signal(pid, signal.SIGKILL)
        time.sleep(0.05)
    left = the_jobs(proc_table(), mark, session)
    return ([f"{text} outlived the job: ended" for pid, text in seen.items() if pid not in left]
            + [f"{describe(pid)} outlived the job and could not be ended" for pid in left])


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def other_processes(table: dict) -> list:
    """Processes of this user that are neither this step's ancestors nor its children: on a runner whose user runs
    nothing but the runner, what is left of a job that shed both marks."""
    me, uid = os.getpid(), os.getuid()
    spared = set(lineage(me, table))
    return [f"{describe(pid)} of the runner's user is not the runner's (left running: look at it)"
            for pid, (state, _, _) in table.items()
            if pid not in spared and state not in "ZX" and owner(pid) == uid and me not in lineage(pid, table)]


def check_file_commands(environment: dict) -> list:
    findings = []
    for name in FILE_COMMANDS:
        path = environment.get(name)
        if path and os.path.isfile(path) and os.path.getsize(path):
            text = Path(path).read_text(errors="replace")
            findings.append(f"${name} was written by the job's code ({_first(text)}): emptied before the runner "
                            "reads it")
            Path(path).write_text("")
    path, wanted = environment.get("GITHUB_OUTPUT"), environment.get("JOB_OUTPUTS", "")
    if path and os.path.isfile(path):
        text = Path(path).read_text(errors="replace")
        if text.rstrip("\n") != wanted.rstrip("\n"):
            findings.append(f"$GITHUB_OUTPUT holds more than the step wrote ({_first(text)}): put back")
            Path(path).write_text(wanted.rstrip("\n") + "\n")
    return findings


def _first(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    shown = "; ".join(lines[:3])[:200]
    return shown + (f"; and {len(lines) - 3} more lines" if len(lines) > 3 else "")


def runner_directory(table: dict):
    """The runner's own directory (bin/, .credentials, .env), from the Runner.Worker this step runs under."""
    for pid in lineage(os.getpid(), table):
        try:
            program = Path(os.readlink(f"/proc/{pid}/exe"))
        except OSError:
            continue
        if program.name == "Runner.Worker":
            return program.parent.parent
    return None


def remove_planted(watched: list, spared: list, started_ns: int) -> list:
    """Every entry of this user changed since the main step started (its ctime, which no one but root can set
    back) under the watched places, spared ones aside; files and links removed, then directories left empty by
    that. The kernel stamps ctime from a clock a tick behind the one `date` reads: CLOCK_SLACK_NS earlier counts."""
    uid, findings = os.getuid(), []
    since = started_ns - CLOCK_SLACK_NS
    spared_real = {os.path.realpath(path) for path in spared}
    for root in watched:
        if not os.path.isdir(root) or os.path.realpath(root) in spared_real:
            continue
        for folder, folders, files in os.walk(root, topdown=True):
            keep = []
            for name in folders:
                path = os.path.join(folder, name)
                if os.path.realpath(path) in spared_real:
                    continue
                info = os.lstat(path)
                if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and info.st_ctime_ns > since:
                    os.chmod(path, 0o700)  # a planted folder may be closed to its own user
                keep.append(name)
            folders[:] = [name for name in keep if not os.path.islink(os.path.join(folder, name))]
            links = [name for name in keep if os.path.islink(os.path.join(folder, name))]
            for name in files + links:
                path = os.path.join(folder, name)
                info = os.lstat(path)
                if info.st_uid == uid and info.st_ctime_ns > since:
                    findings.append(_remove(path, folder))
        for folder, _, _ in sorted(os.walk(root), key=lambda entry: -entry[0].count(os.sep)):
            if folder == root or os.path.realpath(folder) in spared_real:
                continue
            info = os.lstat(folder)
            if info.st_uid == uid and info.st_ctime_ns > since and not os.listdir(folder):
                os.rmdir(folder)
                findings.append(f"{folder}/ was made by the job: removed")
    return findings


def _remove(path: str, folder: str) -> str:
    try:
        os.chmod(folder, os.lstat(folder).st_mode | stat.S_IWUSR | stat.S_IXUSR)
        os.unlink(path)
    except OSError as error:
        return f"{path} was written by the job and could not be removed ({error.strerror})"
    return f"{path} was written by the job: removed"


def taint(findings: list, environment: dict) -> None:
    where = (f"run {environment.get('GITHUB_RUN_ID', '?')} job {environment.get('GITHUB_JOB', '?')} of "
             f"{environment.get('GITHUB_WORKFLOW_REF', '?')}")
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {where}: {' | '.join(findings)}"
    try:
        with open(os.path.join(STATE_DIR, "TAINTED"), "a", encoding="utf-8") as flag:
            flag.write(line[:4000] + "\n")
    except OSError as error:
        print(f"::error::could not mark this runner tainted ({STATE_DIR}/TAINTED: {error.strerror}); take it "
              "offline by hand")


def number(environment: dict, name: str, pattern: str) -> str:
    value = environment.get(name, "")
    if not re.fullmatch(pattern, value):
        raise ValueError(f"{name} is {value[:80]!r}, which the main step did not write")
    return value


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="job-cleanup.py")
    parser.add_argument("stage", choices=("step", "job"))
    parser.add_argument("--watch", action="append", default=[], metavar="DIR")
    parser.add_argument("--keep", action="append", default=[], metavar="DIR")
    parser.add_argument("--only-marked", action="store_true")
    arguments = parser.parse_args(argv)
    if STATE_DIR.startswith("@"):
        print("job-cleanup.py: not installed (install-hook.sh writes the state folder into a root-owned copy)",
              file=sys.stderr)
        return 2
    environment = dict(os.environ)
    findings = []
    if arguments.stage == "step":
        mark = environment.get(MARK_VARIABLE, "")
        if not MARK.fullmatch(mark):
            findings.append(f"{MARK_VARIABLE} is {mark[:80]!r}, not the mark the step made")
            mark = ""
        findings += end_processes(mark, os.getsid(0))
        findings += check_file_commands(environment)
    else:
        try:
            mark = number(environment, "JOB_MARK", MARK.pattern)
            session = int(number(environment, "JOB_SESSION", r"[1-9][0-9]*"))
            since = int(number(environment, "JOB_STARTED", r"[1-9][0-9]*"))
        except ValueError as error:
            if not any(environment.get(name) for name in ("JOB_MARK", "JOB_SESSION", "JOB_STARTED")):
                print("the main step did not start: nothing of the job's code ran")
                return 0
            mark, session, since = "", 0, 0
            findings.append(f"{error}: the job's outputs were tampered with")
        if session == os.getsid(0):
            findings.append(f"JOB_SESSION {session} is this step's own session")
            session = 0
        elif session and proc_table().get(session, ("Z",))[0] not in "ZX":
            # The main step led its session and has ended: a leader still running means a forged output (or a
            # reused id), and a session to end by that number might be anyone's.
            findings.append(f"JOB_SESSION {session} names a session whose leader is still running: the job's "
                            "outputs were tampered with; ended by the mark alone")
            session = 0
        findings += end_processes(mark, session)
        table = proc_table()
        if not arguments.only_marked and os.getuid() != 0:  # as root, the other processes are the host's
            findings += other_processes(table)
        if since:
            watched = arguments.watch or [pwd.getpwuid(os.getuid()).pw_dir, *SHARED_TEMP]
            runner = runner_directory(table)
            if runner and not arguments.watch:
                watched.append(str(runner))
            spared = [*arguments.keep, *(environment[name] for name in ("GITHUB_WORKSPACE", "RUNNER_TEMP")
                                         if environment.get(name))]
            if runner:
                spared.append(str(runner / "_diag"))
            findings += remove_planted(watched, spared, since)
    for finding in findings:
        print(f"::error::{finding}")
    if findings:
        taint(findings, environment)
        print(f"::error::this job left something behind; {STATE_DIR}/TAINTED now makes the runner refuse every job "
              "until an administrator has checked the box and removed it")
        return 1
    print("nothing of the job is left")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
