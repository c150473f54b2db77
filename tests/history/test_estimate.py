"""The history's estimate of the time left: from the measuring process's own reports and asv's lines, not asv's
percent alone, which counts benchmark processes while one of them holds most of a commit's time."""

import json

from sgemm.history.estimate import RunClock
from sgemm.history.progress import RunState

CASES, BENCHMARKS = 275, 3000
TIMING_S, PAIRING_S, READER_S = 0.2, 0.5, 0.02  # this box's true costs, unlike the priors


def one_commit(commits: int = 1):
    """A run of `commits` commits as (time, asv line or measuring record) events, and when it ends."""
    events, now = [(0.0, "· Creating environments"), (30.0, "· Discovering benchmarks"),
                   (40.0, f"· Running {BENCHMARKS * commits} total benchmarks ({commits} commits * 1 environments * "
                    f"{BENCHMARKS} benchmarks)")], 40.0
    for commit in range(commits):
        base = 100 * commit / commits
        events.append((now, f"[{base:6.2f}%] · For sgemm commit {commit + 1:08x}abcd <main>:"))
        events.append((now, {"phase": "timing", "done": 0, "total": CASES}))
        for done in range(1, CASES + 1):
            now += TIMING_S
            events.append((now, {"phase": "timing", "done": done, "total": CASES}))
        events.append((now, {"phase": "pairing", "done": 0, "total": CASES}))
        for done in range(1, CASES + 1):
            now += PAIRING_S
            events.append((now, {"phase": "pairing", "done": done, "total": CASES}))
        events.append((now, {"phase": "done", "done": CASES, "total": CASES}))
        for process in range(1, BENCHMARKS + 1):
            now += READER_S
            percent = base + 100 * process / BENCHMARKS / commits
            events.append((now, f"[{percent:6.2f}%] ··· bench_gemm.Gemm.track_x_{process}    ok"))
    return events, now


def replay(events, end):
    """At every event after the first minute: (time, the clock's estimate, asv's percent extrapolated, truth)."""
    clock, state, rows = RunClock(CASES), RunState(), []
    for when, what in events:
        if isinstance(what, dict):
            clock.read_measuring(json.dumps(what), when)
        else:
            clock.read(what, when)
            state.read(what)
        if when >= 60 and end - when > 1:
            naive = when * (100 - state.percent) / state.percent if state.percent >= 1 else None
            rows.append((when, clock.left(when), naive, end - when))
    return rows


def ratio(a, b):
    return max(a, b) / min(a, b)


def test_the_estimate_is_within_twice_the_truth_where_asvs_percent_is_far_off():
    rows = replay(*one_commit())
    assert all(ratio(estimate, truth) <= 2 for _, estimate, _, truth in rows), \
        max(rows, key=lambda r: ratio(r[1], r[3]))
    # asv's percent alone, where it has one: far off while the measuring runs (this test fails on it)
    assert max(ratio(naive, truth) for _, _, naive, truth in rows if naive) > 5


def test_later_commits_are_counted_at_the_last_whole_commits_time():
    rows = replay(*one_commit(commits=3))
    assert all(ratio(estimate, truth) <= 2 for _, estimate, _, truth in rows)


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
