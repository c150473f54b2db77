"""tools/acceptance/github_standin.py: the issue job against a kept stand-in repository, publish after publish:
one open issue per filed open notice across a moved boundary, and a notice that leaves the file leaves no orphan."""

import json
import shutil

import pytest

from tools.acceptance import github_standin

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
SHA = ["1" * 40, "2" * 40, "3" * 40]


def notice(bad: str, first_bad: str | None, **changes) -> dict:
    made = {"id": f"m--k.f--{SHA[1][:12]}", "machine": "m", "gpu_model": "GPU", "kernels": ["fp16/f"],
            "cases": [{"case": "fp16/f", "size": 8192, "shape": [8192] * 3, "track": "track_round_time",
                       "ratio": 1.01, "interval": [1.005, 1.015], "level_before": 1.0,
                       "before": {"sm_clock_mhz": None, "power_w": None},
                       "after": {"sm_clock_mhz": None, "power_w": None}, "graph_url": "index.html#a.b?machine=m"}],
            "last_good": SHA[0], "bad": bad, "first_bad": first_bad, "commits_between": 0 if first_bad else 1,
            "state": "candidate", "environment": [], "filed": True, "seen": True, "publishes": 2,
            "graph_url": "index.html#a.b?machine=m", "commit_url": None, "bisect": None}
    made.update(changes)
    return made


def publish(tmp_path, *notices) -> int:
    (tmp_path / "notices.json").write_text(json.dumps({"format": 2, "machines": ["m"], "notices": list(notices)}))
    return github_standin.main(["--notices", str(tmp_path / "notices.json"), "--issues", str(tmp_path / "i.json")])


def test_one_issue_across_a_moved_boundary_and_none_orphaned(tmp_path, capsys):
    assert publish(tmp_path, notice(SHA[2], None)) == 0
    assert publish(tmp_path, notice(SHA[1], SHA[1])) == 0
    assert publish(tmp_path) == 0
    issues = json.loads((tmp_path / "i.json").read_text())
    assert len(issues) == 1 and issues[0]["state"] == "closed"
    assert "none orphaned" in capsys.readouterr().out


def test_two_open_issues_for_one_notice_are_reported(tmp_path, capsys):
    assert publish(tmp_path, notice(SHA[1], SHA[1])) == 0
    issues = json.loads((tmp_path / "i.json").read_text())
    (tmp_path / "i.json").write_text(json.dumps(issues + [dict(issues[0], number=2, labels=[])]))
    assert publish(tmp_path, notice(SHA[1], SHA[1])) == 1
    assert "2 open issues" in capsys.readouterr().out
