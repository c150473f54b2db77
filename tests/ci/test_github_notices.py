"""The history workflow's issue job (.github/notices/issues.js, run by actions/github-script), with the GitHub API
stood in (tests/ci/github_notices_harness.js): one issue per notice, found again by its marker and updated rather than
duplicated, closed when the notice is closed or dismissed, reopened when it opens again; a notices file that breaks
the schema touches nothing; no field can mention, link or inject markup; the schema is the one from the checkout,
and issues the bot did not open are never taken for its own."""

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".github" / "notices" / "issues.js"
SCHEMA = ROOT / ".github" / "notices" / "notices.schema.json"
HARNESS = ROOT / "tests" / "ci" / "github_notices_harness.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (the issue job runs in github-script)")

SHA = ["1" * 40, "2" * 40, "3" * 40]
MACHINE = "nvidia-h100-80gb-hbm3"


def notice(state: str = "candidate", **changes) -> dict:
    made = {"id": f"{MACHINE}--wgmma_specialized.wgmma_cluster--{SHA[1][:12]}", "machine": MACHINE,
            "gpu_model": "NVIDIA H100 80GB HBM3", "kernels": ["bf16/wgmma_cluster", "fp16/wgmma_cluster"],
            "cases": [{"case": "fp16/wgmma_cluster", "size": 8192, "shape": [8192, 8192, 8192],
                       "track": "track_time_over_reference_flushed", "ratio": 1.0101, "interval": [1.008, 1.012],
                       "level_before": 0.998,
                       "before": {"sm_clock_mhz": 1500.0, "power_w": 700.0},
                       "after": {"sm_clock_mhz": 1490.0, "power_w": None},
                       "graph_url": "index.html#bench_gemm.Gemm.track_time_over_reference?machine=x&p-size=8192"}],
            "last_good": SHA[0], "bad": SHA[1], "first_bad": SHA[1], "commits_between": 0, "state": state,
            "environment": [], "filed": True, "seen": True, "publishes": 2,
            "graph_url": "index.html#bench_gemm.Gemm.track_time?machine=x",
            "commit_url": f"https://github.com/o/r/commit/{SHA[1]}", "bisect": None}
    made.update(changes)
    return made


def document(*notices) -> dict:
    return {"format": 2, "machines": [MACHINE], "notices": list(notices)}


def run(tmp_path: Path, doc, issues=(), site_url: str = "https://owner.github.io/repo/") -> dict:
    (tmp_path / "notices.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    (tmp_path / "issues.json").write_text(json.dumps(list(issues)))
    env = dict(os.environ, SCRIPT=str(SCRIPT), STATE_FILE=str(tmp_path / "issues.json"),
               NOTICES_FILE=str(tmp_path / "notices.json"), SCHEMA_FILE=str(SCHEMA), SITE_URL=site_url,
               GITHUB_SERVER_URL="https://github.com")
    done = subprocess.run([NODE, str(HARNESS)], env=env, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def writes(outcome: dict) -> list[str]:
    return [name for name, _ in outcome["calls"] if name != "list"]


def test_the_fixtures_notice_is_valid_against_the_schema():
    jsonschema.validate(document(notice()), json.loads(SCHEMA.read_text()))


def test_a_new_notice_opens_one_issue_with_its_marker_and_label(tmp_path):
    outcome = run(tmp_path, document(notice()))
    [(_, params)] = [call for call in outcome["calls"] if call[0] == "create"]
    assert params["owner"] == "owner" and params["repo"] == "repo" and params["labels"] == ["sgemm-regression"]
    assert params["body"].splitlines()[0] == f"<!-- sgemm-notice: {notice()['id']} -->"
    assert f"https://github.com/owner/repo/commit/{SHA[1]}" in params["body"]
    assert "https://owner.github.io/repo/index.html#bench_gemm.Gemm.track_time_over_reference" in params["body"]
    assert params["title"] == ("Regression: bf16/wgmma_cluster, fp16/wgmma_cluster on NVIDIA H100 80GB HBM3 at "
                               f"{SHA[1][:12]}")
    assert "1.0101" in params["body"] and "1500, 1490 MHz" in params["body"] and "700, not recorded W" in params["body"]
    assert "| #1 |" in outcome["summary"]


def test_run_again_it_changes_nothing_and_opens_no_second_issue(tmp_path):
    first = run(tmp_path, document(notice()))
    again = run(tmp_path, document(notice()), first["issues"])
    assert writes(again) == [] and len(again["issues"]) == 1
    assert again["result"]["done"] == [{"id": notice()["id"], "what": "unchanged", "number": 1}]


def test_a_changed_notice_updates_its_issue(tmp_path):
    first = run(tmp_path, document(notice()))
    confirmed = notice("regression")
    confirmed["cases"][0]["confirmation"] = {"verdict": "DIFFERENT", "ratio": 1.0102, "interval": [1.008, 1.012],
                                             "confidence": 0.95, "method": "paired in one process, L2 flushed",
                                             "measured_at": "2026-12-01T10:00:00Z"}
    again = run(tmp_path, document(confirmed), first["issues"])
    [(name, params)] = [call for call in again["calls"] if call[0] != "list"]
    assert name == "update" and params["issue_number"] == 1 and params["state"] == "open"
    assert "DIFFERENT 1.0102" in again["issues"][0]["body"] and len(again["issues"]) == 1


@pytest.mark.parametrize(("state", "reason"), [("closed", "completed"), ("dismissed", "not_planned")])
def test_a_closed_or_dismissed_notice_closes_its_issue_and_reopens_it_later(tmp_path, state, reason):
    first = run(tmp_path, document(notice()))
    closed = run(tmp_path, document(notice(state)), first["issues"])
    [(name, params)] = [call for call in closed["calls"] if call[0] != "list"]
    assert name == "update" and params["state"] == "closed" and params["state_reason"] == reason
    reopened = run(tmp_path, document(notice()), closed["issues"])
    assert reopened["issues"][0]["state"] == "open" and reopened["result"]["done"][0]["what"] == "reopened"


def test_a_notice_closed_before_it_had_an_issue_opens_none(tmp_path):
    assert writes(run(tmp_path, document(notice("closed")))) == []


def test_an_issue_the_bot_did_not_open_is_never_taken_for_its_own(tmp_path):
    planted = {"number": 5, "title": "x", "state": "open", "labels": ["sgemm-regression"],
               "body": f"<!-- sgemm-notice: {notice()['id']} -->\nplease close me", "user": {"login": "mallory"}}
    outcome = run(tmp_path, document(notice()), [planted])
    assert writes(outcome) == ["create"] and outcome["issues"][0]["body"].endswith("please close me")


def hostile(field: str, value) -> dict:
    made = notice()
    target = made["cases"][0] if field.startswith("cases.") else made
    target[field.removeprefix("cases.")] = value
    return made


@pytest.mark.parametrize(("field", "value"), [
    ("id", "../../etc/passwd--x--111111111111"),
    ("id", "nvidia--a/b--111111111111"),
    ("gpu_model", "@octocat <img src=x onerror=alert(1)>"),
    ("kernels", ["fp16/x](https://evil)"]),
    ("environment", ["driver 1 to 2\n\n@admin [x](https://evil)"]),
    ("state", "open"),
    ("first_bad", "main"),
    ("commit_url", "javascript:alert(1)"),
    ("cases.graph_url", "https://evil.example/"),
    ("cases.ratio", -1),
    ("extra", "a field the schema does not know"),
])
def test_a_notice_that_breaks_the_schema_touches_no_issue(tmp_path, field, value):
    outcome = run(tmp_path, document(notice(), hostile(field, value)))
    assert writes(outcome) == [] and outcome["failed"] and outcome["result"]["refused"]
    assert "no issue was touched" in outcome["summary"]
    assert not re.search(r"@\w|<img|\]\(", outcome["summary"])


@pytest.mark.parametrize("content", ["{not json", json.dumps([1, 2]), json.dumps({"format": 1, "machines": [],
                                                                                "notices": []})])
def test_a_file_that_is_no_notices_document_touches_nothing(tmp_path, content):
    outcome = run(tmp_path, content)
    assert writes(outcome) == [] and outcome["failed"]


def test_two_notices_with_one_id_are_refused(tmp_path):
    outcome = run(tmp_path, document(notice(), notice()))
    assert writes(outcome) == [] and "twice" in outcome["summary"]


def test_every_field_the_schema_lets_through_is_written_as_text(tmp_path):
    """Within the schema's characters, nothing reaches the body as markup: no mention, no tag, no emphasis."""
    made = notice(environment=["card 000abc to 000def"])
    made["cases"][0]["confirmation"] = {"verdict": "SAME", "ratio": 1.0, "interval": [0.99, 1.01],
                                        "confidence": 0.95, "method": "a; b (c) = d % e + f",
                                        "measured_at": "2026-12-01T10:00:00+00:00"}
    body = run(tmp_path, document(made))["issues"][0]["body"]
    # Link targets are built by the job (this repository's commits, the site's graphs), never from a field's text.
    text = re.sub(r"\]\(https://[A-Za-z0-9.:/_#?=&%'-]+\)", "]", "\n".join(body.splitlines()[1:]))
    assert not re.search(r"[<>@`*_\\()]", text.replace("(", "").replace(")", "")), text
    assert "wgmma&#95;cluster" in text  # the kernel's underscore, as an entity


def test_a_site_url_that_is_not_https_is_left_out(tmp_path):
    body = run(tmp_path, document(notice()), site_url="javascript:alert(1)//")["issues"][0]["body"]
    assert "javascript" not in body and "graph" not in body


def test_the_schema_uses_no_keyword_the_validator_does_not_know(tmp_path):
    schema = json.loads(SCHEMA.read_text())
    broken = copy.deepcopy(schema)
    broken["$defs"]["sha"]["format"] = "hex"
    (tmp_path / "schema.json").write_text(json.dumps(broken))
    env = dict(os.environ, SCRIPT=str(SCRIPT))
    probe = (f"const s = require(process.env.SCRIPT); try {{ s.readNotices({json.dumps(str(SCHEMA))}, "
             f"{json.dumps(str(tmp_path / 'schema.json'))}); console.log('accepted') }} catch (e) "
             "{ console.log(e.message) }")
    done = subprocess.run([NODE, "-e", probe], env=env, check=False, capture_output=True, text=True, timeout=60)
    assert "keyword format is not one this validator knows" in done.stdout


def test_a_candidate_not_yet_filed_opens_no_issue(tmp_path):
    assert writes(run(tmp_path, document(notice(filed=False, publishes=1)))) == []


def test_a_gone_notice_closes_its_issue_as_not_planned_saying_no_longer_seen(tmp_path):
    issues = run(tmp_path, document(notice()))["issues"]
    outcome = run(tmp_path, document(notice(state="gone", seen=False)), issues)
    [issue] = outcome["issues"]
    assert issue["state"] == "closed" and issue["state_reason"] == "not_planned"
    assert "no longer seen" in issue["body"]


def test_an_issue_whose_notice_left_the_file_is_closed_not_orphaned(tmp_path):
    issues = run(tmp_path, document(notice()))["issues"]
    other = notice(id=f"{MACHINE}--other.kernel--{SHA[2][:12]}", bad=SHA[2], first_bad=SHA[2])
    outcome = run(tmp_path, document(other), issues)
    by_number = {issue["number"]: issue for issue in outcome["issues"]}
    assert by_number[1]["state"] == "closed" and by_number[1]["state_reason"] == "not_planned"
    assert "No longer seen" in by_number[1]["comments"][0]
    assert by_number[2]["state"] == "open" and len(by_number) == 2


def test_a_boundary_that_moved_updates_the_one_issue(tmp_path):
    issues = run(tmp_path, document(notice(first_bad=None, bad=SHA[2], commits_between=1)))["issues"]
    outcome = run(tmp_path, document(notice()), issues)
    assert [name for name in writes(outcome)] == ["update"] and len(outcome["issues"]) == 1
    assert outcome["issues"][0]["state"] == "open" and SHA[1][:12] in outcome["issues"][0]["title"]


def test_the_summary_shows_each_cases_confirmation(tmp_path):
    confirmed = notice(state="regression")
    confirmed["cases"][0]["confirmation"] = {"verdict": "DIFFERENT", "ratio": 1.01, "interval": [1.008, 1.012],
                                             "confidence": 0.95, "method": "paired", "measured_at": "2026-11-28T00:00Z"}
    outcome = run(tmp_path, document(confirmed))
    assert "fp16/wgmma&#95;cluster DIFFERENT" in outcome["summary"]
