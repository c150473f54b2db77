"""An asv run in a few lines: the whole output in the log, the terminal told how far it is."""

import io
import sys

from sgemm.history import progress

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


ASV_COMPILING = r'''
import json, sys, time
progress = sys.argv[1]
print("· Running 5 total benchmarks (1 commits * 1 environments * 5 benchmarks)")
print("[  0.00%] · For sgemm commit 1a2b3c4d5e6f <main>:", flush=True)
time.sleep(0.3)
for done, last in ((0, None), (5, "fp32/naive on sm_90"), (10, "fp16/wgmma_tma on sm_90a")):
    with open(progress, "a") as out:  # as usage_table writes it, asv saying nothing meanwhile
        out.write(json.dumps({"done": done, "total": 10, "seconds": 2.0 * done, **({"last": last} if last else {})}))
        out.write("\n")
    time.sleep(0.3)
with open(progress, "a") as out:
    out.write('{"done": 3, "tot')  # a line still being written: not read yet
print("[ 20.00%] ··· Setting up bench_resources:18    ok", flush=True)
'''


def test_the_resource_compile_is_shown_batch_by_batch_while_asv_is_silent(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "POLL_S", 0.05)
    monkeypatch.setattr(progress, "COMPILE_LINE_S", 0)
    out = io.StringIO()
    compile_file = tmp_path / "compile.jsonl"
    _, state = progress.follow_asv([sys.executable, "-c", ASV_COMPILING, str(compile_file)], tmp_path / "asv.log",
                                   out=out, compile_progress=compile_file)
    lines = out.getvalue().splitlines()
    compiling = [line for line in lines if "resource suite" in line]
    assert compiling[0].startswith("asv:   0% · commit 1 of 1 (1a2b3c4d) · compiling every kernel for the resource "
                                   "suite: 0 of 10 programs · ")
    assert any("5 of 10 programs (last fp32/naive on sm_90), about 10 s left" in line for line in compiling)
    assert any("compiled every kernel for the resource suite (10 programs) in 20 s" in line for line in compiling)
    assert "resource suite" not in lines[-2]  # asv moved on: the line is asv's again
    assert state.compile is None


def test_a_compile_record_that_is_not_whole_is_no_record():
    state = progress.RunState()
    assert not state.read_compile('{"done": 3, "tot')
    assert not state.read_compile('{"done": "x", "total": 10, "seconds": 1}')
    assert state.read_compile('{"done": 3, "total": 10, "seconds": 1}') and state.compile["done"] == 3
