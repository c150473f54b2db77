"""Notices read for bisect and confirm: a notice's first case or the one named, its range when first_bad is null,
the candidates of one machine, and every malformed field named."""

import json

import pytest

from sgemm.judging.targets import TargetError, candidates, from_notice, identifier

GOOD, BAD = "a" * 40, "b" * 40


def write(tmp_path, notices, wrap=True):
    path = tmp_path / "notices.json"
    path.write_text(json.dumps({"notices": notices} if wrap else notices))
    return path


def notice(**fields):
    return {"id": "n1", "machine": "m", "state": "candidate", "last_good": GOOD, "first_bad": BAD,
            "cases": [{"case": "fp16/x", "size": 8192}, {"case": "bf16/x", "size": 8192}]} | fields


def test_a_notice_gives_its_first_case_or_the_one_named(tmp_path):
    path = write(tmp_path, [notice()])
    first = from_notice(path, "n1")
    assert (first.case, first.size, first.good, first.bad, first.machine) == ("fp16/x", 8192, GOOD, BAD, "m")
    assert from_notice(path, "n1", "bf16/x").case == "bf16/x"
    with pytest.raises(TargetError, match="it lists fp16/x at 8192, bf16/x at 8192"):
        from_notice(path, "n1", "fp32/x")


def test_a_notice_without_first_bad_gives_its_range(tmp_path):
    target = from_notice(write(tmp_path, [notice(first_bad=None, range=["c" * 40, "d" * 40])], wrap=False), "n1")
    assert (target.good, target.bad) == ("c" * 40, "d" * 40)


def test_candidates_are_those_of_the_machine_still_candidates(tmp_path):
    path = write(tmp_path, [notice(), notice(id="n2", machine="other"), notice(id="n3", state="closed")])
    assert [(t.id, t.case) for t in candidates(path, "m")] == [("n1", "fp16/x"), ("n1", "bf16/x")]


@pytest.mark.parametrize("bad, message", [
    ({"id": "../up"}, "id '../up' is not an id"),
    ({"machine": ""}, "machine '' is not a machine name"),
    ({"last_good": "zz"}, "last_good 'zz' is not a commit hash"),
    ({"first_bad": 7}, "first_bad 7 is not a commit hash or null"),
    ({"cases": [{"case": "fp16/x", "size": "8192"}]}, "size '8192' is not a positive whole number"),
])
def test_a_malformed_notice_is_named(tmp_path, bad, message):
    with pytest.raises(TargetError, match=message.replace("(", r"\(").replace(")", r"\)")):
        from_notice(write(tmp_path, [notice(**bad)]), bad.get("id", "n1"))


def test_an_identifier_names_the_case_and_both_ends():
    assert identifier("fp16/x", 8192, GOOD, BAD) == "fp16-x-8192-aaaaaaaa-bbbbbbbb"
