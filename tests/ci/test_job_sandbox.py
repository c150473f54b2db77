"""The job sandbox (.github/runner/job-sandbox.py) run for real with bubblewrap: each property the security review's
attacks needed is shown holding, and each test fails when the defence it names is taken out of the launcher
(bwrap_argv, the refusals, the cgroup). The tests skip only where bwrap is not installed, and .ci/run sets
SGEMM_REQUIRE_SANDBOX=1 (and installs bubblewrap) so that in CI they never skip. Attacks that need root and a
throwaway user run where the tests run as root (CI does)."""

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / ".github" / "runner"))
import sandbox_standins  # noqa: E402

BWRAP = shutil.which("bwrap")
if BWRAP is None and os.environ.get("SGEMM_REQUIRE_SANDBOX") == "1":
    raise RuntimeError("SGEMM_REQUIRE_SANDBOX=1 but bubblewrap is not installed (apt-get install bubblewrap)")
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")
MODULE = sandbox_standins.load()


@pytest.fixture
def box(tmp_path):
    return make_box(tmp_path)


def make_box(tmp_path: Path) -> dict:
    """A runner's folder holding its key, a job folder with a read-only checkout and a writable output folder."""
    runner, checkout, out = tmp_path / "actions-runner", tmp_path / "work" / "pr", tmp_path / "work" / "out"
    for folder in (runner, checkout, out):
        folder.mkdir(parents=True)
    (runner / ".credentials").write_text("the runner's key\n")
    (checkout / "kernel.cu").write_text("the pull request's\n")
    tmp_path.chmod(0o755)
    settings = sandbox_standins.write_settings(tmp_path, [runner])
    return {"tmp": tmp_path, "runner": runner, "checkout": checkout, "out": out, "settings": settings}


def sandboxed(box, script: str, *options: str, settings=None, **kwargs):
    return sandbox_standins.run(settings or box["settings"], "--ro", str(box["checkout"]), "--rw", str(box["out"]),
                                *options, "--", "bash", "-c", script, **kwargs)


def token() -> str:
    return f"sgemm{uuid.uuid4().hex[:10]}"


def sleeper(seconds: int, mark: str) -> str:
    """A shell command whose process carries `mark` on its command line while it sleeps."""
    return f"bash -c 'exec -a {mark} sleep {seconds}'"


def running_with(text: str) -> list:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if text.encode() in Path("/proc", entry, "cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


def end_by_id(pids: list) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# --- the command line ---------------------------------------------------------------------------------------------

def test_bwrap_gets_every_isolation_flag_and_no_writable_system_folder(box):
    job = MODULE.parse(["--ro", str(box["checkout"]), "--rw", str(box["out"]), "--", "true"],
                       {"forbidden": [str(box["runner"])]})
    argv = MODULE.bwrap_argv(job, {"bwrap": "bwrap", "wheelhouse": None})
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts",
                 "--disable-userns", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv, flag
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    writable = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--bind", "--dev-bind")]
    assert writable == [str(box["out"])], writable  # no GPU asked for: no device bound writable either
    for place in ("/tmp", "/var/tmp", "/dev/shm", "/run"):
        assert argv[argv.index(place) - 1] == "--tmpfs", place
    assert "--share-net" not in argv and "/" not in [argv[i + 2] for i, arg in enumerate(argv) if arg == "--bind"]


def test_every_card_asked_for_is_bound_in_and_no_other(tmp_path):
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).write_text("")
    assert MODULE.gpu_nodes(["0", "2"], tmp_path) == [str(tmp_path / n) for n in
                                                      ("nvidia0", "nvidia2", "nvidiactl", "nvidia-uvm")]
    assert MODULE.gpu_nodes(["all"], tmp_path)[:3] == [str(tmp_path / f"nvidia{i}") for i in range(3)]
    with pytest.raises(MODULE.Refused, match="nvidia5"):
        MODULE.gpu_nodes(["5"], tmp_path)


# --- the attacks, run ----------------------------------------------------------------------------------------------

@needs_bwrap
def test_the_job_has_no_network(box):
    """Review L5/D26: approved code fetched unapproved code; the job had the network."""
    done = sandboxed(box, "cat /proc/net/dev;"
                          " python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 53), 2)'"
                          " && echo CONNECTED")
    interfaces = [line.split(":")[0].strip() for line in done.stdout.splitlines() if ":" in line
                  and not line.startswith(("Inter", " face", "job-sandbox"))]
    assert interfaces == ["lo"] and "CONNECTED" not in done.stdout, done.stdout + done.stderr


@needs_bwrap
def test_a_daemon_and_a_double_fork_die_with_the_job(box):
    """Review M1/D12: `setsid -f`, a double fork and nohup outlived the job's command."""
    mark = token()
    done = sandboxed(box, f"setsid -f {sleeper(600, mark)} >/dev/null 2>&1; ( {sleeper(601, mark)} >/dev/null 2>&1 & );"
                          f" nohup {sleeper(602, mark)} >/dev/null 2>&1 & echo pid $$; sleep 0.3")
    time.sleep(0.3)
    left = [pid for pid in running_with(mark) if pid != os.getpid()]
    end_by_id(left)
    assert done.returncode == 0 and not left, done.stdout + done.stderr
    assert "pid 2" in done.stdout or "pid 1" in done.stdout  # its own PID namespace


@needs_bwrap
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGKILL])
def test_a_signal_or_the_oom_killer_on_the_launcher_ends_the_job(box, number):
    """Review M1/D2/D3: SIGTERM, SIGHUP, SIGINT (what sudo relays) or the OOM killer (SIGKILL) took the launcher
    and left the job's daemon running."""
    mark = token()
    launcher = subprocess.Popen(sandbox_standins.command(
        box["settings"], "--rw", str(box["out"]), "--", "bash", "-c",
        f"setsid -f {sleeper(600, mark)} >/dev/null 2>&1; touch {box['out']}/started; {sleeper(600, mark)}"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for _ in range(200):
        if (box["out"] / "started").exists():
            break
        time.sleep(0.05)
    time.sleep(0.2)
    launcher.send_signal(number)
    out, _ = launcher.communicate(timeout=30)
    time.sleep(0.5)
    left = [pid for pid in running_with(mark) if pid != os.getpid()]
    end_by_id(left)
    assert not left, out
    if number != signal.SIGKILL:
        assert launcher.returncode == 3 and f"got signal {number}" in out, out


@needs_bwrap
def test_shared_memory_and_temp_files_stay_inside(box):
    """Review M3/D6/D16/L2: a SysV segment and files in /tmp, /var/tmp and /dev/shm outlived the job."""
    mark = token()
    before = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    done = sandboxed(box, f"ipcmk -M 1048576 >/dev/null && ipcs -m | grep -c 0x; touch /tmp/{mark} /var/tmp/{mark}"
                          f" /dev/shm/{mark}; mkdir -p /tmp/nvidia-mps && touch /tmp/nvidia-mps/{mark}")
    after = subprocess.run(["ipcs", "-m"], capture_output=True, text=True).stdout
    assert done.returncode == 0, done.stdout + done.stderr
    assert after == before
    for place in ("/tmp", "/var/tmp", "/dev/shm", "/tmp/nvidia-mps"):
        assert not Path(place, mark).exists(), place


@needs_bwrap
def test_the_root_and_the_checkouts_are_read_only_and_the_output_folder_alone_writable(box):
    """Review D11/H1: nothing but the job's own output folder can be changed from inside."""
    script = (f"for f in /usr/sgemm-x /etc/passwd {box['checkout']}/kernel.cu; do"
              f" (echo x >> $f) 2>/dev/null && echo WROTE $f; done; echo x > {box['tmp']}/x;"
              f" echo ok > {box['out']}/result.json")
    done = sandboxed(box, script)
    assert "WROTE" not in done.stdout and done.returncode == 0, done.stdout + done.stderr
    assert not (box["tmp"] / "x").exists()  # what the job writes beside its folder stays in its own /tmp
    assert (box["checkout"] / "kernel.cu").read_text() == "the pull request's\n"
    assert (box["out"] / "result.json").read_text() == "ok\n"


@needs_bwrap
def test_nothing_of_the_runner_is_reachable(box):
    """Review M5/D8: the job read .credentials by name, the file-command folder, and --jitconfig from /proc."""
    secret = token()
    listener = subprocess.Popen(["bash", "-c", f"exec -a 'Runner.Listener run --jitconfig {secret}' sleep 60"])
    try:
        done = sandboxed(box, f"cat {box['runner']}/.credentials; cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ';"
                              " echo; env")
    finally:
        listener.kill()
        listener.wait()
    assert "the runner's key" not in done.stdout and secret not in done.stdout, done.stdout
    assert "RUNNER_TEMP" not in done.stdout and "GITHUB_" not in done.stdout
    for inside, above in ((box["runner"], box["tmp"]),):
        for path in (inside, above):
            refused = sandbox_standins.run(box["settings"], "--ro", str(path), "--", "true")
            assert refused.returncode == 2 and "the runner's own" in refused.stdout, refused.stdout


@needs_bwrap
def test_no_privilege_can_be_gained_inside(box):
    """Review L1/D7: no no_new_privs; a setuid binary was one exec away. Inside: no capabilities, no new
    privileges, no new user namespace."""
    done = sandboxed(box, "grep -E '^(NoNewPrivs|CapEff|CapBnd)' /proc/self/status; unshare --user true && echo NESTED")
    fields = dict(line.split(":\t") for line in done.stdout.splitlines() if ":\t" in line)
    assert fields["NoNewPrivs"] == "1" and int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert "NESTED" not in done.stdout


@needs_bwrap
def test_the_environment_is_cleared_and_loader_variables_refused(box):
    """Review D14/R7: GITHUB_*, BASH_ENV, LD_* of the runner never reach the job; --env LD_PRELOAD is refused."""
    env = dict(os.environ, GITHUB_ENV="/x", BASH_ENV="/x", LD_PRELOAD="/x", ACTIONS_RUNTIME_TOKEN="t")
    done = subprocess.run(sandbox_standins.command(box["settings"], "--", "env"), env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and not {"GITHUB_ENV", "BASH_ENV", "LD_PRELOAD", "ACTIONS_RUNTIME_TOKEN"} & {
        line.split("=")[0] for line in done.stdout.splitlines()}, done.stdout
    refused = sandbox_standins.run(box["settings"], "--env", "LD_PRELOAD=/x", "--", "true")
    assert refused.returncode == 2 and refused.stdout.count("\n") == 1


@needs_bwrap
def test_the_card_a_gate_gives_each_round_reaches_the_job(box):
    """On four H100s every round of a sandboxed gate ended ERROR: the launcher refused the CUDA_VISIBLE_DEVICES the
    gate sets to give a round's process its own card."""
    from sgemm.rounds.session import VISIBLE_VARIABLE

    done = sandbox_standins.run(box["settings"], "--env", f"{VISIBLE_VARIABLE}=GPU-0000", "--", "env")
    assert done.returncode == 0 and f"{VISIBLE_VARIABLE}=GPU-0000" in done.stdout.splitlines(), done.stdout


@needs_bwrap
def test_the_compile_cache_a_gate_gives_its_rounds_reaches_the_job(box):
    """Each sandboxed round starts with an empty home: the gate names a cache folder of its own, which the round must
    see in its environment and be able to write, or every round compiles every build again."""
    from sgemm.rounds.session import COMPILE_CACHES

    cache = box["out"] / "compile-cache"
    cache.mkdir()
    given = [arg for name in COMPILE_CACHES for arg in ("--env", f"{name}={cache}")]
    done = sandbox_standins.run(box["settings"], "--rw", str(cache), *given, "--", "bash", "-c",
                                f"env; touch {cache}/cubin")
    assert done.returncode == 0, done.stdout + done.stderr
    assert all(f"{name}={cache}" in done.stdout.splitlines() for name in COMPILE_CACHES)
    assert (cache / "cubin").is_file()


@needs_bwrap
def test_asv_may_rewrite_the_machine_file_it_is_given_and_the_runners_is_refused(box):
    """asv rewrites ~/.asv-machine.json as it starts: bound read-only, the unpaired gate's asv failed in the
    sandbox before it measured anything (an H200 box, lab/2026-11-28-sandbox-gpu). The gate gives its own copy; a
    path of the runner's is refused."""
    given = box["out"] / "asv-machine.json"
    given.write_text('{"version": 1}')
    done = sandbox_standins.run(box["settings"], "--machine-file", str(given), "--", "bash", "-c",
                                'echo \'{"version": 1, "box": {}}\' > "$HOME/.asv-machine.json"')
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(given.read_text()) == {"version": 1, "box": {}}
    runners = box["runner"] / "asv-machine.json"
    runners.write_text('{"version": 1}')
    done = sandbox_standins.run(box["settings"], "--machine-file", str(runners), "--", "true")
    assert done.returncode == 2 and "the runner's own" in done.stdout


@needs_bwrap
def test_a_link_given_as_a_folder_is_refused_and_nothing_changes(box, tmp_path):
    """Review H1/D1: a link in the job folder handed a root-owned tree to the runner's user. Nothing is chowned now,
    and a link given to the sandbox is refused."""
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "shadow").write_text("root's\n")
    (box["out"] / "cache").symlink_to(victim)
    before = [(p.stat().st_uid, p.stat().st_mode) for p in (victim, victim / "shadow")]
    done = sandbox_standins.run(box["settings"], "--rw", str(box["out"] / "cache"), "--", "true")
    assert done.returncode == 2 and "a link" in done.stdout and done.stdout.count("\n") == 1
    assert before == [(p.stat().st_uid, p.stat().st_mode) for p in (victim, victim / "shadow")]


@needs_bwrap
def test_the_job_runs_in_its_cgroup_with_both_limits(box):
    """Review M1/D22: no memory.max, no pids.max. (The stand-in records them; test_the_kernel_enforces_the_limits
    checks the kernel where a cgroup can be delegated.)"""
    done = sandboxed(box, "true")
    job = next((box["tmp"] / "cgroup").iterdir())
    assert done.returncode == 0
    assert (job / "memory.max").read_text() == f"{512 * 2**20}\n" and (job / "pids.max").read_text() == "256\n"
    assert (job / "cgroup.procs").read_text().strip().isdigit() and (job / "killed").exists()


# --- failing closed ------------------------------------------------------------------------------------------------

def fake_bwrap(folder: Path, version: str, works: bool) -> str:
    path = folder / f"bwrap-{uuid.uuid4().hex[:6]}"
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'bubblewrap {version}'; exit 0; }}\n"
                    + ("exec " + (BWRAP or "false") + ' "$@"\n' if works else
                       "echo 'bwrap: No permissions to creating new namespace' >&2; exit 1\n"))
    path.chmod(0o755)
    return str(path)


@pytest.mark.parametrize("case", ["missing", "too old", "no user namespaces", "no settings", "no cgroup",
                                  "cgroup without memory"])
def test_bad_hosts_fail_closed_in_one_line_and_run_nothing(box, case):
    """A sandbox that cannot be made as it must is never replaced by a run without it."""
    changes = {"missing": {"bwrap": str(box["tmp"] / "no-bwrap")},
               "too old": {"bwrap": fake_bwrap(box["tmp"], "0.4.1", True)},
               "no user namespaces": {"bwrap": fake_bwrap(box["tmp"], "0.8.0", False)}}.get(case, {})
    settings = sandbox_standins.write_settings(box["tmp"], [box["runner"]], **changes)
    ran = box["out"] / "ran"
    if case == "no settings":
        settings = box["tmp"] / "absent.json"
    if case in ("no cgroup", "cgroup without memory"):
        parent = box["tmp"] / "cg"
        parent.mkdir()
        if case == "cgroup without memory":
            (parent / "cgroup.controllers").write_text("cpu io\n")
        settings = sandbox_standins.write_settings(box["tmp"], [box["runner"]], cgroup=str(parent))
        if BWRAP is None:
            pytest.skip("bubblewrap is not installed: the cgroup is checked after it")
    done = sandbox_standins.run(settings, "--rw", str(box["out"]), "--", "touch", str(ran),
                                real_cgroup=case.startswith(("no cgroup", "cgroup")))
    assert done.returncode == 2 and not ran.exists(), done.stdout + done.stderr
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("::error::job-sandbox: ") and not done.stderr


# --- the kernel's part, where it can be exercised -------------------------------------------------------------------

def unified_cgroup():
    for root in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")):
        if (root / "cgroup.procs").is_file() and os.access(root, os.W_OK):
            return root
    return None


@pytest.mark.skipif(unified_cgroup() is None, reason="no writable cgroup v2 here (run as root on a v2 host)")
def test_cgroup_kill_ends_every_process_of_the_job_at_once():
    """The launcher's end of the job: cgroup.kill, whatever the processes did to their sessions and groups."""
    cgroup = object.__new__(MODULE.JobCgroup)
    cgroup.path = unified_cgroup() / f"sgemm-test-{uuid.uuid4().hex[:8]}"
    cgroup.path.mkdir()
    if not (cgroup.path / "cgroup.kill").exists():
        cgroup.path.rmdir()
        pytest.skip("this kernel has no cgroup.kill (5.14 or later)")
    mark = token()
    try:
        started = subprocess.Popen(["bash", "-c", f"setsid -f {sleeper(600, mark)}; {sleeper(601, mark)}"],
                                   preexec_fn=cgroup.enter)  # noqa: PLW1509
        time.sleep(0.5)
        assert len(running_with(mark)) >= 2
        assert cgroup.kill() and cgroup.remove()
        started.wait(timeout=10)
        time.sleep(0.2)
        assert not running_with(mark)
    finally:
        end_by_id(running_with(mark))
        if cgroup.path.exists():
            cgroup.path.rmdir()


@needs_bwrap
@pytest.mark.skipif(sandbox_standins.delegable_cgroup() is None,
                    reason="no cgroup v2 with memory and pids to delegate here (a v1 or hybrid host)")
@pytest.mark.parametrize("attack", ["fills its /tmp", "fork bomb"])
def test_the_kernel_enforces_the_limits(box, attack):
    """Review D22 and the issue's bad input: a job that fills its tmpfs, or forks without end, is ended by the
    kernel in its cgroup, with a one-line reason, and nothing of it is left."""
    settings = sandbox_standins.write_settings(box["tmp"], [box["runner"]], memory_max=str(64 * 2**20),
                                               pids_max="32", cgroup=str(sandbox_standins.delegable_cgroup()))
    script = {"fills its /tmp": "dd if=/dev/zero of=/tmp/fill bs=1M count=256 2>/dev/null; sleep 1",
              "fork bomb": "for i in $(seq 100); do sleep 30 & done; wait"}[attack]
    done = sandbox_standins.run(settings, "--", "bash", "-c", script, real_cgroup=True)
    assert done.returncode == 3, done.stdout + done.stderr
    assert ("ran out of memory" if attack == "fills its /tmp" else "pids.max") in done.stdout


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None,
                    reason="needs root and useradd for a throwaway runner user (CI runs as root)")
def test_an_unprivileged_runner_user_gets_the_same_sandbox():
    """The runner's user is no root and has no sudo: the sandbox is made by that user alone, and the job cannot
    read a file of that user outside what was given."""
    folder = Path(tempfile.mkdtemp(prefix="sgemm-sandbox-user-"))
    box = make_box(folder)
    name = f"sgr{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        user = pwd.getpwnam(name)
        for path in (box["tmp"], *box["tmp"].rglob("*")):
            os.chown(path, user.pw_uid, user.pw_gid)
        (box["runner"] / ".credentials").chmod(0o600)
        box["runner"].chmod(0o700)
        done = subprocess.run(["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
                               *sandbox_standins.command(box["settings"], "--rw", str(box["out"]), "--", "bash", "-c",
                                                         f"id -u; cat {box['runner']}/.credentials;"
                                                         " cat /proc/net/dev | grep -c :; touch "
                                                         f"{box['out']}/mine")],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the runner's key" not in done.stdout and (box["out"] / "mine").stat().st_uid == user.pw_uid
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)  # the throwaway user's own processes alone
        subprocess.run(["userdel", name], check=False)
        shutil.rmtree(folder)
