"""The regressions page and notices.json in a published site (sgemm.watch.page, a part of publish_site's):
open notices first with their graph and bisect result, closed ones apart, the page linked from the navbar; a
corrupt run or confirmations file stops the publish with the old site and the results as they were; merge carries
confirmations (records added) and bisect results."""

import json

import pytest
from history_tree import MACHINE, make_branch, write_history
from test_notices import COMMITS, STEP_AT, hopper_and_quiet

from sgemm.catalogue import load_catalogue
from sgemm.results import resultstree
from sgemm.results.confirmations import ConfirmationsError
from sgemm.site.merge import MergeError, merge_results
from sgemm.site.publish import publish_site
from sgemm.watch.notices import watch
from sgemm.watch.page import NAV_LABEL, WatchPages, write_page
from sgemm.watch.series import WatchError

KERNELS = load_catalogue()


@pytest.fixture
def history(tmp_path):
    commits = make_branch(tmp_path / "repo", COMMITS)
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    return tmp_path / "repo", tmp_path / "results", commits


def test_the_page_lists_open_notices_with_a_graph_and_closed_ones_apart(tmp_path, history):
    repo, results, commits = history
    reports = watch(results, repo, KERNELS, "https://github.com/o/r/commit/")
    notice = reports[MACHINE].notices[0]
    closed = dict(notice, id="closed-one", state="closed")
    reports[MACHINE].notices.append(closed)
    written = write_page(tmp_path / "page", reports, ["Made: in a test"])
    page = (tmp_path / "page" / "index.html").read_text()
    assert page.index("Open (1)") < page.index(notice["id"]) < page.index("Closed (1)") < page.index("closed-one")
    assert (tmp_path / "page" / f"{notice['id']}.png") in written
    assert f'href="https://github.com/o/r/commit/{commits[STEP_AT]}"' in page
    assert "Bisect: none yet." in page


def test_the_site_holds_notices_json_and_links_the_page(tmp_path, history, npm_cache):
    repo, results, commits = history
    notice_id = watch(results, repo, KERNELS)[MACHINE].notices[0]["id"]
    result = resultstree.bisect_result(results / MACHINE, notice_id)
    result.parent.mkdir()
    result.write_text(json.dumps({"id": notice_id, "first_bad": commits[STEP_AT], "verdict": "FOUND", "builds": 5,
                                  "wall_s": 300}))
    resultstree.bisect_state(results / MACHINE, notice_id).write_text(json.dumps({"format": 1, "steps": []}))
    # The workflow keeps the notices it last published at the tree's root, for the GPU boxes: asv passes it by.
    (results / "notices.json").write_text(json.dumps({"format": 1, "machines": [], "notices": []}))
    watched = WatchPages(results, repo, KERNELS, ["Made: in a test"])
    publish_site(repo, results, tmp_path / "html", KERNELS, ["Made: in a test"], npm_cache=npm_cache, parts=[watched])
    document = json.loads((tmp_path / "html" / "notices.json").read_text())
    assert [n["id"] for n in document["notices"]] == [notice_id] and watched.reports[MACHINE].notices
    assert "regressions/index.html" in (tmp_path / "html" / "index.html").read_text()
    assert NAV_LABEL in (tmp_path / "html" / "index.html").read_text()
    assert "Bisect: FOUND" in (tmp_path / "html" / "regressions" / "index.html").read_text()


@pytest.mark.parametrize("broken", ["run", "confirmations"])
def test_a_corrupt_file_stops_the_publish_and_changes_nothing(tmp_path, history, npm_cache, broken):
    repo, results, _ = history
    watched = WatchPages(results, repo, KERNELS, ["Made: in a test"])
    publish_site(repo, results, tmp_path / "html", KERNELS, ["Made: in a test"], npm_cache=npm_cache, parts=[watched])
    before = (tmp_path / "html" / "notices.json").read_text()
    path = (sorted((results / MACHINE).glob("*-existing-py.json"))[2] if broken == "run"
            else results / MACHINE / "confirmations.json")
    path.write_text("{not json")
    with pytest.raises((WatchError, ConfirmationsError), match=path.name):
        publish_site(repo, results, tmp_path / "html", KERNELS, ["Made: in a test"], npm_cache=npm_cache,
                     parts=[watched])
    assert (tmp_path / "html" / "notices.json").read_text() == before and path.read_text() == "{not json"


def test_merge_adds_confirmations_and_carries_bisect_results(tmp_path, history):
    _, results, commits = history
    record = {"case": "fp16/wgmma_cluster", "size": 8192, "good": commits[0], "bad": commits[1],
              "verdict": "SAME", "ratio": 1.0, "interval": [0.999, 1.001], "confidence": 0.95,
              "method": "paired", "measured_at": "2026-12-01T10:00:00Z"}
    other = dict(record, verdict="DIFFERENT", measured_at="2026-12-02T10:00:00Z")
    (results / MACHINE / "confirmations.json").write_text(json.dumps({"confirmations": [record]}))
    (results / MACHINE / "bisect").mkdir()
    (results / MACHINE / "bisect" / "x--y--123456789012.json").write_text('{"id": "x--y--123456789012"}')
    merged = tmp_path / "merged"
    merge_results([results], merged)
    box = tmp_path / "box"
    (box / MACHINE).mkdir(parents=True)
    (box / MACHINE / "confirmations.json").write_text(json.dumps({"confirmations": [record, other]}))
    merge_results([box], merged)
    kept = json.loads((merged / MACHINE / "confirmations.json").read_text())["confirmations"]
    assert kept == [record, other]
    assert (merged / MACHINE / "bisect" / "x--y--123456789012.json").is_file()
    (box / MACHINE / "confirmations.json").write_text("{not json")
    with pytest.raises(MergeError, match="not valid JSON"):
        merge_results([box], merged)
    assert json.loads((merged / MACHINE / "confirmations.json").read_text())["confirmations"] == kept


def test_the_regressions_page_shows_code_as_code_not_backticks(tmp_path):
    header = ["Made: 2026-11-27 22:04 UTC from the asv results in `results`", "Command: `sgemm history`"]
    write_page(tmp_path / "page", {}, header)
    page = (tmp_path / "page" / "index.html").read_text()
    assert "<li>Command: <code>sgemm history</code></li>" in page and "<code>results</code>" in page
    assert "`" not in page


def test_one_run_off_the_branch_is_said_in_the_singular(tmp_path):
    commits = make_branch(tmp_path / "repo", COMMITS)
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    run = sorted((tmp_path / "results" / MACHINE).glob(f"{commits[-1][:8]}-*.json"))[0]
    data = json.loads(run.read_text())
    data["commit_hash"] = "f" * 40  # a commit of no branch of the repository
    (run.parent / ("f" * 8 + run.name[8:])).write_text(json.dumps(data))
    notes = watch(tmp_path / "results", tmp_path / "repo", load_catalogue())[MACHINE].notes
    assert f"{MACHINE}: 1 run of commits not on the branch left out, as asv's graphs leave them out" in notes
