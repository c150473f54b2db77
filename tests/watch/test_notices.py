"""Notices from a machine's history (sgemm.watch.notices): one per kernel code and commit, twins together, every
state, the range left where commits were not measured, confirmations and bisect results read (and a corrupt one
refused by name), one commit of history, and every notice valid against the schema the issue job holds it to."""

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from history_tree import MACHINE, Case, make_branch, write_history

from sgemm.catalogue import load_catalogue
from sgemm.results import asvsuite, confirmations, resultstree
from sgemm.watch.notices import check_commit_url, code_key, notices_document, watch, write_notices
from sgemm.watch.series import WatchError

KERNELS = load_catalogue()
SCHEMA = json.loads((Path(__file__).resolve().parents[2] / ".github" / "notices" / "notices.schema.json").read_text())
COMMITS = 36
STEP_AT = 20
HOPPER = ("fp16/wgmma_cluster", "bf16/wgmma_cluster")


def noisy(step: float = 0.0, at: int = STEP_AT, sd: float = 0.0005, seed: int = 0, back_at: int | None = None):
    rng = np.random.default_rng(seed)
    levels = np.ones(COMMITS)
    levels[at:] *= 1 + step
    if back_at is not None:
        levels[back_at:] = 1.0
    return list(levels * np.exp(rng.normal(0, sd, COMMITS)))


@pytest.fixture
def branch(tmp_path):
    return tmp_path / "repo", make_branch(tmp_path / "repo", COMMITS)


def notices(tmp_path, repo, **kwargs):
    document = notices_document(watch(tmp_path / "results", repo, KERNELS, **kwargs))
    jsonschema.validate(document, SCHEMA)
    return document["notices"]


def publish(tmp_path, repo, **kwargs):
    """One publish: the notices written where the next one reads them (sgemm.watch.page does so)."""
    document = notices_document(watch(tmp_path / "results", repo, KERNELS, **kwargs))
    jsonschema.validate(document, SCHEMA)
    write_notices(tmp_path / "results" / "notices.json", document)
    return document["notices"]


def hopper_and_quiet(seed=0, **step):
    return [Case(HOPPER[0], 8192, noisy(0.01, seed=seed, **step)), Case(HOPPER[1], 8192, noisy(0.01, seed=seed + 1,
            **step)), Case(HOPPER[0], 4096, noisy(seed=seed + 2)), Case("fp32/warptile", 4096, noisy(seed=seed + 3))]


def test_one_notice_for_a_kernel_and_its_twin_at_the_commit_that_slowed_them(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    [notice] = notices(tmp_path, repo, commit_url="https://github.com/o/r/commit/")
    assert notice["kernels"] == sorted(HOPPER) and notice["state"] == "candidate"
    assert [(c["case"], c["size"]) for c in notice["cases"]] == [(HOPPER[1], 8192), (HOPPER[0], 8192)]
    assert notice["first_bad"] == notice["bad"] == commits[STEP_AT] and notice["last_good"] == commits[STEP_AT - 1]
    assert notice["id"] == f"{MACHINE}--wgmma_specialized.wgmma_cluster--{commits[STEP_AT][:12]}"
    assert notice["commit_url"] == f"https://github.com/o/r/commit/{commits[STEP_AT]}"
    case = notice["cases"][0]
    assert case["ratio"] == pytest.approx(1.01, abs=0.002) and case["interval"][0] < case["ratio"]
    assert case["before"] == {"sm_clock_mhz": 1500.0, "power_w": 700.0}
    assert case["graph_url"].startswith("index.html#bench_gemm.Gemm.track_time_over_reference_flushed?machine=")


def test_the_id_is_stable_as_the_history_grows(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 4)))
    first = publish(tmp_path, repo)[0]["id"]
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 4, COMMITS)))
    assert publish(tmp_path, repo)[0]["id"] == first


def test_commits_not_measured_across_the_step_leave_a_range(tmp_path, branch):
    repo, commits = branch
    measured = [i for i in range(COMMITS) if i not in (STEP_AT - 1, STEP_AT)]
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=measured)
    [notice] = notices(tmp_path, repo)
    assert notice["first_bad"] is None and notice["commits_between"] == 2
    assert notice["last_good"] == commits[STEP_AT - 2] and notice["bad"] == commits[STEP_AT + 1]


def test_a_later_step_back_closes_it(tmp_path, branch):
    repo, commits = branch
    cases = hopper_and_quiet(back_at=STEP_AT + 8)
    write_history(tmp_path / "results", commits, cases, measured=list(range(STEP_AT + 8)))
    assert publish(tmp_path, repo)[0]["state"] == "candidate"
    write_history(tmp_path / "results", commits, cases, measured=list(range(STEP_AT + 8, COMMITS)))
    assert [notice["state"] for notice in publish(tmp_path, repo)] == ["closed"]


def test_a_driver_change_across_the_step_makes_it_the_environments(tmp_path, branch):
    repo, commits = branch
    environment = {i: {asvsuite.DRIVER_VERSION: 580159004.0 if i < STEP_AT else 580165002.0} for i in range(COMMITS)}
    write_history(tmp_path / "results", commits, hopper_and_quiet(), environment=environment)
    [notice] = notices(tmp_path, repo)
    assert notice["state"] == "environment" and notice["environment"] == ["driver 580.159.04 to 580.165.02"]


def test_a_card_change_across_the_step_makes_it_the_environments(tmp_path, branch):
    repo, commits = branch
    cases = hopper_and_quiet()
    for case in cases:
        case.cards = [0xABC] * STEP_AT + [0xDEF] * (COMMITS - STEP_AT)
    write_history(tmp_path / "results", commits, cases)
    [notice] = notices(tmp_path, repo)
    assert notice["state"] == "environment" and notice["environment"] == ["card 000abc to 000def"]


def confirm(tmp_path, commits, verdicts):
    records = [{"case": case, "size": 8192, "good": commits[STEP_AT - 1], "bad": commits[STEP_AT],
                "verdict": verdict, "ratio": 1.0102, "interval": [1.008, 1.012], "confidence": 0.95,
                "method": "paired in one process, L2 flushed", "measured_at": "2026-12-01T10:00:00Z"}
               for case, verdict in verdicts.items()]
    confirmations.append(confirmations.path_for(tmp_path / "results", MACHINE), records)


@pytest.mark.parametrize(("verdicts", "state"), [
    ({HOPPER[0]: "DIFFERENT"}, "regression"),
    ({HOPPER[0]: "SAME", HOPPER[1]: "SAME"}, "dismissed"),
    ({HOPPER[0]: "UNKNOWN"}, "candidate"),
])
def test_a_confirmation_decides_the_state(tmp_path, branch, verdicts, state):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    confirm(tmp_path, commits, verdicts)
    [notice] = notices(tmp_path, repo)
    assert notice["state"] == state
    confirmed = {c["case"]: c["confirmation"]["verdict"] for c in notice["cases"] if "confirmation" in c}
    assert confirmed == verdicts


def test_a_bisect_result_is_shown_with_the_notice(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    [notice] = notices(tmp_path, repo)
    machine_dir = tmp_path / "results" / MACHINE
    # A bisect under way has written its state alone: the notice has no result yet.
    state = resultstree.bisect_state(machine_dir, notice["id"])
    state.parent.mkdir()
    state.write_text(json.dumps({"format": 1, "query": {}, "builds": [], "wall_s": 1.0, "steps": []}))
    assert notices(tmp_path, repo)[0]["bisect"] is None
    resultstree.bisect_result(machine_dir, notice["id"]).write_text(json.dumps(
        {"id": notice["id"], "first_bad": commits[STEP_AT], "verdict": "FOUND", "builds": 5, "wall_s": 312.5}))
    assert notices(tmp_path, repo)[0]["bisect"] == {"first_bad": commits[STEP_AT], "verdict": "FOUND",
                                                    "builds": 5, "wall_s": 312.5}


@pytest.mark.parametrize("content", ["{not json", '{"id": "another", "verdict": "FOUND"}',
                                     '{"verdict": "DIFFERENT"}'])
def test_a_bisect_result_that_is_not_one_stops_the_watch_by_name(tmp_path, branch, content):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    [notice] = notices(tmp_path, repo)
    path = resultstree.bisect_result(tmp_path / "results" / MACHINE, notice["id"])
    path.parent.mkdir()
    path.write_text(content.replace('"verdict": "DIFFERENT"', f'"id": "{notice["id"]}", "verdict": "DIFFERENT"'))
    with pytest.raises(WatchError, match="bisect") as raised:
        watch(tmp_path / "results", repo, KERNELS)
    assert str(path) in str(raised.value)


def test_a_history_of_one_commit_has_nothing_to_detect_and_says_so(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=[0])
    reports = watch(tmp_path / "results", repo, KERNELS)
    assert reports[MACHINE].notices == []
    assert "1 commit measured on the branch" in reports[MACHINE].notes[0]


@pytest.mark.parametrize(("content", "why"), [
    ("{not json", "not valid JSON"),
    ('{"confirmations": [{"case": "fp16/x"}]}', "lacks"),
    (('{"confirmations": [{"case": "fp16/x", "size": 8192, "good": "a", "bad": "b", "verdict": "SAME", '
      '"ratio": 1, "interval": [1, 1], "confidence": 0.95, "method": "m", "measured_at": "t"}]}'), "commit hash"),
])
def test_a_corrupt_confirmations_file_stops_the_watch_by_name_and_is_left_as_it_is(tmp_path, branch, content, why):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    path = confirmations.path_for(tmp_path / "results", MACHINE)
    path.write_text(content)
    with pytest.raises(confirmations.ConfirmationsError, match=why) as raised:
        watch(tmp_path / "results", repo, KERNELS)
    assert str(path) in str(raised.value) and path.read_text() == content


def test_a_corrupt_run_file_stops_the_watch(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    broken = min((tmp_path / "results" / MACHINE).glob("*-existing-py.json"))
    broken.write_text("[]")
    with pytest.raises(WatchError, match=broken.name):
        watch(tmp_path / "results", repo, KERNELS)


def test_code_keys_join_precision_twins_and_keep_kernels_apart():
    assert code_key(HOPPER[0], KERNELS) == code_key(HOPPER[1], KERNELS)
    assert code_key("fp32/warptile", KERNELS) != code_key("fp32/naive", KERNELS)
    assert code_key("fp99/gone", KERNELS) == "gone"


@pytest.mark.parametrize("url", ["http://github.com/o/r/commit/", "https://github.com/o/r/commit", "javascript:x"])
def test_a_commit_url_must_be_an_https_prefix(url):
    with pytest.raises(ValueError, match="--commit-url"):
        check_commit_url(url)


def test_notices_file_written_whole(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    write_notices(tmp_path / "notices.json", notices_document(watch(tmp_path / "results", repo, KERNELS)))
    assert json.loads((tmp_path / "notices.json").read_text())["machines"] == [MACHINE]


def test_a_step_is_filed_only_once_a_second_publish_sees_it(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 5)))
    [first] = publish(tmp_path, repo)
    assert not first["filed"] and first["seen"] and first["publishes"] == 1
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=[STEP_AT + 5])
    [second] = publish(tmp_path, repo)
    assert second["filed"] and second["publishes"] == 2 and second["id"] == first["id"]


def test_a_boundary_that_moves_keeps_its_notice(tmp_path, branch):
    """Republished with the first slow commit's figure withheld, then with it: one id, the range narrowed."""
    repo, commits = branch
    withheld = [i for i in range(COMMITS) if i != STEP_AT]
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=withheld)
    [wide] = publish(tmp_path, repo)
    assert wide["bad"] == commits[STEP_AT + 1] and wide["first_bad"] is None
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=[STEP_AT])
    [narrow] = publish(tmp_path, repo)
    assert narrow["id"] == wide["id"] and narrow["first_bad"] == commits[STEP_AT] and narrow["filed"]


def test_a_notice_the_detector_no_longer_sees_inside_its_window_is_gone(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 5)))
    [seen] = publish(tmp_path, repo)
    document = json.loads((tmp_path / "results" / "notices.json").read_text())
    document["notices"][0]["bad"] = document["notices"][0]["last_good"] = commits[3]
    document["notices"][0]["id"] = f"{MACHINE}--wgmma_specialized.wgmma_cluster--{commits[3][:12]}"
    (tmp_path / "results" / "notices.json").write_text(json.dumps(document))
    states = {n["id"]: (n["state"], n["seen"]) for n in publish(tmp_path, repo)}
    assert states[document["notices"][0]["id"]] == ("gone", False) and states[seen["id"]][1]


def test_a_notice_whose_step_left_the_window_is_carried_as_it_was(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 6)))
    publish(tmp_path, repo)
    document = json.loads((tmp_path / "results" / "notices.json").read_text())
    document["notices"][0].update(last_good=commits[0], bad=commits[1], first_bad=commits[1], filed=True,
                                  id=f"{MACHINE}--wgmma_specialized.wgmma_cluster--{commits[1][:12]}")
    (tmp_path / "results" / "notices.json").write_text(json.dumps(document))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sgemm.watch.notices.WINDOW", 20)
        kept = [n for n in publish(tmp_path, repo) if n["bad"] == commits[1]]
    assert [(n["state"], n["filed"], n["seen"]) for n in kept] == [("candidate", True, False)]


def test_a_notice_whose_commits_left_the_branch_is_gone_and_kept(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 6)))
    publish(tmp_path, repo)
    document = json.loads((tmp_path / "results" / "notices.json").read_text())
    document["notices"][0].update(last_good="a" * 40, bad="b" * 40, first_bad="b" * 40, filed=True,
                                  id=f"{MACHINE}--wgmma_specialized.wgmma_cluster--{'b' * 12}")
    (tmp_path / "results" / "notices.json").write_text(json.dumps(document))
    reports = watch(tmp_path / "results", repo, KERNELS)
    gone = [n for n in reports[MACHINE].notices if n["bad"] == "b" * 40]
    assert [n["state"] for n in gone] == ["gone"]
    assert any("no longer on the branch" in note for note in reports[MACHINE].notes)


def test_a_notices_file_of_the_older_format_is_brought_up_to_date_without_a_second_issue(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet(), measured=list(range(STEP_AT + 6)))
    [new] = publish(tmp_path, repo)
    document = json.loads((tmp_path / "results" / "notices.json").read_text())
    old = {key: value for key, value in document["notices"][0].items() if key not in ("filed", "seen", "publishes")}
    old["cases"] = [{k: v for k, v in case.items() if k != "level_before"} for case in old["cases"]]
    (tmp_path / "results" / "notices.json").write_text(json.dumps({"format": 1, "machines": [MACHINE],
                                                                   "notices": [old]}))
    [upgraded] = publish(tmp_path, repo)
    assert upgraded["id"] == new["id"] and upgraded["filed"]


@pytest.mark.parametrize("content", ['{"format": 3, "machines": [], "notices": []}', "not json",
                                     '{"format": 2, "machines": [], "notices": [{"id": "x"}]}'])
def test_a_notices_file_this_version_cannot_read_is_refused_and_left_as_it_is(tmp_path, branch, content):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    (tmp_path / "results" / "notices.json").write_text(content)
    with pytest.raises(WatchError, match="notices.json"):
        watch(tmp_path / "results", repo, KERNELS)
    assert (tmp_path / "results" / "notices.json").read_text() == content


def test_a_confirmation_holding_the_moved_range_is_shown_and_one_of_a_removed_case_breaks_nothing(tmp_path, branch):
    repo, commits = branch
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    path = confirmations.path_for(tmp_path / "results", MACHINE)
    record = {"case": HOPPER[0], "size": 8192, "good": commits[STEP_AT - 2], "bad": commits[STEP_AT + 1],
              "verdict": "DIFFERENT", "ratio": 1.01, "interval": [1.008, 1.012], "confidence": 0.95,
              "method": "paired", "measured_at": "2026-11-28T00:00:00Z"}
    removed = dict(record, case="fp16/removed_kernel")
    path.write_text(json.dumps({"confirmations": [record, removed]}))
    [notice] = publish(tmp_path, repo)
    shown = {case["case"]: case.get("confirmation", {}).get("verdict") for case in notice["cases"]}
    assert shown == {HOPPER[0]: "DIFFERENT", HOPPER[1]: None} and notice["state"] == "regression" and notice["filed"]
