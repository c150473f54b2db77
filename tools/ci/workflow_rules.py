"""This project's rules for its GitHub workflows, which zizmor cannot express: they guard the self-hosted GPU runners.

Each rule takes a workflow (as `load` reads it) and returns its problems, one line each; RULES names them:
- runners: who reaches the self-hosted GPU labels, on which events, with which commit; a pull request's content
  runs only through the runner's sandbox (job-sandbox.py);
- no token: no token reaches a self-hosted job;
- ends its processes: such a job ends its processes and removes its files;
- code only through checkout: code enters through actions/checkout only;
- untrusted data: no $GITHUB_ENV in what a pull request triggers, nothing downloaded is executed or evaluated;
- write token: a job that may write runs no project code;
- approval: the approval checks the label's sender for exactly the roles that may push and never fails open, and a
  push revokes it;
- contains the job: a GPU job's main step is marked, read whole and trapped, and its cleanup step runs the runner's
  root-owned job-cleanup.py on the main step's outputs;
- pushes results alone: the job that pushes adds what it downloaded under results/ and nothing else;
- sandboxed: no sudo on a GPU runner; the gate runs with SGEMM_SANDBOX and --gpus, the history's benchmarks through
  the runner's sandbox (job-sandbox.py) with every card bound in;
- cpu check: the gate's CPU job is hosted, read-only, and fails towards the GPU.
Labels count as GitHub matches them (any case), and a job on anything but one GitHub-hosted image counts as
self-hosted. tests/ci/test_workflows.py holds every workflow to every rule and shows each rule failing on the attack it
is there for.

Usage, from the repository root: python -m tools.ci.workflow_rules [WORKFLOW.yml ...]
(default: every workflow in .github/workflows). Prints each problem as FILE: RULE: PROBLEM. Exit status: 0 none,
1 problems (listed), 2 a file that cannot be read as a workflow.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

from tools.parser import ToolParser

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"

TRUSTED_EVENTS = {"push", "schedule", "workflow_dispatch"}  # only people with write access fire these
PR_EVENTS = {"pull_request", "pull_request_target", "workflow_run"}  # a pull request can fire these
APPROVAL_IF = "github.event.action == 'labeled' && github.event.label.name == 'gpu-gate-approved'"
BASE_COMMIT, APPROVED_HEAD = "${{ github.sha }}", "${{ github.event.pull_request.head.sha }}"
ALWAYS = {"always()", "${{ always() }}"}

TOKEN = re.compile(r"\bsecrets\b|github\.token|github\s*\[\s*\\?['\"]token\\?['\"]\s*\]|\bGITHUB_TOKEN\b"
                   r"|toJSON\(\s*github\s*\)|\{\{\s*github\s*\}\}", re.I)
FETCHES = re.compile(r"\bgit\b[^\n;&|]*\b(fetch|pull|clone|checkout|switch|worktree|submodule)\b"
                     r"|\bgh\s+(pr\s+checkout|repo\s+clone)|refs/pull/|pull/[^\s/]+/(head|merge)\b"
                     r"|\b(curl|wget)\b|/(tarball|zipball|contents)/")
EXECUTES = re.compile(r"(^|[;&|(]|\bthen|\bdo)\s*(source|\.|bash|sh|zsh|python3?|node|perl|eval|exec)\s+\"?\$"
                      r"|^\s*\"?\$|\bchmod\s+\S*x|\|\s*(bash|sh|zsh|python3?|node|perl|source)\b"
                      r"|\bpip3?\s+install\b[^\n]*(\$|incoming|\.whl)|<\(", re.M)
# What a script of a workflow a pull request fires must never do with text: evaluate it, or expand a variable
# whose name it holds (${!name}: an artifact naming GITHUB_ENV reaches it without spelling it).
EVALUATES = re.compile(r"(^|[;&|(]|\bthen|\bdo)\s*eval\b|\$\{!", re.M)
HOSTED_IMAGE = re.compile(r"(ubuntu|windows|macos)-[\w.-]+")
PROJECT_CODE = re.compile(r"(^|[;&|(`]|\bthen|\bdo)\s*(pip3?|python3?|sgemm|asv|npm|npx|node|make)\b", re.M)


def load(text: str) -> dict:
    workflow = yaml.safe_load(text)
    if True in workflow:  # YAML 1.1 reads the key `on` as true
        workflow["on"] = workflow.pop(True)
    return workflow


def events(workflow: dict) -> set[str]:
    on = workflow["on"]
    return {on} if isinstance(on, str) else set(on)


def runner_labels(job: dict) -> list[str]:
    """The job's labels as GitHub matches them: case does not count."""
    runs_on = job.get("runs-on", [])
    if isinstance(runs_on, dict):
        runs_on = runs_on.get("labels", [])
    return [label.lower() for label in ([runs_on] if isinstance(runs_on, str) else list(runs_on))]


def on_own_runner(job: dict) -> bool:
    """Whether the job may land on a self-hosted runner: any labels but one GitHub-hosted image (a job need not
    name `self-hosted` to be given one whose labels it names)."""
    labels = runner_labels(job)
    return not (len(labels) == 1 and HOSTED_IMAGE.fullmatch(labels[0]) and "${{" not in labels[0])


def uses(step: dict) -> str:
    return step.get("uses", "").split("@")[0]


def self_hosted(workflow: dict):
    return [(name, job) for name, job in workflow["jobs"].items() if on_own_runner(job)]


def steps(workflow: dict):
    return [(name, step) for name, job in workflow["jobs"].items() for step in job.get("steps", [])]


# --- RULES ---------------------------------------------------------------------------------------------------------

def rule_runners(workflow: dict) -> list[str]:
    """main's code on gpu-trusted; on gpu-untrusted, the base branch's definition (pull_request_target), on the
    approval label's event alone, once who approved is checked, checking out the base commit and the approved head."""
    problems, on = [], events(workflow)
    for name, job in workflow["jobs"].items():
        labels = runner_labels(job)
        kind = {"gpu-trusted", "gpu-untrusted"} & set(labels)
        if not on_own_runner(job):
            continue
        if any("${{" in label for label in labels) and not kind:
            problems.append(f"{name}: runs-on is an expression: is it self-hosted?")
        elif "self-hosted" not in labels:
            problems.append(f"{name}: on {labels}, which a self-hosted runner may answer without `self-hosted`")
        elif kind == {"gpu-trusted"}:
            if on - TRUSTED_EVENTS:
                problems.append(f"{name}: gpu-trusted reachable on {sorted(on - TRUSTED_EVENTS)}")
        elif kind == {"gpu-untrusted"}:
            if on != {"pull_request_target"}:
                problems.append(f"{name}: gpu-untrusted on {sorted(on)}, a definition the pull request can edit")
            if " ".join(str(job.get("if", "")).split()) not in (APPROVAL_IF, GATE_IF) \
                    or "approve" not in job.get("needs", []):
                problems.append(f"{name}: runs on more than a checked approval (needs: approve, if: {APPROVAL_IF})")
            for step in job["steps"]:
                given = step.get("with", {})
                wanted = {"base": BASE_COMMIT, "pr": APPROVED_HEAD}.get(given.get("path"))
                if uses(step) == "actions/checkout" and (given.get("ref") != wanted or "repository" in given):
                    problems.append(f"{name}: checks out {given.get('ref')} into {given.get('path')!r}: base/ holds "
                                    "the base commit and pr/ the approved head, nothing else")
            main = " ".join(step.get("run", "") for step in job["steps"])
            if not re.search(r"(^|\s)\. base/\.github/gpu-job\.sh base\b", main) or "pr/.github" in main:
                problems.append(f"{name}: the job's isolation (gpu-job.sh) must come from base/ and install from it")
            problems += [f"{name}: {line[:80]!r} runs the pull request's content outside the runner's sandbox "
                         f"({LAUNCH.strip()} ...)" for line in _unlaunched(main)]
        else:
            problems.append(f"{name}: self-hosted needs exactly one of the labels gpu-trusted, gpu-untrusted")
    return problems


SANDBOX = "/usr/local/libexec/sgemm-runner/job-sandbox"  # the runner's root-owned bubblewrap launcher
# The judge runs as the runner's user; what runs the pull request's content goes through SANDBOX (sgemm/contained.py).
LAUNCH = f"SGEMM_SANDBOX={SANDBOX} sgemm gate "
CPU_CHECK_CONDITION = "needs.cpu-check.outputs.gpu_needed != 'false'"  # anything but a plain false takes the GPU
GATE_IF = f"{APPROVAL_IF} && {CPU_CHECK_CONDITION}"
RUNS_CONTENT = re.compile(r"\b(sgemm|asv|python3?|pip3?|nvcc|make|cmake)\b|\bpr/")


def _unlaunched(script: str) -> list[str]:
    """The command lines of a script (continuations joined) that run what a checkout holds (sgemm, asv, python,
    pip, a build, anything of pr/) other than through the launcher; git, the isolation script and the runner's
    installed cleanup aside."""
    lines = re.sub(r"\\\n\s*", " ", script).splitlines()
    return [line.strip() for line in lines
            if RUNS_CONTENT.search(line.replace(CLEANUP, "")) and not line.strip().startswith(
                (LAUNCH, "#", ". base/.github/gpu-job.sh", "merge_base=$(git -C pr merge-base"))]


def rule_no_token(workflow: dict) -> list[str]:
    return [f"{name}: a token reaches a self-hosted job ({match.group()})" for name, job in self_hosted(workflow)
            if (match := TOKEN.search(json.dumps(job)))]


def rule_ends_its_processes(workflow: dict) -> list[str]:
    """Each step in a session of its own (setsid shell) is ended by an `if: always()` step, and the last step,
    `if: always()`, removes the job's files: whatever happened, nothing is left for the next job on the box."""
    problems = []
    for name, job in self_hosted(workflow):
        sessions = [step for step in job["steps"] if str(step.get("shell", "")).startswith("setsid ")]
        ended = [json.dumps(step.get("env", {})) for step in job["steps"] if step.get("if") in ALWAYS]
        problems += [f"{name}: runs nothing in a session of its own (shell: setsid ...)"] if not sessions else []
        problems += [f"{name}: no `if: always()` step ends the session of {step.get('name')!r}" for step in sessions
                     if not any(f"steps.{step.get('id')}.outputs.session" in env for env in ended)]
        if job["steps"][-1].get("if") not in ALWAYS or "rm -rf" not in job["steps"][-1].get("run", ""):
            problems.append(f"{name}: the last step must remove the job's files, if: always()")
    return problems


GPU_JOB_ACTIONS = {"actions/checkout", "actions/upload-artifact"}  # what else a GPU job uses runs on the box too


def rule_code_only_through_checkout(workflow: dict) -> list[str]:
    privileged = events(workflow) & {"pull_request_target", "workflow_run"}
    foreign = [f"{name}: uses {uses(step)} on a GPU runner (only {sorted(GPU_JOB_ACTIONS)})"
               for name, job in self_hosted(workflow) for step in job.get("steps", [])
               if uses(step) and uses(step) not in GPU_JOB_ACTIONS]
    writers = {name for name, job in workflow["jobs"].items()
               if "gpu-untrusted" not in runner_labels(job) and may_write(job, workflow)}
    extra = [f"{name}: checks out {key} of the pull request, fetched from where its files say" for name, step in
             steps(workflow) if uses(step) == "actions/checkout" and events(workflow) & PR_EVENTS
             for key in ("submodules", "lfs") if str(step.get("with", {}).get(key, "false")).lower() != "false"]
    return foreign + extra + ([f"{name}: {step.get('name')!r} fetches code itself ({match.group()})"
             for name, step in steps(workflow) if (match := FETCHES.search(step.get("run", "")))]
            + [f"{name}: checks out code beside a token that may write" for name, step in steps(workflow)
               if privileged and name in writers and uses(step) == "actions/checkout"])


def may_write(job: dict, workflow: dict) -> bool:
    """Whether the job's token may write: its permissions, or the workflow's, or GitHub's default (which may)."""
    permissions = job.get("permissions", workflow.get("permissions"))
    if permissions is None or permissions == "write-all":
        return True
    return isinstance(permissions, dict) and "write" in permissions.values()


def rule_sandboxed(workflow: dict) -> list[str]:
    """No sudo and no root at job time on a GPU runner; the history's benchmarks run through the runner's sandbox as
    the gate's do: every `sgemm history|bisect|confirm` and `asv` line of a main step starts with `sandboxed`, a
    function of that step that runs SANDBOX with every card bound in (--gpu all) and no fallback."""
    problems = []
    for name, job in self_hosted(workflow):
        for step in job["steps"]:
            if re.search(r"\bsudo\b|\bjob-launch\b", step.get("run", "")):
                problems.append(f"{name}: {step.get('name')!r} runs something as root (sudo): the sandbox needs none")
        for step in job["steps"]:
            path = str(step.get("with", {}).get("path", ""))
            if uses(step) == "actions/upload-artifact" and "gpu-untrusted" in runner_labels(job) and \
                    path.rstrip("/") != "${{ runner.temp }}/sgemm-job/report":
                problems.append(f"{name}: uploads {path}, not the judge's report folder alone")
        main = next((step for step in job["steps"] if step.get("id") == "main"), {})
        script = re.sub(r"\\\n\s*", " ", main.get("run", ""))
        if "gpu-untrusted" in runner_labels(job):
            if not re.search(rf"^SGEMM_SANDBOX={re.escape(SANDBOX)} sgemm gate .*--gpus ", script, re.M):
                problems.append(f"{name}: the gate must run with SGEMM_SANDBOX={SANDBOX} and --gpus")
            continue
        function = re.search(r"^sandboxed\(\) \{(.*?)^\}$", script, re.M | re.S)
        if not function or not re.search(rf"^\s*{re.escape(SANDBOX)} .*--gpu all .*-- \"\$@\"$", function.group(1),
                                         re.M) or function.group(1).count('"$@"') != 1:
            problems.append(f"{name}: a `sandboxed` function must run {SANDBOX} --gpu all ... -- \"$@\" alone")
        for line in script.splitlines():
            if re.search(r"^\s*(\w+=\S*\s+)*(sgemm (history|bisect|confirm)|asv)\s", line) and \
                    not line.strip().startswith("sandboxed "):
                problems.append(f"{name}: {line.strip()[:80]!r} runs benchmarks outside the sandbox")
    return problems


def rule_cpu_check(workflow: dict) -> list[str]:
    """The job that runs `sgemm gate --dry-run --cpu-check` is GitHub-hosted with a read-only token and no secret,
    reads the plan with a missing file or field meaning the GPU is needed, and the GPU job is skipped only on a
    plain `false` from it."""
    problems = []
    for name, job in workflow["jobs"].items():
        script = " ".join(step.get("run", "") for step in job.get("steps", []))
        if "--cpu-check" not in script:
            continue
        if on_own_runner(job):
            problems.append(f"{name}: the CPU check runs on a self-hosted runner")
        if job.get("permissions") != {"contents": "read"} or TOKEN.search(json.dumps(job)):
            problems.append(f"{name}: the CPU check must hold contents: read alone and no token")
        if not re.search(r"--dry-run --cpu-check\s*\\?\s*--plan ", script):
            problems.append(f"{name}: the CPU check must write its plan (--dry-run --cpu-check --plan FILE)")
        if 'is False else "true"' not in script or "|| echo true)" not in script:
            problems.append(f"{name}: anything but a plan saying false must read as gpu_needed=true")
        for other, gpu_job in workflow["jobs"].items():
            if f"needs.{name}.outputs.gpu_needed" in str(gpu_job.get("if", "")) and on_own_runner(gpu_job) and \
                    CPU_CHECK_CONDITION.replace("cpu-check", name) not in " ".join(str(gpu_job["if"]).split()):
                problems.append(f"{other}: skipped on anything but gpu_needed != 'false' from {name}")
    return problems


def _runs_from(script: str, folders: list[str]):
    """A command that runs or installs something from where an artifact was downloaded."""
    for folder in folders:
        found = re.search(rf"(^|[;&|(]|\bthen|\bdo)\s*(bash|sh|zsh|source|\.|python3?|node|perl|pip3?\s+install)\s+"
                          rf"[^\n]*{re.escape(folder.rstrip('/'))}\b", script, re.M)
        if found:
            return found
    return None


def rule_untrusted_data(workflow: dict) -> list[str]:
    problems, downloaded = [], {}
    for name, step in steps(workflow):
        script = step.get("run", "")
        if events(workflow) & PR_EVENTS and re.search(r"GITHUB_ENV|GITHUB_PATH|_runner_file_commands|set_env_|"
                                                      r"add_path_", script):
            problems.append(f"{name}: {step.get('name')!r} writes $GITHUB_ENV or $GITHUB_PATH")
        if events(workflow) & PR_EVENTS and (match := EVALUATES.search(script)):
            problems.append(f"{name}: {step.get('name')!r} evaluates text ({match.group().strip()!r})")
        if name in downloaded and (match := EXECUTES.search(script) or _runs_from(script, downloaded[name])):
            problems.append(f"{name}: {step.get('name')!r} may execute what it downloaded ({match.group()!r})")
        if uses(step) == "actions/download-artifact":
            downloaded.setdefault(name, []).append(step.get("with", {}).get("path", "."))
    return problems


def rule_write_token(workflow: dict) -> list[str]:
    problems = []
    for name, job in workflow["jobs"].items():
        permissions = job.get("permissions") or {}
        if permissions != "write-all" and "write" not in getattr(permissions, "values", lambda: [])():
            continue
        holders = [s for s in job["steps"] if TOKEN.search(json.dumps([s.get("env", {}), s.get("with", {})]))]
        problems += [f"{name}: a token that may write reaches {len(holders)} steps"] if len(holders) > 1 else []
        problems += [f"{name}: {step.get('name') or step.get('uses')!r} runs code beside a token that may write"
                     for step in job["steps"]
                     if PROJECT_CODE.search(step.get("run", "")) or uses(step).startswith("actions/setup-")]
        # A third party's action gets the job's token through its own default input (${{ github.token }}).
        problems += [f"{name}: uses {uses(step)}, which would hold the token that may write" for step in job["steps"]
                     if uses(step) and not uses(step).startswith("actions/")]
    return problems


APPROVING_ROLES = {"admin", "write"}  # GitHub's collaborator permission of those who may push (maintain reads write)


def rule_pushes_results_alone(workflow: dict) -> list[str]:
    """The job that pushes adds what it downloaded under results/ and nothing else: a file it put at the branch's
    root (a workflow, a page) would be served or run as the project's."""
    problems = []
    for name, step in steps(workflow):
        script = step.get("run", "")
        if "git push" not in script:
            continue
        for line in re.findall(r"^\s*(?:cp|mv|rsync|install|git add)\b[^\n]*", script, re.M):
            if not re.search(r"\sresults/?$", line.strip()):
                problems.append(f"{name}: {line.strip()!r} writes outside results/")
    return problems


def rule_approval(workflow: dict) -> list[str]:
    """Where a GPU job runs a pull request's code: a job checks that the label's sender (not the pull request's
    author) may push, accepting no other role and never failing open; the GPU job needs it; a push takes the label
    off again (job revoke)."""
    if not any("gpu-untrusted" in runner_labels(job) for job in workflow["jobs"].values()):
        return []
    problems, jobs = [], workflow["jobs"]
    approve = jobs.get("approve", {})
    script = " ".join(step.get("run", "") for step in approve.get("steps", []))
    env = json.dumps([step.get("env", {}) for step in approve.get("steps", [])])
    if "github.event.sender.login" not in env or "pull_request.user" in env:
        problems.append("approve: must check the label's sender (github.event.sender.login)")
    accepted = {role for case in re.findall(r"^\s*([\w|]+)\)\s*echo \"approved", script, re.M)
                for role in case.split("|")}
    if not re.search(r"^\s*\*\)[^\n]*exit [1-9]", script, re.M):
        problems.append("approve: a role it does not name must fail the job (the `*)` branch exits non-zero)")
    if accepted != APPROVING_ROLES:
        problems.append(f"approve: accepts {sorted(accepted) or 'nothing it names'}, not exactly "
                        f"{sorted(APPROVING_ROLES)}")
    guarding = ["approve", "revoke", *(name for name, _ in self_hosted(workflow))]
    for name, job in ((name, jobs.get(name, {})) for name in guarding):
        if job.get("continue-on-error") or any(step.get("continue-on-error") for step in job.get("steps", [])):
            problems.append(f"{name}: continue-on-error lets a failed check through")
    problems += _review_problems(approve)
    revoke = jobs.get("revoke", {})
    runs = [step.get("run", "").strip() for step in revoke.get("steps", []) if "run" in step]
    if runs != [REVOKE_RUN] or \
            "github.event.action != 'labeled'" not in " ".join(str(revoke.get("if", "")).split()):
        problems.append(f"revoke: a push must take the approval label off (one step: {REVOKE_RUN})")
    trigger = workflow.get("on") if isinstance(workflow.get("on"), dict) else {}
    types = set((trigger.get("pull_request_target") or {}).get("types", []))
    if not {"synchronize", "reopened", "edited"} <= types:
        problems.append("revoke: a push, a reopen and a retargeted base (edited) must each reach revoke")
    return problems


REVOKE_RUN = 'gh api --method DELETE "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/labels/gpu-gate-approved" --silent'


# The approving review the label's author gave on the event's head: all three, joined by `and`.
REVIEW_TERMS = (".user.login == $ENV.SENDER", ".commit_id == $ENV.HEAD_SHA", '.state == "APPROVED"')
REVIEW_ENV = {"SENDER": "${{ github.event.sender.login }}", "HEAD_SHA": APPROVED_HEAD,
              "PR_NUMBER": "${{ github.event.pull_request.number }}"}


def _review_problems(approve: dict) -> list[str]:
    """The approval names its commit: the label's author approved, in a review, the very head the event names
    (the one the GPU job checks out), and no such review fails the job."""
    step = next((step for step in approve.get("steps", []) if "/reviews" in step.get("run", "")), None)
    if step is None:
        return ["approve: no step checks that the label's author approved the event's head in a review"]
    problems, script = [], step["run"]
    env = {key: str(value) for key, value in step.get("env", {}).items()}
    if {key: env.get(key) for key in REVIEW_ENV} != REVIEW_ENV:
        problems.append(f"approve: the review check must take {REVIEW_ENV} from the event")
    selected = re.search(r"select\((.*?)\)\s*\|", script, re.S)
    terms = [term.strip() for term in selected.group(1).split(" and ")] if selected else []
    if sorted(terms) != sorted(REVIEW_TERMS) or not re.search(r'"repos/\$GITHUB_REPOSITORY/pulls/\$PR_NUMBER/reviews"',
                                                             script):
        problems.append(f"approve: the reviews must be selected by exactly {' and '.join(REVIEW_TERMS)}")
    if not re.search(r'if \[ -z "\$reviews" \]; then\n(\s+[^\n]*\n)*?\s+exit [1-9]\n\s*fi', script):
        problems.append("approve: no approving review of the head must fail the job")
    return problems


CLEANUP = "/usr/bin/python3 -I /usr/local/libexec/sgemm-runner/job-cleanup.py"  # the runner's root-owned copy
CLEANUP_ENV = {"JOB_SESSION": "session", "JOB_MARK": "mark", "JOB_STARTED": "started"}


def rule_contains_the_job(workflow: dict) -> list[str]:
    """A GPU job's main step marks its processes, is read whole before it runs (braces, `}; exit`), and its EXIT
    trap runs the runner's installed cleanup (`step`), failing the step when it finds anything; an `if: always()`
    step then runs the installed cleanup (`job`) on the main step's outputs, by exec, nothing after it, and nothing
    lets either fail quietly. The cleanup comes from the runner's root-owned copy: the job's code can rewrite any
    checkout."""
    problems = []
    for name, job in self_hosted(workflow):
        main = next((step for step in job["steps"] if step.get("id") == "main"), {})
        script = main.get("run", "")
        lines = [line for line in script.splitlines() if line.strip()]
        if not lines or lines[0] != "{" or lines[-1] != "}; exit":
            problems.append(f"{name}: the main step is not one block read before it runs ({{ ... }}; exit)")
        trap = re.search(r"^trap '(.*?)' EXIT$", script, re.MULTILINE | re.DOTALL)
        if not trap or f"{CLEANUP} step || status=3" not in trap.group(1) or 'exit "$status"' not in trap.group(1):
            problems.append(f"{name}: the main step's EXIT trap must run `{CLEANUP} step` and fail the step on it")
        if not re.search(r'^export SGEMM_JOB_MARK="\$mark" JOB_OUTPUTS$', script, re.MULTILINE) or \
                not re.search(r"^mark=\$\(od -An -N16 -tx1 /dev/urandom", script, re.MULTILINE):
            problems.append(f"{name}: the main step must export a fresh SGEMM_JOB_MARK and JOB_OUTPUTS")
        if trap and not 0 <= script.find("trap '") < script.find("gpu-job.sh"):
            problems.append(f"{name}: the trap must be set before the job's code can run")
        ending = [step for step in job["steps"] if step.get("run", "").strip() == f"exec {CLEANUP} job"]
        if len(ending) != 1 or ending[0].get("if") not in ALWAYS:
            problems.append(f"{name}: one `if: always()` step must run `exec {CLEANUP} job`, no more")
        elif {key: str(value) for key, value in ending[0].get("env", {}).items()} != \
                {key: f"${{{{ steps.main.outputs.{output} }}}}" for key, output in CLEANUP_ENV.items()}:
            problems.append(f"{name}: the cleanup step must take the main step's session, mark and start alone")
        if any(step.get("continue-on-error") for step in [main, *ending]):
            problems.append(f"{name}: continue-on-error lets a job that left something behind pass")
        if any("job-cleanup.py" in step.get("run", "") and CLEANUP not in step.get("run", "")
               for step in job["steps"]):
            problems.append(f"{name}: job-cleanup.py run from elsewhere than the runner's copy")
    return problems


RULES = {rule.__name__[5:].replace("_", " "): rule for rule in (
    rule_runners, rule_no_token, rule_ends_its_processes, rule_code_only_through_checkout, rule_untrusted_data,
    rule_write_token, rule_approval, rule_contains_the_job, rule_pushes_results_alone, rule_sandboxed,
    rule_cpu_check)}


def problems(workflow: dict) -> list[tuple[str, str]]:
    """(rule, problem) for every problem any rule finds in the workflow."""
    return [(name, problem) for name, rule in RULES.items() for problem in rule(workflow)]


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workflows", nargs="*", type=Path,
                        help="workflow files (default: every .yml and .yaml in .github/workflows)")
    args = parser.parse_args(argv)
    found = []
    for path in args.workflows or sorted(WORKFLOWS.glob("*.y*ml")):
        try:
            found += [(path, rule, problem) for rule, problem in problems(load(path.read_text()))]
        except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, AttributeError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else ""
            print(f"workflow_rules: {path}: not a workflow this can read: {type(exc).__name__}: {reason}",
                  file=sys.stderr)
            return 2
    for path, rule, problem in found:
        print(f"{path}: {rule}: {problem}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
