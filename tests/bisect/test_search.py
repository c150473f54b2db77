"""The search for the first bad commit, over real git histories, the paired rounds stood in for by chosen ratios:
found in about log2(n) builds, resumed without timing again what was decided, a broken commit skipped, UNKNOWN when
the builds or the time run out, NO STEP when the ends are the same."""

import json
import math

import bisect_histories as histories
import pytest

from sgemm.bisect.commits import first_parent_chain
from sgemm.bisect.compare import CompareSchedule
from sgemm.bisect import search
from sgemm.bisect.search import SKIPPED, BisectError, Limits, State, query_of, run_bisect
from sgemm.bisect.targets import Target
from sgemm.results.resultstree import FOUND, NO_STEP, UNKNOWN

KERNEL, SIZE = "fp32/warptile", 4096


@pytest.fixture
def make_history(tmp_path):
    return lambda *args, **kwargs: histories.make_history(tmp_path, *args, **kwargs)


@pytest.fixture
def fake_builds():
    return histories.FakeBuilds


def target(history, good=0, bad=-1):
    return Target("t", KERNEL, SIZE, history.commits[good], history.commits[bad])


def stepped(history, at: int, ratio: float = 1.01) -> dict[str, float]:
    """Every commit from position `at` (commits[at]) on is `ratio` slower."""
    return {commit: ratio for commit in history.commits[at:]}


def run(history, fake, state_path, limits=None, clock=None, good=0, bad=-1):
    limits = limits or Limits()
    chosen = target(history, good, bad)
    chain = first_parent_chain(history.path, chosen.good, chosen.bad)
    state = State.open(state_path, query_of(chosen, limits))
    lines = []
    extra = {"clock": clock} if clock else {}
    return run_bisect(chosen, chain, fake, state, limits, lines.append, **extra), lines


@pytest.mark.parametrize("slow_at", [1, 7, 13, 20])
def test_the_first_bad_commit_is_found_in_about_log2_builds(make_history, fake_builds, tmp_path, slow_at):
    history = make_history(20)
    fake = fake_builds(stepped(history, slow_at))
    result, _ = run(history, fake, tmp_path / "state.json")
    assert result["verdict"] == FOUND and result["first_bad"] == history.commits[slow_at]
    # the good end, the bad end and about log2(20) candidates in between
    assert result["builds"] <= 2 + math.ceil(math.log2(20))
    assert result["builds"] == len(set(fake.calls)) + 1
    timed = [step for step in result["steps"] if step["role"] == "candidate"]
    for step in timed:
        position = history.commits.index(step["commit"])
        assert step["verdict"] == ("DIFFERENT" if position >= slow_at else "SAME")
    assert result["step"]["verdict"] == "DIFFERENT" and 1.009 < result["step"]["ratio"] < 1.011


def test_a_candidate_is_judged_against_half_the_step(make_history, fake_builds, tmp_path):
    # A step made of two: 0.3% at commit 5, then 1% more at commit 12. Half the step is about 0.65%: commit 5's
    # 0.3% lies on the good side, so the first bad commit is 12.
    history = make_history(16)
    ratios = {c: 1.003 for c in history.commits[5:12]} | {c: 1.013 for c in history.commits[12:]}
    result, _ = run(history, fake_builds(ratios), tmp_path / "state.json")
    assert result["first_bad"] == history.commits[12]
    assert "half the step" in result["rule"]


def test_a_speed_up_is_bisected_too(make_history, fake_builds, tmp_path):
    history = make_history(16)
    result, _ = run(history, fake_builds(stepped(history, 9, 0.98)), tmp_path / "state.json")
    assert result["verdict"] == FOUND and result["first_bad"] == history.commits[9]


def test_a_stopped_bisect_resumes_without_timing_a_decided_commit_again(make_history, fake_builds, tmp_path):
    history = make_history(20)
    ratios = stepped(history, 13)
    state_path = tmp_path / "state.json"
    first = fake_builds(ratios, interrupt_after=10)
    with pytest.raises(KeyboardInterrupt):
        run(history, first, state_path)
    saved = json.loads(state_path.read_text())
    decided = {s["commit"] for s in saved["steps"] if s["verdict"]}
    cut_off = [s for s in saved["steps"] if not s["verdict"]]
    assert decided and len(cut_off) == 1 and cut_off[0]["rounds"], "a commit stopped mid-way keeps its rounds"
    second = fake_builds(ratios, seed=2)
    result, lines = run(history, second, state_path)
    assert result["verdict"] == FOUND and result["first_bad"] == history.commits[13]
    assert not decided & set(second.calls), "a commit decided before is not timed again"
    resumed = next(s for s in result["steps"] if s["commit"] == cut_off[0]["commit"])
    assert len(resumed["rounds"]) == len(cut_off[0]["rounds"]) + second.calls.count(cut_off[0]["commit"])
    assert result["resumed"] and any("resuming" in line for line in lines)
    # A third run times nothing at all.
    third = fake_builds(ratios)
    again, _ = run(history, third, state_path)
    assert third.calls == [] and again["first_bad"] == history.commits[13]


def test_a_state_file_of_another_bisect_is_refused_and_kept(make_history, fake_builds, tmp_path):
    history = make_history(8)
    state_path = tmp_path / "state.json"
    run(history, fake_builds(stepped(history, 4)), state_path)
    before = state_path.read_bytes()
    with pytest.raises(BisectError, match="another bisect"):
        run(history, fake_builds({}), state_path, good=1)
    state_path.write_text("{ not json")
    with pytest.raises(BisectError, match="not a bisect state file"):
        run(history, fake_builds({}), state_path)
    assert state_path.read_text() == "{ not json"
    assert before


def test_a_commit_that_cannot_be_timed_is_skipped_and_named(make_history, fake_builds, tmp_path):
    history = make_history(16)
    broken = {history.commits[8]: "compile error: expected a ';'"}  # the first candidate the search takes
    fake = fake_builds(stepped(history, 11), broken)
    result, _ = run(history, fake, tmp_path / "state.json")
    assert result["verdict"] == FOUND and result["first_bad"] == history.commits[11]
    assert result["skipped"] == [{"commit": history.commits[8], "why": "compile error: expected a ';'"}]
    assert next(s for s in result["steps"] if s["commit"] == history.commits[8])["verdict"] == SKIPPED


def test_skipped_commits_next_to_the_step_leave_it_unknown_naming_them(make_history, fake_builds, tmp_path):
    history = make_history(16)
    broken = {history.commits[10]: "wrong result: relative error 0.3"}
    result, _ = run(history, fake_builds(stepped(history, 10), broken), tmp_path / "state.json")
    assert result["verdict"] == UNKNOWN and result["first_bad"] is None
    assert result["remaining"] == history.commits[10:12]
    assert history.commits[10][:12] in result["why"]


def test_unknown_when_the_builds_run_out_naming_what_remains(make_history, fake_builds, tmp_path):
    history = make_history(20)
    result, _ = run(history, fake_builds(stepped(history, 13)), tmp_path / "state.json", Limits(max_builds=4))
    assert result["verdict"] == UNKNOWN and result["builds"] == 4
    assert "builds allowed ran out" in result["why"]
    assert history.commits[13] in result["remaining"] and len(result["remaining"]) < 20
    assert result["remaining"] == history.commits[history.commits.index(result["remaining"][0]):
                                                  history.commits.index(result["remaining"][-1]) + 1]


def test_unknown_when_the_time_runs_out(make_history, fake_builds, tmp_path):
    history = make_history(20)
    ticks = iter(range(0, 10_000, 10))  # every reading of the clock is ten seconds later
    result, _ = run(history, fake_builds(stepped(history, 13)), tmp_path / "state.json", Limits(budget_s=150),
                    clock=lambda: next(ticks))
    assert result["verdict"] == UNKNOWN and "time allowed ran out" in result["why"]
    assert result["first_bad"] is None and history.commits[13] in result["remaining"]


def test_no_step_when_the_ends_are_the_same(make_history, fake_builds, tmp_path):
    history = make_history(10)
    fake = fake_builds({})
    result, _ = run(history, fake, tmp_path / "state.json")
    assert result["verdict"] == NO_STEP and result["first_bad"] is None
    assert set(fake.calls) == {history.commits[-1]}, "only the bad end is timed"


def test_a_noisy_candidate_near_half_the_step_is_left_unknown_after_its_rounds(make_history, fake_builds, tmp_path):
    history = make_history(4)
    # commit 2 sits on half the step, its rounds spread 1%: five rounds cannot settle which side it is on
    ratios = {history.commits[2]: math.sqrt(1.01), history.commits[3]: 1.01, history.commits[4]: 1.01}
    limits = Limits(schedule=CompareSchedule(max_rounds=5))
    fake = fake_builds(ratios, noise_of={history.commits[2]: 0.01})
    result, _ = run(history, fake, tmp_path / "state.json", limits)
    step = next(s for s in result["steps"] if s["commit"] == history.commits[2])
    assert step["verdict"] == "UNKNOWN" and len(step["rounds"]) == 5
    assert result["verdict"] == UNKNOWN and history.commits[2] in result["remaining"]


def test_the_bad_end_that_cannot_be_timed_stops_the_bisect(make_history, fake_builds, tmp_path):
    history = make_history(4)
    fake = fake_builds({}, {history.commits[-1]: "missing: head has no kernel fp32/warptile"})
    with pytest.raises(BisectError, match="bad end .* cannot be timed"):
        run(history, fake, tmp_path / "state.json")


def test_the_pooled_rule_decides_where_each_commits_own_rounds_left_it_unknown(make_history, fake_builds, tmp_path):
    """A noisy case (0.3% a round) and a 1% step: judged on its own three to five rounds a candidate stays UNKNOWN;
    with the spread pooled over the bisect's commits the same rounds decide it."""
    history = make_history(16)
    schedule = CompareSchedule(max_rounds=5)
    found = {}
    for pooled in (False, True):
        fake = fake_builds(stepped(history, 11), noise=0.003, seed=4)
        result, _ = run(history, fake, tmp_path / f"state-{pooled}.json", Limits(schedule=schedule, pooled=pooled))
        found[pooled] = result
    assert found[False]["verdict"] == UNKNOWN
    assert found[True]["verdict"] == FOUND and found[True]["first_bad"] == history.commits[11]
    assert found[True]["spread"].startswith("pooled")


@pytest.mark.parametrize("extra", [0, search.BAD_END_EXTRA_ROUNDS])
def test_a_bad_end_its_nine_rounds_leave_open_gets_rounds_more(make_history, fake_builds, tmp_path, monkeypatch, extra):
    """A 0.5% step at 0.14% round noise, no noise file: the bad end is timed first, with nothing to pool with, and
    these nine rounds leave its interval across the threshold. With no rounds past the others' most the bisect ends
    UNKNOWN there; with them it takes a few more, its looks spending over them all, and finds the step."""
    monkeypatch.setattr(search, "BAD_END_EXTRA_ROUNDS", extra)
    history = make_history(16)
    result, _ = run(history, fake_builds(stepped(history, 11, 1.005), noise=0.0014, seed=5), tmp_path / "state.json")
    bad_end = next(s for s in result["steps"] if s["role"] == search.BAD_END)
    if extra == 0:
        assert result["verdict"] == UNKNOWN and len(bad_end["rounds"]) == 9
        assert result["why"].startswith("whether there is a step is not settled")
    else:
        assert result["verdict"] == FOUND and result["first_bad"] == history.commits[11]
        assert 9 < len(bad_end["rounds"]) <= 9 + extra
