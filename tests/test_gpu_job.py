""".github/gpu-job.sh, sourced by every GPU job from its trusted checkout: everything a job could leave for the next
one moves under the job's own directory, no pip configuration is read, a CUDA stack the job could write is refused,
and sgemm is installed from the trusted checkout. The Python it makes the venv with is stood in by a script that
records what it is asked (no network, no CUDA)."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".github" / "gpu-job.sh"

# `python -m venv DIR` makes DIR/bin/python, which logs every call and answers CuPy's location.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    cp "$0" "$3/bin/python"
    exit 0
fi
echo "$*" >> "$CALLS"
case "$*" in *"import cupy"*) echo "$FAKE_SITE" ;; esac
exit 0
"""

PRINT = ('echo "HOME=$HOME"; echo "XDG_CACHE_HOME=$XDG_CACHE_HOME"; echo "XDG_CONFIG_HOME=$XDG_CONFIG_HOME"; '
         'echo "TMPDIR=$TMPDIR"; echo "CUPY_CACHE_DIR=$CUPY_CACHE_DIR"; echo "CUDA_CACHE_PATH=$CUDA_CACHE_PATH"; '
         'echo "PIP_CACHE_DIR=$PIP_CACHE_DIR"; echo "PIP_CONFIG_FILE=$PIP_CONFIG_FILE"; '
         'echo "PYTHONNOUSERSITE=$PYTHONNOUSERSITE"; echo "SGEMM_CUDA_SITE=$SGEMM_CUDA_SITE"')


@pytest.fixture
def job(tmp_path):
    real_home = tmp_path / "runner-home"
    real_home.mkdir()
    (real_home / ".gitconfig").write_text("[core]\n\thooksPath = /tmp/evil\n")  # planted by an earlier job
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    trusted = tmp_path / "base"
    trusted.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(real_home), "JOB_DIR": str(tmp_path / "job"),
           "SGEMM_PYTHON": str(python), "CALLS": str(tmp_path / "calls"), "FAKE_SITE": str(tmp_path / "site"),
           "XDG_CONFIG_HOME": str(real_home / ".config"), "PIP_CONFIG_FILE": str(real_home / "pip.conf")}
    return tmp_path, env, trusted


def source(env, trusted, then=PRINT):
    return subprocess.run(["bash", "-c", f'. "{SCRIPT}" "{trusted}" && {then}'], env=env, capture_output=True,
                          text=True)


def values(done) -> dict:
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


def test_every_place_a_job_could_leave_something_moves_under_its_own_directory(job):
    tmp_path, env, trusted = job
    done = source(env, trusted)
    assert done.returncode == 0, done.stderr
    seen, job_dir = values(done), env["JOB_DIR"]
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "TMPDIR", "CUPY_CACHE_DIR", "CUDA_CACHE_PATH",
                 "PIP_CACHE_DIR"):
        assert seen[name].startswith(job_dir + "/"), name
    assert not Path(seen["HOME"], ".gitconfig").exists()  # the planted file is not the job's
    assert seen["PIP_CONFIG_FILE"] == "/dev/null" and seen["PYTHONNOUSERSITE"] == "1"
    assert oct(os.stat(job_dir).st_mode & 0o777) == "0o700"


def test_sgemm_is_installed_from_the_trusted_checkout_into_a_venv_of_the_job(job):
    tmp_path, env, trusted = job
    assert source(env, trusted).returncode == 0
    calls = (tmp_path / "calls").read_text()
    assert f"-m pip install --quiet {trusted}[cuda13,test]" in calls
    assert "-e " not in calls  # a copy, not the checkout itself


def test_without_a_provisioned_stack_the_jobs_own_venv_is_the_cuda_site(job):
    tmp_path, env, trusted = job
    assert values(source(env, trusted))["SGEMM_CUDA_SITE"] == str(tmp_path / "site")


def test_a_cuda_site_the_job_could_write_is_refused_before_anything_is_installed(job):
    tmp_path, env, trusted = job
    site = tmp_path / "shared-site"
    (site / "cupy").mkdir(parents=True)
    done = source({**env, "SGEMM_CUDA_SITE": f"{tmp_path / 'missing'}:{site}"}, trusted)
    assert done.returncode == 2
    assert "::error::SGEMM_CUDA_SITE is writable by this job" in done.stdout and str(site) in done.stdout
    assert not (tmp_path / "calls").exists()  # no pip ran


def test_what_an_earlier_job_left_in_the_job_directory_is_gone(job):
    tmp_path, env, trusted = job
    stale = Path(env["JOB_DIR"]) / "venv" / "bin"
    stale.mkdir(parents=True)
    (stale / "sgemm").write_text("planted")
    stale.chmod(0o500)  # and made hard to remove
    assert source(env, trusted).returncode == 0
    assert not (stale / "sgemm").exists()


@pytest.mark.parametrize("unset, message", [("JOB_DIR", "JOB_DIR is not set"), (None, "the trusted checkout")])
def test_it_refuses_to_run_without_its_directory_or_its_checkout(job, unset, message):
    tmp_path, env, trusted = job
    if unset:
        env = {k: v for k, v in env.items() if k != unset}
        done = source(env, trusted)
    else:
        done = subprocess.run(["bash", "-c", f'. "{SCRIPT}"'], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and message in done.stderr
