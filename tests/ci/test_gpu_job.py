""".github/gpu-job.sh, sourced by every GPU job from its trusted checkout: everything a job could leave for the next
one moves under the job's own directory, no pip configuration is read, every path outside it that the job trusts
(its Python and that Python's library, the CUDA stack, the wheelhouse) is refused unless it exists and neither it,
nor a folder above it, nor anything below it could be changed by a job's user, and sgemm is installed from the
trusted checkout. The Python it makes the venv with is stood in by a script that records what it is asked (no
network, no CUDA), and so is `id`: the runner's user is uid 4242, which owns nothing here, unless a test says
otherwise."""

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".github" / "gpu-job.sh"

# `python -m venv DIR` makes DIR/bin/python, which logs every call and answers CuPy's location.
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    cp "$0" "$3/bin/python"
    exit 0
fi
case "$*" in *sysconfig*) echo "$FAKE_STDLIB"; exit 0 ;; esac
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
    (tmp_path / "stdlib").mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(real_home), "JOB_DIR": str(tmp_path / "job"),
           "SGEMM_PYTHON": str(python), "CALLS": str(tmp_path / "calls"), "FAKE_SITE": str(tmp_path / "site"),
           "FAKE_STDLIB": str(tmp_path / "stdlib"), "RUNNER_UID": "4242", "JOB_USER_UID": "",
           "XDG_CONFIG_HOME": str(real_home / ".config"), "PIP_CONFIG_FILE": str(real_home / "pip.conf")}
    return tmp_path, env, trusted


# `id -u` is the runner's user, `id -u NAME` the job user's (none unless JOB_USER_UID is set).
STAND_IN_ID = ('id() { if [ "$#" = 1 ]; then echo "$RUNNER_UID"; elif [ -n "$JOB_USER_UID" ]; then '
               'echo "$JOB_USER_UID"; else return 1; fi; }; ')


def source(env, trusted, then=PRINT):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", f'{STAND_IN_ID}. "{SCRIPT}" "{trusted}" && {then}'],
                          check=False, env=env, capture_output=True, text=True)


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


def trusted_place(tmp_path, env, place):
    """A path the job trusts, in a folder of its own under tmp_path/shared, with a file below it; the variable that
    names it and its value. The Python is a program in such a folder; its library, a folder."""
    folder = tmp_path / "shared" / place
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "module.py").write_text("")
    if place == "python":
        shutil.move(env["SGEMM_PYTHON"], folder / "python3")
        return "SGEMM_PYTHON", folder / "python3"
    return {"site": "SGEMM_CUDA_SITE", "wheels": "PIP_FIND_LINKS", "stdlib": "FAKE_STDLIB"}[place], folder


PLACES = ["site", "wheels", "python", "stdlib"]


@pytest.mark.parametrize("place", PLACES)
def test_a_trusted_path_no_job_can_change_is_accepted(job, place):
    tmp_path, env, trusted = job
    variable, path = trusted_place(tmp_path, env, place)
    (tmp_path / "shared").chmod(0o1777)  # a sticky folder open to all, as /tmp: no one renames another's entry
    done = source({**env, variable: str(path)}, trusted)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "calls").exists()  # pip ran


def _open_folder(tmp_path):
    (tmp_path / "open").mkdir()
    (tmp_path / "open").chmod(0o777)
    return tmp_path / "open"


# Each: how a trusted path is left open to a job (given the path, returns the path the job is then given), whether
# it takes a folder, and what the refusal names.
OPENINGS = {
    "missing (a job could create it)": (lambda tmp, path: (shutil.rmtree(path.parent) if path.is_file() else
                                                          shutil.rmtree(path)) or path, False, "(does not exist)"),
    "its folder writable by anyone (the tree swapped through it)": (
        lambda tmp, path: path.parent.chmod(0o777) or path, False, "(mode 777: writable by its group or anyone)"),
    "its folder writable by its group": (lambda tmp, path: path.parent.chmod(0o775) or path, False, "(mode 775"),
    "a file below it writable by anyone": (lambda tmp, path: (path / "inner" / "module.py").chmod(0o666) or path,
                                           True, "module.py (below"),
    "a link below it to a folder anyone can write": (
        lambda tmp, path: (path / "inner" / "cupy").symlink_to(_open_folder(tmp)) or path, True, "cupy (below"),
    "a link to it in a folder anyone can write": (
        lambda tmp, path: (_open_folder(tmp) / "link").symlink_to(path) or tmp / "open" / "link", False,
        "open (mode 777"),
}


@pytest.mark.parametrize("opening, place", [(opening, place) for opening in OPENINGS for place in PLACES
                                            if not (OPENINGS[opening][1] and place == "python")])  # a file
def test_a_trusted_path_a_job_could_change_is_refused_before_anything_is_installed(job, place, opening):
    tmp_path, env, trusted = job
    variable, path = trusted_place(tmp_path, env, place)
    change, _, named = OPENINGS[opening]
    given = change(tmp_path, path)
    done = source({**env, variable: str(given)}, trusted)
    assert done.returncode == 2, done.stdout + done.stderr
    if place == "python" and "missing" in opening:
        assert "no such program" in done.stdout, done.stdout
    else:
        assert "could be changed by a job" in done.stdout and named in done.stdout, done.stdout
    assert not (tmp_path / "calls").exists()  # no pip ran


@pytest.mark.parametrize("owner", ["RUNNER_UID", "JOB_USER_UID"])
def test_a_trusted_path_that_belongs_to_a_jobs_user_is_refused(job, owner):
    tmp_path, env, trusted = job
    variable, path = trusted_place(tmp_path, env, "site")
    uid = path.stat().st_uid
    done = source({**env, variable: str(path), owner: str(uid)}, trusted)
    assert done.returncode == 2 and f"belongs to uid {uid}, a job's user" in done.stdout, done.stdout
    assert not (tmp_path / "calls").exists()


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
