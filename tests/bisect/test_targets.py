"""Notices read for bisect and confirm: a notice's first case or the one named, the ends of a step placed within a
range, the candidates of one machine, cases of a shape passed by, every malformed field named, and the notices file
the detector writes read as it is."""

import json

import pytest
from history_tree import MACHINE, Case, make_branch, write_history

from sgemm.bisect.targets import TargetError, candidates, from_notice, identifier
from sgemm.catalogue import load_catalogue
from sgemm.watch.notices import notices_document, watch, write_notices

GOOD, BAD = "a" * 40, "b" * 40


def write(tmp_path, notices, wrap=True):
    path = tmp_path / "notices.json"
    path.write_text(json.dumps({"notices": notices} if wrap else notices))
    return path


def notice(**fields):
    return {"id": "n1", "machine": "m", "state": "candidate", "last_good": GOOD, "bad": BAD, "first_bad": BAD,
            "cases": [{"case": "fp16/x", "size": 8192}, {"case": "bf16/x", "size": 8192}]} | fields


def test_a_notice_gives_its_first_case_or_the_one_named(tmp_path):
    path = write(tmp_path, [notice()])
    first = from_notice(path, "n1")
    assert (first.case, first.size, first.good, first.bad, first.machine) == ("fp16/x", 8192, GOOD, BAD, "m")
    assert from_notice(path, "n1", "bf16/x").case == "bf16/x"
    with pytest.raises(TargetError, match="it lists fp16/x at 8192, bf16/x at 8192"):
        from_notice(path, "n1", "fp32/x")


def test_a_step_within_a_range_gives_the_ends_measured_either_side(tmp_path):
    target = from_notice(write(tmp_path, [notice(first_bad=None, last_good="c" * 40, bad="d" * 40)], wrap=False), "n1")
    assert (target.good, target.bad) == ("c" * 40, "d" * 40)


def test_a_case_of_a_shape_is_passed_by(tmp_path):
    shaped = {"case": "fp32/x", "size": None, "shape": [4096, 1024, 512]}
    path = write(tmp_path, [notice(cases=[shaped, {"case": "fp16/x", "size": 8192}]), notice(id="n2", cases=[shaped])])
    assert [(t.id, t.case) for t in candidates(path, "m")] == [("n1", "fp16/x")]
    with pytest.raises(TargetError, match="n2 has no square case"):
        from_notice(path, "n2")


def test_the_detectors_notices_file_is_read_as_written(tmp_path):
    kernels = load_catalogue()
    commits = make_branch(tmp_path / "repo", 24)
    slower = [1.0] * 12 + [1.05] * 12
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, slower)])
    document = notices_document(watch(tmp_path / "results", tmp_path / "repo", kernels))
    write_notices(tmp_path / "notices.json", document)
    [written] = document["notices"]
    [target] = candidates(tmp_path / "notices.json", MACHINE)
    assert (target.id, target.case, target.size, target.good, target.bad) == (
        written["id"], "fp32/warptile", 4096, commits[11], commits[12])
    assert from_notice(tmp_path / "notices.json", written["id"]) == target


def test_candidates_are_those_of_the_machine_still_candidates(tmp_path):
    path = write(tmp_path, [notice(), notice(id="n2", machine="other"), notice(id="n3", state="closed")])
    assert [(t.id, t.case) for t in candidates(path, "m")] == [("n1", "fp16/x"), ("n1", "bf16/x")]


@pytest.mark.parametrize("notices", [[notice(), 7], [notice(), {k: v for k, v in notice().items() if k != "state"}]])
def test_a_notice_of_no_known_shape_stops_the_candidates_rather_than_being_passed_by(tmp_path, notices):
    with pytest.raises(TargetError, match="notice 2 is not a notice"):
        candidates(write(tmp_path, notices), "m")


@pytest.mark.parametrize("bad, message", [
    ({"id": "../up"}, "id '../up' is not an id"),
    ({"machine": ""}, "machine '' is not a machine name"),
    ({"last_good": "zz"}, "last_good 'zz' is not a commit hash"),
    ({"bad": 7}, "bad 7 is not a commit hash"),
    ({"id": "n1.state"}, "id 'n1.state' is not an id"),
    ({"cases": [{"case": "fp16/x", "size": "8192"}]}, "size '8192' is not a positive whole number"),
])
def test_a_malformed_notice_is_named(tmp_path, bad, message):
    with pytest.raises(TargetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_notice(write(tmp_path, [notice(**bad)]), bad.get("id", "n1"))


def test_an_identifier_names_the_case_and_both_ends():
    assert identifier("fp16/x", 8192, GOOD, BAD) == "fp16-x-8192-aaaaaaaa-bbbbbbbb"
