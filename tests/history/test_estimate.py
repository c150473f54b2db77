"""The history's estimate of the time left: from the measuring process's own reports and asv's lines, not asv's
percent alone, which counts benchmark processes while one of them holds most of a commit's time."""

import json
import random

from sgemm.history.estimate import PRIOR_PAIRING_S, PRIOR_READER_S, PRIOR_WEIGHT_CASES, RunClock
from sgemm.history.progress import RunState

CASES, BENCHMARKS = 275, 34  # asv counts benchmarks; each runs a process a case
# What each benchmark's reading costs against the rest, in asv's order: on the GPU box asv's percent moved evenly
# while the readers ran, but the first steps after the measuring took about twice as long
# (lab/2026-11-28-history-sharding).
BENCHMARK_WEIGHTS = [2.5] * 3 + [1.0] * 31
COMPILE_S, REFERENCE_BUILDS_S = 15.0, 25.0  # before the NVBench phase's first case, and the pairing's
READER_S = 0.01  # a reader process on this box (the prior says PRIOR_READER_S)
# What pairing a case costs on this box, in the suite's order: the FP32 ladder first at a pace of its own, the
# power-capped tensor-core kernels last, each with a warm-up of its own.
SUITE_PAIRING_S = [0.4] * 165 + [1.5] * 110
TIMING_S = [0.1] * 165 + [0.3] * 110
AFTER_S, AFTER_PRIOR_S = 8.0, 10.0  # the summary and the site after asv, and what the history adds for them
CHARGED, ENERGY_S, ENERGY_BOUND_S = 46, 3.0, 3.3  # cases charged energy, what each takes, the bound it is given


def digest_order(costs):
    """The same costs in an order unrelated to them, as sgemm.measuring.record pairs them."""
    shuffled = list(costs)
    random.Random(7).shuffle(shuffled)
    return shuffled


def one_commit(commits: int = 1, pairing_s=None, charged: int = CHARGED):
    """A run of `commits` commits as (time, asv line or measuring record) events, and when it ends; `charged` cases
    are charged energy after the pairing."""
    pairing_s = digest_order(SUITE_PAIRING_S) if pairing_s is None else pairing_s
    events, now = [(0.0, "· Creating environments"), (30.0, "· Discovering benchmarks"),
                   (40.0, f"· Running {BENCHMARKS * commits} total benchmarks ({commits} commits * 1 environments * "
                    f"{BENCHMARKS} benchmarks)")], 40.0
    for commit in range(commits):
        base = 100 * commit / commits
        events.append((now, f"[{base:6.2f}%] · For sgemm commit {commit + 1:08x}abcd <main>:"))
        events.append((now, {"phase": "timing", "done": 0, "total": CASES}))
        now += COMPILE_S
        events.append((now, {"phase": "timing", "done": 0, "total": CASES}))
        for done, cost in enumerate(TIMING_S, 1):
            now += cost
            events.append((now, {"phase": "timing", "done": done, "total": CASES}))
        events.append((now, {"phase": "pairing", "done": 0, "total": CASES}))
        now += REFERENCE_BUILDS_S
        events.append((now, {"phase": "pairing", "done": 0, "total": CASES}))
        for done, cost in enumerate(pairing_s, 1):
            now += cost
            events.append((now, {"phase": "pairing", "done": done, "total": CASES}))
        if charged:
            events.append((now, {"phase": "energy", "done": 0, "total": charged}))
            for done in range(1, charged + 1):
                now += ENERGY_S
                events.append((now, {"phase": "energy", "done": done, "total": charged}))
        events.append((now, {"phase": "done", "done": CASES, "total": CASES}))
        for benchmark, weight in enumerate(BENCHMARK_WEIGHTS, 1):
            now += weight * CASES * READER_S  # the measuring's benchmark, too, then reads every case
            percent = base + 100 * benchmark / BENCHMARKS / commits
            events.append((now, f"[{percent:6.2f}%] ··· bench_gemm.Gemm.track_x_{benchmark}    ok"))
    return events, now + AFTER_S


def replay(events, end, energy_s: float = CHARGED * ENERGY_BOUND_S):
    """At every event after the first minute: (time, the clock's estimate, asv's percent extrapolated, truth), the
    clock told that energy costs `energy_s` a commit."""
    clock, state, rows = RunClock(CASES, energy_s=energy_s), RunState(), []
    for when, what in events:
        if isinstance(what, dict):
            clock.read_measuring(json.dumps(what), when)
        else:
            clock.read(what, when)
            state.read(what)
        if when >= 60 and end - when > 1:
            naive = when * (100 - state.percent) / state.percent if state.percent >= 1 else None
            rows.append((when, clock.left(when) + AFTER_PRIOR_S, naive, end - when))
    return rows


def ratio(a, b):
    return max(a, b) / min(a, b)


def worst(rows):
    return max(ratio(estimate, truth) for _, estimate, _, truth in rows)


def test_the_estimate_is_within_twice_the_truth_where_asvs_percent_is_far_off():
    rows = replay(*one_commit())
    assert worst(rows) <= 2, max(rows, key=lambda r: ratio(r[1], r[3]))
    # asv's percent alone, where it has one: far off while the measuring runs (this test fails on it)
    assert max(ratio(naive, truth) for _, _, naive, truth in rows if naive) > 5


def test_cases_paired_in_the_suites_order_would_mislead_the_estimate():
    """Why the measuring pairs in an order unrelated to cost: the same costs, cheap first, put the estimate
    beyond 2x of the truth."""
    events, end = one_commit(pairing_s=SUITE_PAIRING_S, charged=0)
    assert worst(replay(events, end, energy_s=0.0)) > 2
    events, end = one_commit(charged=0)
    assert worst(replay(events, end, energy_s=0.0)) <= 2


def test_later_commits_are_counted_at_the_last_whole_commits_time():
    assert worst(replay(*one_commit(commits=3))) <= 2


def test_the_energy_step_is_counted_before_it_begins():
    """The history charging energy at 8192 spent 69 s on it after the pairing, which the estimate did not know of
    (lab/2026-11-28-history-sharding): the caller gives its bound."""
    events, end = one_commit()
    assert worst(replay(events, end)) <= 2
    assert worst(replay(events, end, energy_s=0.0)) > worst(replay(events, end))


def test_the_readers_own_pace_is_taken_only_once_half_of_them_are_read(monkeypatch):
    """The first benchmarks after the measuring read slower than the rest: their pace, taken from the first few,
    overshoots (a line of the GPU box's run said 138 s with 68 s left)."""
    from sgemm.history import estimate

    events, end = one_commit()
    assert worst(replay(events, end)) <= 2
    monkeypatch.setattr(estimate, "MIN_READ_SHARE", 0.02)
    assert worst(replay(events, end)) > 2


def test_the_compile_before_a_phases_first_case_is_left_out_of_its_pace():
    clock = RunClock(CASES)
    clock.read(f"· Running {BENCHMARKS} total benchmarks (1 commits * 1 environments * {BENCHMARKS} benchmarks)", 0)
    clock.read("[  0.00%] · For sgemm commit 0000000abcd <main>:", 0.0)
    readers = BENCHMARKS * CASES * PRIOR_READER_S
    clock.read_measuring(json.dumps({"phase": "pairing", "done": 0, "total": CASES}), 100.0)
    # 24 s into the reference builds, no case has been paired: the estimate is the prior's alone.
    assert abs(clock.left(124.0) - readers - CASES * PRIOR_PAIRING_S) < 1e-9
    for when, done in ((125.0, 0), (130.0, 10)):  # the reference builds took 25 s
        clock.read_measuring(json.dumps({"phase": "pairing", "done": done, "total": CASES}), when)
    each = (PRIOR_WEIGHT_CASES * PRIOR_PAIRING_S + 5.0) / (PRIOR_WEIGHT_CASES + 10)  # 5 s for 10 cases, not 30
    assert abs(clock.left(130.0) - readers - (CASES - 10) * each) < 1e-9


def test_one_slow_first_case_does_not_set_the_pace_of_the_rest(monkeypatch):
    """A shard's first paired case took about 3x the pace of the rest, and the estimate made from it alone read
    2.2x the truth (lab/2026-11-28-history-sharding, two GPUs): the phase's prior weighs in until its cases outweigh
    it."""
    from sgemm.history import estimate

    def measuring_left_after_the_first_case():
        clock = RunClock(171, energy_s=0.0)
        clock.read("· Running 34 total benchmarks (1 commits * 1 environments * 34 benchmarks)", 0)
        clock.read("[  0.00%] · For sgemm commit 0000000abcd <main>:", 0.0)
        clock.read_measuring(json.dumps({"phase": "pairing", "done": 0, "total": 171}), 100.0)
        clock.read_measuring(json.dumps({"phase": "pairing", "done": 1, "total": 171}), 101.6)
        return clock._measuring_left(101.6)

    truth = 170 * 0.55  # the rest at the prior's pace, or about
    assert ratio(measuring_left_after_the_first_case(), truth) <= 1.5
    monkeypatch.setattr(estimate, "PRIOR_WEIGHT_CASES", 0)
    assert ratio(measuring_left_after_the_first_case(), truth) > 2


def test_the_readers_are_counted_a_process_a_case_before_their_own_pace_is_known():
    clock = RunClock(CASES)
    clock.read(f"· Running {BENCHMARKS} total benchmarks (1 commits * 1 environments * {BENCHMARKS} benchmarks)", 0)
    clock.read("[  0.00%] · For sgemm commit 0000000abcd <main>:", 0.0)
    clock.read_measuring(json.dumps({"phase": "done", "done": CASES, "total": CASES}), 300.0)
    assert clock.left(300.0) == BENCHMARKS * CASES * PRIOR_READER_S


def test_a_run_whose_measuring_reports_nothing_still_has_an_estimate_from_the_priors():
    """An old commit's measuring code writes no progress: the priors stand in for it."""
    events, end = one_commit()
    clock = RunClock(CASES)
    for when, what in events:
        if not isinstance(what, dict):
            clock.read(what, when)
    assert clock.left(45.0) > 0


def test_a_line_cut_short_is_no_record():
    clock = RunClock(CASES)
    assert not clock.read_measuring('{"phase": "timing", "do', 1.0)
    assert clock.read_measuring('{"phase": "timing", "done": 3, "total": 9}', 1.0)


def test_the_parts_of_a_run_are_timed_apart():
    clock = RunClock(CASES)
    for when, line in ((0.0, "· Creating environments"), (30.0, "· Discovering benchmarks"),
                       (40.0, "· Running 10 total benchmarks (1 commits * 1 environments * 10 benchmarks)")):
        clock.read(line, when)
    assert clock.parts(100.0) == {"environment": 30.0, "discovery": 10.0, "benchmarks": 60.0}
