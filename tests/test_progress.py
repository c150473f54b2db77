"""An asv run in a few lines: the whole output in the log, the terminal told how far it is."""

import io
import sys

from sgemm import progress

ASV_LIKE = r'''
import sys, time
print("· Discovering benchmarks")
print("· Running 400 total benchmarks (2 commits * 1 environments * 200 benchmarks)")
for commit, start in (("1a2b3c4d5e6f", 0), ("9f8e7d6c5b4a", 50)):
    print(f"[{start:6.2f}%] · For sgemm commit {commit} <main>:")
    for i in range(200):
        percent = start + 50 * (i + 1) / 200
        state = "failed" if (commit, i) == ("9f8e7d6c5b4a", 7) else "ok"
        print(f"[{percent:6.2f}%] ··· bench_gemm.Gemm.track_time_{i}    {state}")
        for row in range(10):
            print(f"             {row}   table row")
sys.exit(3)
'''


def test_the_log_has_everything_and_the_terminal_a_few_lines(tmp_path):
    out = io.StringIO()
    log = tmp_path / "logs" / "asv.log"
    status, state = progress.follow_asv([sys.executable, "-c", ASV_LIKE], log, out=out)
    assert status == 3  # asv's status, passed on
    assert log.read_text().count("table row") == 4000
    lines = out.getvalue().splitlines()
    assert len(lines) <= 15, lines  # 4,400 lines of asv output
    assert lines[0] == f"asv: its full output goes to {log}"
    assert any("commit 2 of 2 (9f8e7d6c)" in line and "left" in line for line in lines)
    assert lines[-1].startswith("asv run: exit 3 after") and "400 benchmarks" in lines[-1]
    assert "failed: bench_gemm.Gemm.track_time_7" in lines[-1] and str(log) in lines[-1]
    assert state.commits == 2 and state.failed == ["bench_gemm.Gemm.track_time_7"]


def test_a_quiet_stretch_still_says_the_run_is_alive(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "QUIET_S", 0.2)
    out = io.StringIO()
    script = ("import time; print('· Running 10 total benchmarks (1 commits * 1 environments * 10 benchmarks)', "
              "flush=True); time.sleep(1.0); print('[100.00%] ··· x ok')")
    progress.follow_asv([sys.executable, "-c", script], tmp_path / "asv.log", out=out)
    assert sum("starting" in line for line in out.getvalue().splitlines()) >= 2


def test_the_estimate_is_the_time_so_far_scaled_by_what_is_left():
    state = progress.RunState()
    state.read("· Running 100 total benchmarks (4 commits * 1 environments * 25 benchmarks)")
    state.read("[ 25.00%] · For sgemm commit abcdef1234 <main>:")
    assert state.line(120) == "asv:  25% · commit 1 of 4 (abcdef12) · 2.0 min so far, about 6.0 min left"
