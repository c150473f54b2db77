""".github/runner/job-launch.py, run for real where the tests run as root with useradd: a throwaway job user is made
(and removed after), the launcher installed as install-hook.sh would install it, in a temporary folder. What it
runs sees a cleared environment and its own HOME, cannot write the checkouts, and whatever it leaves running
(`setsid -f`, a double fork) is ended by the job user's id, fails the job with 3 and flags the runner. Elsewhere the
refusals that need no root are checked. Every process a test starts is ended by its id."""

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from standins import LAUNCHER, RUNNER_UID, install, launch, processes_of


@pytest.fixture(scope="module")
def job_user():
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("needs root and useradd (a throwaway job user)")
    name = f"sgt{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    yield pwd.getpwnam(name)
    for pid in processes_of(pwd.getpwnam(name).pw_uid):
        os.kill(pid, signal.SIGKILL)
    subprocess.run(["userdel", name], check=False)


@pytest.fixture
def staged(job_user):
    tmp_path = Path(tempfile.mkdtemp(prefix="sgemm-launch-"))  # pytest's own folders are closed to other users
    tmp_path.chmod(0o755)
    launcher = install(tmp_path, "history", job_user.pw_name)
    job_dir = tmp_path / "work" / "sgemm-job"
    (job_dir / "report").mkdir(parents=True)
    checkout = tmp_path / "work" / "pr"
    checkout.mkdir()
    (checkout / "kernel.cu").write_text("the pull request's\n")
    for path in (job_dir, checkout, checkout / "kernel.cu", job_dir / "report"):
        os.chown(path, RUNNER_UID, RUNNER_UID)
    (tmp_path / "work").chmod(0o755)
    job_dir.chmod(0o700)
    yield launcher, job_dir, checkout, job_user
    shutil.rmtree(tmp_path)


def test_the_command_runs_as_the_job_user_with_a_cleared_environment(staged):
    launcher, job_dir, checkout, user = staged
    done = launch(launcher, job_dir, "bash", "-c", 'id -u; env | sort > "$JOB_DIR/report/env"; echo made > '
                  f'"$JOB_DIR/report/out"; echo x >> {checkout}/kernel.cu || echo read-only')
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1:] == [str(user.pw_uid), "read-only"], done.stdout
    env = dict(line.split("=", 1) for line in (job_dir / "report" / "env").read_text().splitlines() if "=" in line)
    assert not {"GITHUB_ENV", "BASH_ENV", "RUNNER_TEMP", "SUDO_UID"} & set(env)
    assert env["HOME"] == str(job_dir / "home") and env["HEAD_SHA"] == "abc"
    assert (checkout / "kernel.cu").read_text() == "the pull request's\n"
    assert (job_dir / "report" / "out").stat().st_uid == RUNNER_UID  # given back to the runner's user
    assert not (launcher.parent / "state" / "TAINTED").exists()


def test_what_outlives_the_command_is_ended_by_uid_fails_the_job_and_flags_the_runner(staged):
    launcher, job_dir, _, user = staged
    attack = ('setsid -f sleep 300 > /dev/null 2>&1; ( sleep 301 > /dev/null 2>&1 & ); '
              'for _ in $(seq 50); do pgrep -u "$(id -u)" -f "sleep 30[01]" | wc -l | grep -q 2 && break; '
              'sleep 0.1; done')
    try:
        done = launch(launcher, job_dir, "bash", "-c", attack)
        assert done.returncode == 3, done.stdout + done.stderr
        assert "(sleep 300) outlived the job's command: ended" in done.stdout
        assert "(sleep 301) outlived the job's command: ended" in done.stdout
        assert processes_of(user.pw_uid) == []
        assert "sleep 300" in (launcher.parent / "state" / "TAINTED").read_text()
    finally:
        for pid in processes_of(user.pw_uid):
            os.kill(pid, signal.SIGKILL)


def test_the_gate_runs_only_on_a_runner_marked_ephemeral(staged, tmp_path):
    _, job_dir, _, user = staged
    gate = install(tmp_path, "gate", user.pw_name)
    done = launch(gate, job_dir, "true")
    assert done.returncode == 2 and "ephemeral runner" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--env", "GITHUB_ENV=/x", "--", "true"], "only "),
    (["--", "true"], "not an absolute path under"),
])
def test_refusals(tmp_path, args, message):
    launcher = install(tmp_path, "history", "nobody")
    done = subprocess.run(["python3", "-I", str(launcher), "relative/dir", *args], capture_output=True, text=True,
                          check=False, env={"PATH": "/usr/bin:/bin", "SUDO_UID": "1000"})
    assert done.returncode == 2 and message in done.stdout, done.stdout


def test_the_copy_in_the_repository_refuses_to_run():
    done = subprocess.run(["python3", "-I", str(LAUNCHER), "/x", "--", "true"], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2 and "not installed" in done.stderr
