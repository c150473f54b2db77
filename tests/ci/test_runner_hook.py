"""The GPU runners' job-started hook (.github/runner/job-started.sh): each runner lets through the one job it exists
for, from main, on its events, and refuses every other job, whatever labels that job's `runs-on` names. The runner's
environment variables are stood in; the hook is installed the way install-hook.sh installs it (its three settings
written into a copy)."""

import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / ".github" / "runner" / "job-started.sh"
INSTALLER = ROOT / ".github" / "runner" / "install-hook.sh"
REPO = "octo/gemm"


def installed(tmp_path, role, state_dir=None):
    state = state_dir or tmp_path / "state"
    state.mkdir(exist_ok=True)
    text = HOOK.read_text().replace("@ROLE@", role).replace("@REPOSITORY@", REPO).replace("@STATE_DIR@", str(state))
    path = tmp_path / f"job-started-{role}"
    path.write_text(text)
    return path


def run(hook, **env):
    return subprocess.run(["bash", str(hook)], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True)


def job(workflow, job_name, event, repository=REPO, ref="refs/heads/main"):
    return {"GITHUB_REPOSITORY": repository, "GITHUB_WORKFLOW_REF": f"{repository}/.github/workflows/{workflow}@{ref}",
            "GITHUB_JOB": job_name, "GITHUB_EVENT_NAME": event}


GATE = job("gpu-gate.yml", "gate", "pull_request_target")
HISTORY = [job("gpu-history.yml", "benchmark", event) for event in ("push", "schedule", "workflow_dispatch")]


@pytest.mark.parametrize("role, env", [("gate", GATE), *(("history", e) for e in HISTORY)])
def test_the_two_real_jobs_are_accepted(tmp_path, role, env):
    done = run(installed(tmp_path, role), **env)
    assert done.returncode == 0, done.stderr
    assert "accepted" in done.stdout


# Each: the runner it reaches, the job's environment, what the refusal names.
REFUSED = {
    "a new workflow file on pull_request, on the trusted runner": (
        "history", job("mine.yml", "benchmark", "pull_request"), "the job's workflow is"),
    "a new workflow file on push to a branch, with the history job's name": (
        "history", job("mine.yml", "benchmark", "push", ref="refs/heads/feature"), "the job's workflow is"),
    "a job added to ci.yml, on the untrusted runner": (
        "gate", job("ci.yml", "gate", "pull_request"), "the job's workflow is"),
    "the gate workflow as a pull request edits it (pull_request, its merge ref)": (
        "gate", job("gpu-gate.yml", "gate", "pull_request", ref="refs/pull/7/merge"), "the job's workflow is"),
    "the gate workflow from a branch other than main": (
        "gate", job("gpu-gate.yml", "gate", "pull_request_target", ref="refs/heads/main-old"), "the job's workflow is"),
    "the gate workflow spelled in other case": (
        "gate", job("GPU-Gate.yml", "gate", "pull_request_target"), "the job's workflow is"),
    "the gate workflow on pull_request rather than pull_request_target": (
        "gate", job("gpu-gate.yml", "gate", "pull_request"), "the event is 'pull_request'"),
    "another job of the gate workflow on the GPU runner": (
        "gate", job("gpu-gate.yml", "report", "pull_request_target"), "the job is 'report'"),
    "a fork's copy of the repository": (
        "gate", job("gpu-gate.yml", "gate", "pull_request_target", repository="mallory/gemm"), "repository"),
    "the history workflow on the untrusted runner": ("gate", HISTORY[0], "the job's workflow is"),
    "the gate workflow on the trusted runner": ("history", GATE, "the job's workflow is"),
    "the history workflow on an event it does not have": (
        "history", job("gpu-history.yml", "benchmark", "pull_request_target"), "the event is"),
    "the history workflow on workflow_run": (
        "history", job("gpu-history.yml", "benchmark", "workflow_run"), "the event is"),
    "no GitHub variables at all": ("gate", {}, "repository ''"),
    "an event name that holds two of the allowed ones": (
        "history", {**HISTORY[0], "GITHUB_EVENT_NAME": "push schedule"}, "the event is"),
    "an empty event name": ("history", {**HISTORY[0], "GITHUB_EVENT_NAME": ""}, "the event is"),
}


@pytest.mark.parametrize("attack", REFUSED)
def test_every_other_job_is_refused(tmp_path, attack):
    role, env, named = REFUSED[attack]
    done = run(installed(tmp_path, role), **env)
    assert done.returncode != 0, attack
    assert "refused" in done.stderr and named in done.stderr, done.stderr
    assert "::error::" in done.stdout  # shown on the job's page


def test_a_box_an_earlier_job_left_something_on_refuses_every_job_until_cleared(tmp_path):
    hook = installed(tmp_path, "gate")
    flag = tmp_path / "state" / "TAINTED"
    flag.write_text("pid 4242 (python3) outlived job 17\n")
    done = run(hook, **GATE)
    assert done.returncode != 0 and "pid 4242 (python3) outlived job 17" in done.stderr
    # The job's environment cannot point the hook at another state folder: its settings are in the installed copy.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert run(hook, **GATE, STATE_DIR=str(elsewhere)).returncode != 0
    flag.unlink()
    assert run(hook, **GATE).returncode == 0


def test_the_copy_in_the_repository_is_refused_as_it_is(tmp_path):
    done = run(HOOK, **GATE)
    assert done.returncode != 0 and "was not installed with a role" in done.stderr


@pytest.mark.parametrize("args, message", [
    (["runner", "octo/gemm", "/tmp"], "role is gate or history"),
    (["gate", "octo/gemm;rm -rf /", "/tmp"], "OWNER/REPO"),
    (["gate", "octo", "/tmp"], "OWNER/REPO"),
])
def test_the_installer_refuses_bad_arguments_before_touching_anything(args, message):
    done = subprocess.run(["bash", str(INSTALLER), *args], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr


def test_the_hook_names_the_jobs_the_workflows_really_run_on_the_gpu_runners():
    """Renaming a GPU job or moving it to another label without the hook would refuse the real job (or accept
    another): the hook's roles and the workflows must agree."""
    text = HOOK.read_text()
    for workflow, job_name, label, events in (("gpu-gate.yml", "gate", "gpu-untrusted", {"pull_request_target"}),
                                              ("gpu-history.yml", "benchmark", "gpu-trusted",
                                               {"push", "schedule", "workflow_dispatch"})):
        definition = yaml.safe_load((ROOT / ".github" / "workflows" / workflow).read_text())
        triggers = set(definition[True] if True in definition else definition["on"])
        gpu_jobs = [name for name, body in definition["jobs"].items() if "self-hosted" in str(body.get("runs-on"))]
        assert gpu_jobs == [job_name] and label in str(definition["jobs"][job_name]["runs-on"])
        assert triggers == events
        assert f'workflow="{workflow}"; job="{job_name}"; events="{" ".join(sorted(events))}"' in text


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling link"])
def test_a_flag_that_is_no_regular_file_refuses_at_once(tmp_path, kind):
    """Review L3/D10 and R1: a FIFO named TAINTED hung the hook; a folder must refuse as a file does."""
    import os

    hook = installed(tmp_path, "gate")
    flag = tmp_path / "state" / "TAINTED"
    {"fifo": lambda: os.mkfifo(flag), "folder": flag.mkdir,
     "dangling link": lambda: flag.symlink_to(tmp_path / "nowhere")}[kind]()
    done = subprocess.run(["bash", str(hook)], env={"PATH": "/usr/bin:/bin", **GATE}, capture_output=True, text=True,
                          timeout=10)
    assert done.returncode != 0 and "left something behind" in done.stderr
