"""sgemm.contained: with SGEMM_SANDBOX set, every command that runs a pull request's content goes through it, with
exactly the paths and cards given; a sandbox asked for and not there is an error, never a run without it."""

import os
import stat

import pytest

from sgemm.contained import SANDBOX_VARIABLE, SandboxMissing, contained


def test_without_a_sandbox_the_command_is_unchanged(monkeypatch):
    monkeypatch.delenv(SANDBOX_VARIABLE, raising=False)
    assert contained(["python", "-m", "x"], writable=["/nowhere"]) == ["python", "-m", "x"]


def test_a_sandbox_asked_for_and_missing_runs_nothing(monkeypatch, tmp_path):
    for given in (str(tmp_path / "absent"), "relative/job-sandbox", str(tmp_path)):
        monkeypatch.setenv(SANDBOX_VARIABLE, given)
        with pytest.raises(SandboxMissing, match="nothing runs without the sandbox"):
            contained(["true"])


def test_the_sandbox_gets_the_paths_the_cards_and_the_command(monkeypatch, tmp_path):
    program = tmp_path / "job-sandbox"
    program.write_text("#!/bin/sh\n")
    program.chmod(stat.S_IRWXU)
    monkeypatch.setenv(SANDBOX_VARIABLE, str(program))
    monkeypatch.setenv("GITHUB_TOKEN", "never passed")
    out = tmp_path / "round-1.jsonl"
    argv = contained(["python", "-m", "sgemm.measuring.ab", "plan", str(out)], readable=[tmp_path / "trees"],
                     writable=[out], devices=[0, 3], env={"SGEMM_RUN_CASES": "[]"})
    assert argv[0] == str(program) and argv[argv.index("--") + 1:] == ["python", "-m", "sgemm.measuring.ab", "plan",
                                                                      str(out)]
    pairs = list(zip(argv[1:argv.index("--"):2], argv[2:argv.index("--"):2]))
    assert [value for option, value in pairs if option == "--rw"] == [str(out)]
    assert [value for option, value in pairs if option == "--gpu"] == ["0", "3"]
    assert ("--ro", str(tmp_path / "trees")) in pairs and ("--env", "SGEMM_RUN_CASES=[]") in pairs
    assert not any("GITHUB_TOKEN" in value for _, value in pairs) and os.environ["GITHUB_TOKEN"]
