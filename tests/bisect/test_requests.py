"""`sgemm bisect` and `sgemm confirm` from the command line, over real git histories: every refusal is one line and
exit 2 before any GPU work (the GPU's rounds fail the test if asked for), and with the rounds stood in for, the
result file and the confirmations file are written where they belong."""

import json

import bisect_histories as histories
import pytest

from sgemm import cli
from sgemm.bisect import requests

KERNEL, SIZE = "fp32/warptile", 4096


@pytest.fixture
def make_history(tmp_path):
    return lambda *args, **kwargs: histories.make_history(tmp_path, *args, **kwargs)


@pytest.fixture
def fake_builds():
    return histories.FakeBuilds


@pytest.fixture
def no_gpu(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the GPU was asked for before the input was checked")

    monkeypatch.setattr(requests.PairedBuilds, "on_this_gpu", refuse)
    monkeypatch.setattr(requests, "required_identity", refuse)


@pytest.fixture
def stand_in(monkeypatch, fake_builds):
    """The GPU's rounds replaced by chosen ratios; returns the dict to fill."""
    ratios: dict[str, float] = {}
    made = []

    def make(repo, good, kernel, size, device):
        made.append(fake_builds(ratios))
        return made[-1]

    monkeypatch.setattr(requests.PairedBuilds, "on_this_gpu", make)
    return ratios


def notices_file(tmp_path, notices) -> str:
    path = tmp_path / "notices.json"
    path.write_text(json.dumps({"notices": notices}))
    return str(path)


def notice(history, **fields):
    """A notice as the detector writes it: `bad` the first commit measured slow, `first_bad` the same where no commit
    lies between it and `last_good` (null otherwise)."""
    base = {"id": "n1", "machine": "gpu-box", "state": "candidate", "cases": [{"case": KERNEL, "size": SIZE}],
            "last_good": history.commits[0], "bad": history.commits[-1], "first_bad": None}
    if fields.get("first_bad"):
        base["bad"] = fields["first_bad"]
    return base | fields


def bisect(history, tmp_path, *extra):
    return cli.main(["bisect", "--repo", str(history.path), "--results", str(tmp_path / "results"), *extra])


def one_line_refusal(capsys, status, expected_status, text):
    err = capsys.readouterr().err
    assert status == expected_status, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert text in err, err


@pytest.fixture
def history(make_history):
    return make_history(6)


@pytest.mark.parametrize("args, text", [
    (lambda h: [KERNEL, "--size", "4096", "--good", "0123456789abc", "--bad", h.commits[-1]], "is not a commit"),
    (lambda h: [KERNEL, "--size", "4096", "--good", h.commits[-1], "--bad", h.commits[0]], "not an ancestor"),
    (lambda h: [KERNEL, "--size", "4096", "--good", h.commits[3], "--bad", h.commits[3]], "the range is empty"),
    (lambda h: ["fp32/nonesuch", "--size", "4096", "--good", h.commits[0], "--bad", h.commits[-1]],
     "fp32/nonesuch is not in the catalogue of the good end"),
    (lambda h: [KERNEL, "--size", "1002", "--good", h.commits[0], "--bad", h.commits[-1]],
     "needs N to be a multiple of 4"),
    (lambda h: ["fp32/cublas", "--size", "4096", "--good", h.commits[0], "--bad", h.commits[-1]],
     "one library at every commit"),
    (lambda h: [KERNEL, "--size", "4096", "--good", h.commits[0]], "--bad missing"),
    (lambda h: [KERNEL, "--good", h.commits[0], "--bad", h.commits[-1]], "--size missing"),
    (lambda h: [KERNEL, "--size", "0", "--good", h.commits[0], "--bad", h.commits[-1]], "a size must be at least 1"),
    (lambda h: [KERNEL, "--size", "4096", "--good", h.commits[0], "--bad", h.commits[-1], "--budget-s", "0"],
     "seconds must be above 0"),
    (lambda h: ["--notice", "n1"], "--notice and --notices go together"),
    (lambda h: ["--notice", "../x", "--notices", "n.json"], "an id is letters"),
])
def test_bad_input_is_refused_in_one_line_before_any_gpu_work(history, tmp_path, capsys, no_gpu, args, text):
    status = bisect(history, tmp_path, *args(history), "--machine", "gpu-box")
    one_line_refusal(capsys, status, 2, text)
    assert not (tmp_path / "results").exists(), "nothing is written"


def test_a_state_or_results_folder_that_cannot_be_written_is_refused_before_any_gpu_work(history, tmp_path, capsys,
                                                                                         no_gpu):
    # Found by trying to write there, before the first build: not after the first rounds, when saving them.
    ends = [KERNEL, "--size", "4096", "--good", history.commits[0], "--bad", history.commits[-1], "--machine",
            "gpu-box"]
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    one_line_refusal(capsys, bisect(history, tmp_path, *ends, "--state", str(a_file / "s.json")), 2,
                     "is not a directory")
    for command in ("bisect", "confirm"):
        status = cli.main([command, "--repo", str(history.path), "--results", "/proc/sgemm-results", *ends])
        one_line_refusal(capsys, status, 2, "/proc cannot be written")
    assert not (tmp_path / "results").exists(), "nothing is written"


def test_a_case_absent_at_the_bad_end_is_refused(make_history, tmp_path, capsys, no_gpu):
    history = make_history(3)
    history.commit("drop it", lambda repo: (repo / "sgemm" / "catalogue.toml").write_text(
        histories.without_kernel((repo / "sgemm" / "catalogue.toml").read_text(), KERNEL)))
    status = bisect(history, tmp_path, KERNEL, "--size", "4096", "--good", history.commits[0], "--bad",
                    history.commits[-1], "--machine", "gpu-box")
    one_line_refusal(capsys, status, 2, f"{KERNEL} is not in the catalogue of the bad end")


def merged_history(make_history):
    """root, a side branch of two commits off commit 1, merged into main at commit 3 (a merge), then one more."""
    history = make_history(2)
    histories.git(history.path, "checkout", "-q", "-b", "side", history.commits[1])
    def side_note(text):
        return lambda repo: (repo / "SIDE.md").open("a").write(text)

    side = [history.commit("side 1", side_note("1\n")), history.commit("side 2", side_note("2\n"))]
    history.commits = history.commits[:3]
    histories.git(history.path, "checkout", "-q", "main")
    histories.git(history.path, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    history.commits.append(histories.git(history.path, "rev-parse", "HEAD"))
    history.commit("after the merge")
    return history, side


def test_a_range_with_a_merge_is_searched_along_its_first_parent_line(make_history, tmp_path, capsys, stand_in):
    history, side = merged_history(make_history)
    stand_in.update({history.commits[-2]: 1.01, history.commits[-1]: 1.01, side[1]: 1.01})
    status = bisect(history, tmp_path, KERNEL, "--size", "4096", "--good", history.commits[0], "--bad",
                    history.commits[-1], "--machine", "gpu-box")
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "1 merge commit (" in captured.err and "first-parent line" in captured.err
    written = [p for p in (tmp_path / "results" / "gpu-box" / "bisect").iterdir() if not p.name.endswith(".state.json")]
    result = json.loads(written[0].read_text())
    assert result["first_bad"] == history.commits[-2] and result["merges"] == [history.commits[-2]]
    assert "merge commit" in result["why"]
    assert not set(side) & {step["commit"] for step in result["steps"]}, "the merged branch is not searched"


def test_a_good_end_off_the_first_parent_line_is_refused(make_history, tmp_path, capsys, no_gpu):
    history, side = merged_history(make_history)
    status = bisect(history, tmp_path, KERNEL, "--size", "4096", "--good", side[0], "--bad", history.commits[-1],
                    "--machine", "gpu-box")
    one_line_refusal(capsys, status, 2, "not on the first-parent line")


def test_a_bisect_of_a_notice_writes_its_result_under_the_machine(history, tmp_path, capsys, stand_in):
    stand_in.update({commit: 1.01 for commit in history.commits[4:]})
    notices = notices_file(tmp_path, [notice(history, id="h100-fp32-warptile-1")])
    status = bisect(history, tmp_path, "--notice", "h100-fp32-warptile-1", "--notices", notices)
    captured = capsys.readouterr()
    assert status == 0, captured.err
    path = tmp_path / "results" / "gpu-box" / "bisect" / "h100-fp32-warptile-1.json"
    result = json.loads(path.read_text())
    assert {"id", "case", "size", "good", "bad", "first_bad", "verdict", "builds", "wall_s", "steps"} <= set(result)
    assert result["id"] == "h100-fp32-warptile-1" and result["first_bad"] == history.commits[4]
    assert result["machine"] == "gpu-box" and result["verdict"] == "FOUND"
    assert f"first bad commit: {history.commits[4]}" in captured.out
    assert "builds: " in captured.out and "wall time: " in captured.out
    assert (path.parent / "h100-fp32-warptile-1.state.json").is_file()


def test_a_notice_without_first_bad_gives_its_range(history, tmp_path, capsys, stand_in):
    stand_in.update({commit: 1.01 for commit in history.commits[3:]})
    ranged = notice(history, first_bad=None, last_good=history.commits[1], bad=history.commits[5])
    status = bisect(history, tmp_path, "--notice", "n1", "--notices", notices_file(tmp_path, [ranged]))
    assert status == 0, capsys.readouterr().err
    result = json.loads((tmp_path / "results" / "gpu-box" / "bisect" / "n1.json").read_text())
    assert (result["good"], result["bad"], result["first_bad"]) == (history.commits[1], history.commits[5],
                                                                    history.commits[3])


@pytest.mark.parametrize("notices, text", [
    ([], "no notice with id 'n1'"),
    ([{"id": "n1", "machine": "gpu-box", "cases": [], "last_good": "a" * 40, "bad": "b" * 40}],
     "cases [] is not a non-empty list"),
    ([{"id": "n1", "machine": "gpu-box", "cases": [{"case": KERNEL, "size": SIZE}], "last_good": "a" * 40,
       "first_bad": None}], "bad None is not a commit hash"),
    ("not json", "not a readable JSON file"),
])
def test_a_notice_that_cannot_be_used_is_refused(history, tmp_path, capsys, no_gpu, notices, text):
    path = tmp_path / "notices.json"
    path.write_text(notices if isinstance(notices, str) else json.dumps(notices))
    status = bisect(history, tmp_path, "--notice", "n1", "--notices", str(path))
    one_line_refusal(capsys, status, 2, text)


def test_a_notice_of_another_machine_is_refused_or_passed_over(history, tmp_path, capsys, no_gpu):
    notices = notices_file(tmp_path, [notice(history)])
    status = bisect(history, tmp_path, "--notice", "n1", "--notices", notices, "--machine", "other-box")
    one_line_refusal(capsys, status, 2, "notice n1 is of machine gpu-box, not other-box")
    status = bisect(history, tmp_path, "--notice", "n1", "--notices", notices, "--machine", "other-box",
                    "--skip-other-machine")
    one_line_refusal(capsys, status, 0, "nothing to bisect on this box")


def test_confirm_appends_each_candidate_of_the_machine(history, tmp_path, capsys, stand_in):
    stand_in.update({commit: 1.01 for commit in history.commits[4:]})
    results = tmp_path / "results"
    path = results / "gpu-box" / "confirmations.json"
    path.parent.mkdir(parents=True)
    earlier = {"case": "fp16/x", "size": 8192, "good": "a" * 40, "bad": "b" * 40, "verdict": "SAME", "ratio": 1.0,
               "interval": [0.999, 1.001], "confidence": 0.95, "method": "m",
               "measured_at": "2026-11-01T00:00:00+00:00"}
    path.write_text(json.dumps({"confirmations": [earlier]}))
    notices = notices_file(tmp_path, [
        notice(history, id="a", first_bad=history.commits[4], last_good=history.commits[3]),
        notice(history, id="b", first_bad=history.commits[2], last_good=history.commits[1]),
        notice(history, id="c", machine="other-box"), notice(history, id="d", state="confirmed")])
    args = ["confirm", "--repo", str(history.path), "--results", str(results), "--notices", notices,
            "--machine", "gpu-box"]
    assert cli.main(args) == 0, capsys.readouterr().err
    records = json.loads(path.read_text())["confirmations"]
    assert records[0] == earlier and len(records) == 3
    assert [(r["good"], r["bad"], r["verdict"]) for r in records[1:]] == [
        (history.commits[3], history.commits[4], "DIFFERENT"), (history.commits[1], history.commits[2], "SAME")]
    assert 1.009 < records[1]["ratio"] < 1.011 and records[1]["interval"][0] < records[1]["ratio"]
    assert records[1]["method"] == "stood in for by a test" and records[1]["confidence"] == 0.95
    # Again: both are decided, nothing is measured or added.
    assert cli.main(args) == 0
    assert "decided before" in capsys.readouterr().out
    assert len(json.loads(path.read_text())["confirmations"]) == 3


def test_confirm_refuses_a_corrupt_confirmations_file_and_keeps_it(history, tmp_path, capsys, no_gpu):
    path = tmp_path / "results" / "gpu-box" / "confirmations.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"confirmations": [{"case": "fp16/x"}]}')
    status = cli.main(["confirm", KERNEL, "--size", "4096", "--good", history.commits[0], "--bad",
                       history.commits[-1], "--repo", str(history.path), "--results", str(tmp_path / "results"),
                       "--machine", "gpu-box"])
    one_line_refusal(capsys, status, 2, "record 1: a record lacks")
    assert path.read_text() == '{"confirmations": [{"case": "fp16/x"}]}'


def test_confirm_leaves_out_a_notice_it_cannot_use_and_says_so(history, tmp_path, capsys, stand_in):
    notices = notices_file(tmp_path, [notice(history, id="gone", first_bad="f" * 40), notice(history, id="ok")])
    status = cli.main(["confirm", "--repo", str(history.path), "--results", str(tmp_path / "results"),
                       "--notices", notices, "--machine", "gpu-box"])
    captured = capsys.readouterr()
    assert status == 1 and "is not a commit" in captured.out + captured.err
    records = json.loads((tmp_path / "results" / "gpu-box" / "confirmations.json").read_text())["confirmations"]
    assert len(records) == 1 and records[0]["bad"] == history.commits[-1]


def test_the_noise_files_entry_is_taken_only_where_its_rounds_were_timed_as_bisects(tmp_path):
    from dataclasses import asdict

    from sgemm.bisect.requests import noise_entry
    from sgemm.rounds.session import ROUND_SETTINGS

    (tmp_path / "noise").mkdir()
    path = tmp_path / "noise" / "box.json"
    entry = {"paired": {"fp32/warptile 4096x4096x4096": {"sd": 0.002, "df": 12}}}
    path.write_text(json.dumps(entry | {"paired_round": asdict(ROUND_SETTINGS)}))
    noise, _ = noise_entry(tmp_path, "box", "fp32/warptile", 4096)
    assert noise.sd == 0.002 and noise.df == 12
    path.write_text(json.dumps(entry | {"paired_round": {"max_s": 12.0}}))
    assert noise_entry(tmp_path, "box", "fp32/warptile", 4096)[0] is None
    assert noise_entry(tmp_path, "other", "fp32/warptile", 4096) == (None, f"no noise file {tmp_path}/noise/other.json")
