"""tools/ci/workflow_rules.py from its command line: this repository's workflows pass, a workflow that breaks a rule
is named with the rule and the problem, and a file that is no workflow is refused in one line (each rule against the
attacks it is there for is tests/ci/test_workflows.py's)."""

import subprocess
import sys
from pathlib import Path

from tools.ci import workflow_rules

ROOT = Path(__file__).resolve().parents[3]
ON_THE_TRUSTED_LABELS = """on: pull_request
permissions: {}
jobs:
  run:
    runs-on: [self-hosted, linux, gpu, gpu-trusted]
    steps:
      - run: echo hello
"""


def test_the_repositorys_workflows_keep_every_rule():
    done = subprocess.run([sys.executable, "-m", "tools.ci.workflow_rules"], cwd=ROOT, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_a_broken_rule_is_named_with_its_problem(tmp_path, capsys):
    mine = tmp_path / "mine.yml"
    mine.write_text(ON_THE_TRUSTED_LABELS)
    assert workflow_rules.main([str(mine)]) == 1
    out = capsys.readouterr().out
    assert f"{mine}: runners: run: gpu-trusted reachable on ['pull_request']" in out.splitlines()


def test_a_file_that_is_no_workflow_is_refused_in_one_line(tmp_path, capsys):
    for name, text in (("list.yml", "- one\n- two\n"), ("jobless.yml", "on: push\n"), ("broken.yml", "on: [push\n")):
        (tmp_path / name).write_text(text)
        assert workflow_rules.main([str(tmp_path / name)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith(f"workflow_rules: {tmp_path / name}: not a workflow") and err.count("\n") == 1, err
    assert workflow_rules.main([str(tmp_path / "missing.yml")]) == 2
    assert "missing.yml" in capsys.readouterr().err
