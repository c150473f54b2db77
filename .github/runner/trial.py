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

Where bubblewrap is installed it also runs the security review's trial scripts inside the job sandbox
(job-sandbox.py: a setsid daemon, a double fork, SysV shared memory, /tmp and /dev/shm leftovers, an MPS folder, links
in the report, .credentials by name, --jitconfig, the network, a symlinked folder, signals to the launcher) and looks
for anything left outside; with --gpu, every card bound in, nvidia-smi and a CuPy matmul inside.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import standins

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # sgemm, for the judge's reader


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


SANDBOX_ATTACKS = {
    # the security review's trial scripts, each run inside the sandbox (its id in the review)
    "D12 a setsid daemon": "setsid -f bash -c 'exec -a {mark} sleep 600' >/dev/null 2>&1",
    "D12 a double fork": "( bash -c 'exec -a {mark} sleep 600' >/dev/null 2>&1 & )",
    "D6 SysV shared memory": "ipcmk -M 268435456 >/dev/null",
    "D6 /tmp, /var/tmp and /dev/shm leftovers": "touch /tmp/{mark} /var/tmp/{mark} /dev/shm/{mark}",
    "M4 an MPS folder in /tmp": "mkdir -p /tmp/nvidia-mps && touch /tmp/nvidia-mps/{mark}",
    "D4 links in the report": "ln -s {credentials} {out}/round-1.jsonl",
    "D8 .credentials by name": "cat {credentials} > {out}/stolen 2>/dev/null; true",
    "D8 --jitconfig on a command line": "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' > {out}/jit; true",
    "L5 the network": "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)'"
                      " && touch {out}/online; true",
}


def sandbox_trial(gpu: bool) -> tuple:
    """The review's attacks run inside job-sandbox (bubblewrap, a cgroup of its own where one can be delegated here,
    a stand-in that records the limits where not), then what is left outside looked for; the judge's strict reader
    on the link the job left; a symlinked folder and a signal to the launcher. Returns (passed or None when bwrap is
    not installed, what was printed)."""
    import signal
    import subprocess
    import uuid

    import sandbox_standins

    if shutil.which("bwrap") is None:
        return None, "== sandbox: not exercised: bubblewrap is not installed"
    folder = Path(tempfile.mkdtemp(prefix="sgemm-sandbox-trial-"))
    folder.chmod(0o755)
    mark = f"sgemmtrial{uuid.uuid4().hex[:8]}"
    runner, out, checkout = folder / "actions-runner", folder / "work" / "out", folder / "work" / "pr"
    for place in (runner, out, checkout):
        place.mkdir(parents=True)
    credentials = runner / ".credentials"
    credentials.write_text(f"the runner's key {mark}\n")
    cgroup = sandbox_standins.delegable_cgroup()
    settings = sandbox_standins.write_settings(folder, [runner], **({"cgroup": str(cgroup)} if cgroup else {}))
    lines = [f"== sandbox: {'a real cgroup below ' + str(cgroup) if cgroup else 'the stand-in cgroup (no cgroup v2 '}"
             f"{'' if cgroup else 'with memory and pids here)'}"]
    secret = uuid.uuid4().hex  # on the stand-in listener's command line alone
    listener = subprocess.Popen(["bash", "-c", f"exec -a 'Runner.Listener run --jitconfig {secret}' sleep 120"])
    ipc_before = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    left = []
    try:
        script = "; ".join(text.format(mark=mark, out=out, credentials=credentials)
                           for text in SANDBOX_ATTACKS.values())
        if gpu:
            script += ("; nvidia-smi -L > " + str(out) + "/cards; python3 -c 'import cupy; a = cupy.ones((512, 512));"
                       " print(float((a @ a).sum()))' > " + str(out) + "/matmul 2>&1; true")
        python = ["--ro", sys.prefix, "--env", f"PATH_PREFIX={Path(sys.executable).parent}",
                  *(("--env", f"PYTHONPATH={os.environ['PYTHONPATH']}") if os.environ.get("PYTHONPATH") else ()),
                  *(arg for site in os.environ.get("PYTHONPATH", "").split(":") if site for arg in ("--ro", site))]
        done = sandbox_standins.run(settings, "--ro", str(checkout), "--rw", str(out),
                                    *(("--gpu", "all", *python) if gpu else ()), "--", "bash", "-c", script,
                                    real_cgroup=cgroup is not None)
        lines.append(f"== sandbox: the attacks: exit {done.returncode}\n{done.stdout}{done.stderr}")
        time.sleep(0.5)
        left += [f"process {pid} of the job still running" for pid in marked_by_argv(mark)]
        if subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout != ipc_before:
            left.append("a SysV shared-memory segment")
        left += [f"{place}/{mark}" for place in ("/tmp", "/var/tmp", "/dev/shm", "/tmp/nvidia-mps")
                 if Path(place, mark).exists()]
        for name, what, sign in (("stolen", "the runner's key", "key"), ("jit", "the --jitconfig", secret),
                                 ("online", "the network", "")):
            if (out / name).exists() and sign in (out / name).read_text():
                left.append(f"{what} reached the job ({name})")
        from sgemm.rounds.session import RoundFileError, _read_lines
        try:
            _read_lines(out / "round-1.jsonl")
            left.append("the judge read the job's link to the runner's key")
        except RoundFileError as exc:
            lines.append(f"== the judge refused the job's link: {exc}")
        (out / "cache").symlink_to(runner)
        linked = sandbox_standins.run(settings, "--rw", str(out / "cache"), "--", "true")
        lines.append(f"== a symlinked folder given to the sandbox: exit {linked.returncode}: {linked.stdout.strip()}")
        if linked.returncode != 2:
            left.append("a symlinked folder was bound in")
        for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL):
            launcher = subprocess.Popen(sandbox_standins.command(
                settings, "--rw", str(out), "--", "bash", "-c",
                f"setsid -f bash -c 'exec -a {mark}sig sleep 600' >/dev/null 2>&1; touch {out}/up; sleep 600"),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                if (out / "up").exists():
                    break
                time.sleep(0.05)
            (out / "up").unlink(missing_ok=True)
            launcher.send_signal(number)
            launcher.wait(timeout=30)
            time.sleep(0.5)
            if marked_by_argv(f"{mark}sig"):
                left.append(f"the job's daemon outlived signal {number} to the launcher")
            lines.append(f"== signal {number} to the launcher: exit {launcher.returncode}")
        if gpu:
            said = {name: (out / name).read_text().strip() if (out / name).exists() else "-"
                    for name in ("cards", "matmul")}
            lines.append(f"== inside, the cards: {said['cards']}; a CuPy matmul: {said['matmul']}")
        lines.append("== left behind by the sandboxed job: " + ("; ".join(left) or "nothing"))
        return not left, "\n".join(lines)
    finally:
        listener.kill()
        listener.wait()
        for pid in marked_by_argv(mark):
            os.kill(pid, 9)
        shutil.rmtree(folder, ignore_errors=True)


def marked_by_argv(mark: str) -> list:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if mark.encode() in Path("/proc", entry, "cmdline").read_bytes() and int(entry) != os.getpid():
                found.append(int(entry))
        except OSError:
            pass
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the staged folder (its path is printed)")
    parser.add_argument("--gpu", action="store_true", help="bind every card in and run nvidia-smi and a CuPy matmul "
                        "inside the sandbox (a GPU box)")
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
        launched, text = sandbox_trial(arguments.gpu)
        print(text)
        verdict = verdict and launched is not False
        print(f"== trial: {'PASS' if verdict else 'FAIL'} (main step {first.returncode}, cleanup step "
              f"{second.returncode}, next job {'refused' if refused.returncode else 'accepted'}, sandbox "
              f"{ {True: 'contained it', False: 'FAILED', None: 'not exercised'}[launched] })")
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
