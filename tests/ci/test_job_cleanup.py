""".github/runner/job-cleanup.py, the containment of a GPU job's code, run for real: the gate's own main step (its
preamble, trap and end as the workflow has them; the gate itself replaced by the attack) and its cleanup step, in a
temporary HOME, runner folder and shared temp. The attack starts a `setsid -f` process and a double fork, writes
BASH_ENV to $GITHUB_ENV, a folder to $GITHUB_PATH and a forged output, plants ~/.gitconfig and a systemd unit,
appends to ~/.profile and writes outside its folder. Afterwards nothing of it is left that a following job could
see, both steps fail, and the runner is flagged so that its job-started hook refuses the next job.
Every process a test starts is ended by its id."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from standins import ATTACK, CLEANUP, alive, end_started, next_job_refused, run_job, stage

# What the gate's code does on an honest day: files in its own folder, a child it waits for.
HONEST = r"""
sleep 0.2 &
echo report > "$JOB_DIR/report/gate-report.md"
wait
"""


@pytest.fixture
def runner(tmp_path):
    staged = stage(tmp_path)
    yield staged
    end_started(staged)


def test_an_attack_leaves_nothing_a_following_job_can_see_and_fails_the_job(runner):
    first, second, outputs = run_job(runner, ATTACK)
    home, shared, pids = runner["home"], runner["shared"], runner["tmp"] / "pids"
    escaped, double = int((pids / "escaped").read_text()), int((pids / "double").read_text())
    # The job failed: its main step (3: left something behind, also in the exit code the report reads) and the
    # cleanup step, each saying what it found.
    assert first.returncode == 3, first.stdout + first.stderr
    assert (Path(runner["env"]["JOB_DIR"]) / "report" / "exit-code").read_text().strip() == "3"
    assert f"pid {escaped} (sleep 300) outlived the job: ended" in first.stdout
    assert "$GITHUB_ENV was written by the job's code (BASH_ENV=" in first.stdout
    assert "$GITHUB_PATH was written" in first.stdout and "$GITHUB_OUTPUT holds more" in first.stdout
    assert second.returncode == 1, second.stdout + second.stderr
    for planted in (".gitconfig", ".profile", "evil.service", "for-the-next-job", "inside"):
        assert f"{planted} was written by the job: removed" in second.stdout, planted
    # Nothing left: no process, nothing the runner would apply to the next step, no file.
    assert not alive(escaped) and not alive(double)
    assert runner["files"]["GITHUB_ENV"].read_text() == "" and runner["files"]["GITHUB_PATH"].read_text() == ""
    assert outputs["session"] != "1" and set(outputs) == {"session", "mark", "started"}
    assert not (home / ".gitconfig").exists() and not (home / ".profile").exists()
    assert not (home / ".config" / "systemd").exists() and list(shared.iterdir()) == []
    assert (home / ".old-note").read_text() == "from before the job\n"  # what was there before stays
    assert (runner["runner"] / "bin" / "Runner.Worker").exists()
    # The runner is flagged: the next job is refused until an administrator clears it.
    flag = runner["flag"].read_text()
    assert "BASH_ENV" in flag and ".gitconfig" in flag and f"pid {escaped}" in flag
    refused = next_job_refused(runner)
    assert refused.returncode != 0 and "an earlier job left something behind" in refused.stderr


def test_an_honest_job_passes_and_leaves_the_runner_as_it_was(runner):
    first, second, _ = run_job(runner, HONEST)
    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 0, second.stdout + second.stderr
    assert "nothing of the job is left" in second.stdout
    assert not runner["flag"].exists()
    assert (runner["home"] / ".profile").read_text() == "# the runner user's own\n"


def test_a_process_the_job_left_in_its_session_is_ended_by_the_cleanup_step(runner):
    """The main step's trap is the first line; a process of the session that it missed (here: the trap is
    taken out, as a job could not, to reach the second line) is ended by the cleanup step."""
    code = ("( bash -c 'echo $$ > \"$PIDS/double\"; exec sleep 300' > /dev/null 2>&1 & )\n"
            'for _ in $(seq 100); do [ -s "$PIDS/double" ] && break; sleep 0.05; done\ntrap - EXIT\n')
    first, second, _ = run_job(runner, code)
    double = int((runner["tmp"] / "pids" / "double").read_text())
    assert first.returncode == 0  # without its trap, the main step saw nothing
    assert second.returncode == 1 and f"pid {double} (sleep 300) outlived the job: ended" in second.stdout
    assert not alive(double)


def installed_cleanup(tmp_path) -> Path:
    (tmp_path / "state").mkdir()
    path = tmp_path / "job-cleanup.py"
    path.write_text(CLEANUP.read_text().replace("@STATE_DIR@", str(tmp_path / "state")))
    return path


@pytest.mark.parametrize("outputs, message", [
    ({"JOB_MARK": "x; rm -rf /", "JOB_SESSION": "4242", "JOB_STARTED": "1"}, "JOB_MARK is 'x; rm -rf /'"),
    # A forged output naming a session that still has its leader (init's, here) ends nothing by session.
    ({"JOB_MARK": "a" * 32, "JOB_SESSION": "1", "JOB_STARTED": "1"}, "leader is still running"),
    ({"JOB_MARK": "a" * 32, "JOB_SESSION": "-1", "JOB_STARTED": "1"}, "JOB_SESSION is '-1'"),
    ({"JOB_MARK": "a" * 32, "JOB_SESSION": "", "JOB_STARTED": "1"}, "JOB_SESSION is ''"),
])
def test_outputs_the_main_step_did_not_write_fail_the_job(tmp_path, outputs, message):
    done = subprocess.run(["python3", "-I", str(installed_cleanup(tmp_path)), "job", "--watch", str(tmp_path / "w"),
                           "--only-marked"], check=False, env={"PATH": os.environ["PATH"], **outputs},
                          capture_output=True, text=True)
    assert done.returncode == 1 and message in done.stdout and "tampered" in done.stdout
    assert (tmp_path / "state" / "TAINTED").exists()


def test_the_cleanup_step_will_not_end_its_own_session(tmp_path):
    session = os.getsid(0)
    done = subprocess.run(["python3", "-I", str(installed_cleanup(tmp_path)), "job", "--watch", str(tmp_path / "w"),
                           "--only-marked"], check=False, capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "JOB_MARK": "a" * 32, "JOB_SESSION": str(session),
                               "JOB_STARTED": str(time.time_ns())})
    assert done.returncode == 1 and "is this step's own session" in done.stdout


def test_a_job_whose_main_step_never_started_has_nothing_to_end(tmp_path):
    done = subprocess.run(["python3", "-I", str(installed_cleanup(tmp_path)), "job", "--only-marked"], check=False,
                          env={"PATH": os.environ["PATH"]}, capture_output=True, text=True)
    assert done.returncode == 0 and "did not start" in done.stdout


def test_the_copy_in_the_repository_refuses_to_run():
    done = subprocess.run(["python3", "-I", str(CLEANUP), "job"], check=False, capture_output=True, text=True)
    assert done.returncode == 2 and "not installed" in done.stderr
