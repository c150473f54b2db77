"""Nsight Compute's readings in the reports: a real export of the details page read (its launch's figures, the
profiler's and the program's own lines passed by), a file that is none refused by name, and a report that follows
each step slower than the step above it with its reading, or says it has none."""

from pathlib import Path

import pytest

from sgemm.catalogue import load_catalogue, seeds
from sgemm.gpu import Gpu
from sgemm.site.counters import CountersError, file_name, read_counters, read_reading, step_notes
from sgemm.site.ladders import Point, write_report

# `ncu --csv --page details` of step g at 4096 on an H200 (stdout as captured: the profiler's and sgemm check's
# lines among the CSV's).
EXPORT = Path(__file__).resolve().parents[1] / "data" / "ncu-details-hopper-4096.csv"
# `ncu --csv --page details --print-details all` (the sections' charts too) of the lean K loop at 4096 on an H200,
# as tools.acceptance.ladder_counters runs it.
EXPORT_WITH_CHARTS = Path(__file__).resolve().parents[1] / "data" / "ncu-details-all-lean-loop-4096.csv"
H200 = Gpu("NVIDIA H200", 90, 132, 1980.0, "580.159.04")


def test_a_real_export_gives_its_launchs_figures():
    reading = read_reading(EXPORT)
    assert reading.figures[("Memory Workload Analysis", "", "L2 Hit Rate")] == "78.54"
    assert reading.figures[("GPU Speed Of Light Throughput", "", "Compute (SM) Throughput")] == "86.06"
    said = reading.said()
    assert said.startswith("SM throughput 86.06% of peak, memory throughput 57.25%")
    assert "L2 hit rate 78.54%" in said and "registers per thread 168" in said and "waves per SM 1" in said


def test_the_charts_give_the_tensor_pipe_over_active_cycles_and_the_largest_stall_reasons():
    reading = read_reading(EXPORT_WITH_CHARTS)
    # Two charts name a pipe "Tensor (All)": over elapsed cycles (85.78) and over active ones, the one read.
    assert reading.figures[("Compute Workload Analysis", "Pipe Utilization (% of elapsed cycles)",
                            "Tensor (All)")] == "85.78"
    assert reading.stalls()[:4] == [("Barrier", 10.89), ("MIO Throttle", 1.97), ("Wait", 1.74),
                                    ("Long Scoreboard", 1.71)]
    said = reading.said()
    assert "tensor pipe busy 90.16% of active cycles" in said and "L2 hit rate 78.56%" in said
    assert said.endswith("19.67 warp cycles per issued instruction, stalled most on Barrier 10.89, "
                         "MIO Throttle 1.97, Wait 1.74")
    # An export without the charts says neither, and no stalls.
    assert "tensor pipe" not in read_reading(EXPORT).said() and read_reading(EXPORT).stalls() == []


def test_an_idle_tensor_pipe_and_reasons_that_never_stalled_go_unsaid(tmp_path):
    header = '"ID","Section Name","Body Item Label","Metric Name","Metric Unit","Metric Value"\n'
    rows = [("Compute Workload Analysis", "", "Issue Slots Busy", "%", "50.77"),
            ("Compute Workload Analysis", "Pipe Utilization (% of active cycles)", "Tensor (All)", "%", "0.05"),
            ("Warp State Statistics", "Warp State (All Cycles)", "Stall Long Scoreboard", "inst", "1.22"),
            ("Warp State Statistics", "Warp State (All Cycles)", "Stall Sleeping", "inst", "0")]
    export = tmp_path / "fp32-warptile-4096.csv"
    export.write_text(header + "".join(",".join(f'"{cell}"' for cell in ("0", *row)) + "\n" for row in rows))
    # An FP32 step issues no tensor instruction: a busy figure of 0.05% says nothing of it.
    assert read_reading(export).said() == "issue slots busy 50.77%, stalled most on Long Scoreboard 1.22"


@pytest.mark.parametrize("content, message", [
    ("", "not an Nsight Compute CSV export of the details page"),
    ('"a","b"\n"1","2"\n', "not an Nsight Compute CSV export of the details page"),
    ('"ID","Section Name","Metric Name","Metric Value"\n', "holds no profiled launch"),
    ('"ID","Section Name","Metric Name","Metric Value"\n"0","Other","Thing","1"\n', "holds none of the figures"),
])
def test_a_file_that_is_no_reading_is_named(tmp_path, content, message):
    (tmp_path / "fp16-x-4096.csv").write_text(content)
    with pytest.raises(CountersError, match=message):
        read_counters(tmp_path, str(tmp_path))


def test_a_counters_folder_that_is_none_is_refused(tmp_path):
    with pytest.raises(CountersError, match="not a folder of Nsight Compute CSV exports"):
        read_counters(tmp_path / "nowhere", "nowhere")


def test_a_step_slower_than_the_one_above_is_followed_by_its_reading_and_the_unread_ones_by_one_line(tmp_path):
    pytest.importorskip("matplotlib")
    counters_dir = tmp_path / "counters"
    counters_dir.mkdir()
    (counters_dir / file_name("fp16/wgmma_tma_wide", 4096)).write_text(EXPORT.read_text())
    counters = read_counters(counters_dir, "counters")
    hopper = next(seed for seed in seeds() if seed.number == "hopper")
    rates = {"fp16/cublas": 690.0, "fp16/wgmma_tma": 510.0, "fp16/wgmma_tma_wide": 330.0,
             "fp16/wgmma_specialized": 430.0, "fp16/wgmma_pipelined": 640.0, "fp16/wgmma_persistent": 600.0,
             "fp16/wgmma_cluster": 660.0, "fp16/wgmma_grouped_tma_store": 650.0}
    # The last step ran at a lower clock, as the power cap leaves one case and not another: per clock it paid.
    points = [Point(name, 4096, rate, 1400.0 if name == "fp16/wgmma_grouped_tma_store" else 1500.0)
              for name, rate in rates.items()]
    write_report(tmp_path / "out", [hopper], load_catalogue(), points, H200, [], counters)
    lines = (tmp_path / "out" / "README.md").read_text().splitlines()
    notes = [line for line in lines if "did not pay" in line.lower()]
    assert notes == [
        f"- `fp16/wgmma_tma_wide` did not pay (0.65x the step above, 0.65x per SM clock). Nsight Compute, one launch: "
        f"{counters[file_name('fp16/wgmma_tma_wide', 4096)].said()}.",
        "- Did not pay, with no Nsight Compute reading in the counters folder: `fp16/wgmma_persistent` (0.94x the "
        "step above, 0.94x per SM clock); `fp16/wgmma_grouped_tma_store` (0.98x the step above, 1.06x per SM clock: "
        "it lost on the clock it ran at)."]
    assert step_notes(counters, [("fp16/wgmma_tma_wide", 0.65, None)], 4096)[0].startswith(
        "- `fp16/wgmma_tma_wide` did not pay (0.65x the step above). ")
    assert step_notes(counters, [], 4096) == []
