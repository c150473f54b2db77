"""install-hook.sh run for real, as root, for a throwaway runner user, every system path under a temporary prefix
(SGEMM_INSTALL_ROOT): it installs the hook, the cleanup, the sandbox and its settings root-owned, writes no sudo rule
and makes no job user, keeps the runner's folders out of the sandbox, and refuses a runner user that cannot run
bubblewrap (review R14, R15: the installer was untested)."""

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
INSTALLER = ROOT / ".github" / "runner" / "install-hook.sh"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("bwrap") is None,
    reason="needs root, useradd and bubblewrap (CI runs as root and installs bubblewrap)")


@pytest.fixture
def runner():
    name = f"sgi{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    folder = Path(tempfile.mkdtemp(prefix="sgemm-install-"))
    folder.chmod(0o755)
    runner_dir = folder / "actions-runner"
    runner_dir.mkdir()
    (runner_dir / "run.sh").write_text("#!/bin/sh\n")
    user = pwd.getpwnam(name)
    for path in (runner_dir, runner_dir / "run.sh"):
        os.chown(path, user.pw_uid, user.pw_gid)
    try:
        yield {"name": name, "folder": folder, "dir": runner_dir, "uid": user.pw_uid}
    finally:
        subprocess.run(["userdel", name], check=False)
        subprocess.run(["chattr", "-R", "-a", str(folder)], capture_output=True, check=False)
        shutil.rmtree(folder)


def install(runner, **env):
    return subprocess.run(["bash", str(INSTALLER), "gate", "octo/gemm", str(runner["dir"])], capture_output=True,
                          text=True, timeout=120, env={"PATH": os.environ["PATH"],
                                                       "SGEMM_INSTALL_ROOT": str(runner["folder"] / "root"), **env})


def test_the_installer_installs_the_sandbox_root_owned_and_no_sudo_rule(runner):
    done = install(runner, SGEMM_JOB_CGROUP="/sys/fs/cgroup/stand-in", SGEMM_JOB_PIDS_MAX="512")
    assert done.returncode == 0, done.stdout + done.stderr
    root = runner["folder"] / "root"
    sandbox = root / "usr/local/libexec/sgemm-runner/job-sandbox"
    for path in (sandbox, root / "etc/sgemm-runner/sandbox.json", runner["dir"] / ".env",
                 root / "usr/local/libexec/sgemm-runner/job-cleanup.py"):
        info = path.stat()
        assert info.st_uid == 0 and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH), path
    settings = json.loads((root / "etc/sgemm-runner/sandbox.json").read_text())
    assert str(runner["dir"]) in settings["forbidden"] and settings["pids_max"] == "512"
    assert settings["cgroup"] == "/sys/fs/cgroup/stand-in" and settings["bwrap"] == shutil.which("bwrap")
    assert f'SETTINGS = Path("{root}/etc/sgemm-runner/sandbox.json")' in sandbox.read_text()
    assert not (root / "etc/sudoers.d").exists() and not (root / "usr/local/libexec/sgemm-runner/job-launch").exists()
    assert "ACTIONS_RUNNER_HOOK_JOB_STARTED=" in (runner["dir"] / ".env").read_text()
    assert "useradd" not in INSTALLER.read_text()  # no job user: the sandbox's user namespace stands in for it


def test_the_default_cgroup_is_the_runner_users_own(runner):
    assert install(runner).returncode == 0
    settings = json.loads((runner["folder"] / "root/etc/sgemm-runner/sandbox.json").read_text())
    uid = runner["uid"]
    assert settings["cgroup"] == f"/sys/fs/cgroup/user.slice/user-{uid}.slice/user@{uid}.service/sgemm-jobs"


def test_a_runner_user_that_cannot_run_bubblewrap_is_refused(runner, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    tmp_path.chmod(0o755)
    done = install(runner, PATH=f"{fake}:{os.environ['PATH']}")
    assert done.returncode == 2 and "cannot make a user namespace" in done.stderr and "AppArmor" in done.stderr
    assert not (runner["folder"] / "root").exists() and not (runner["dir"] / ".env").exists()  # nothing changed
