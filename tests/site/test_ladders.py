"""Seed ladder reports: tables from points, points from real asv results, and the files written."""

import json
import math

import pytest
from conftest import write_asv_run

from sgemm.catalogue import load_catalogue, seeds
from sgemm.gpu import Gpu
from sgemm.measuring import record
from sgemm.measuring.record import CaseResult
from sgemm.results import asvsuite
from sgemm.site import ladders
from sgemm.site.ladders import (GENERATED_NOTE, SM_CLOCK_NOTE, Point, ReportError, header_lines, ladder, ladder_figure,
                                ladder_sizes, markdown_table, measured_points, plot_ladder, points_from_asv,
                                points_from_cases, read_points, seed_kernels, series_styles, size_tick_labels,
                                write_report)

KERNELS = load_catalogue()
SEEDS = {seed.number: seed for seed in seeds()}
H100 = Gpu("NVIDIA H100 80GB HBM3", 90, 132, 1980.0, "580.159.04")


def test_every_origin_names_a_seed_and_every_seed_has_kernels():
    named = {origin.seed for kernel in KERNELS.values() for origin in kernel.origins}
    assert named == {seed.file for seed in SEEDS.values()}
    assert all(seed_kernels(seed, KERNELS) for seed in SEEDS.values())


def test_a_ladder_is_the_seeds_steps_against_cublas_and_peak():
    points = [Point("fp32/cublas", 2048, 50.0, 1980.0), Point("fp32/naive", 2048, 5.0, 1900.0),
              Point("fp32/naive", 4096, 6.0, 1900.0)]
    rows = ladder(SEEDS["001"], "fp32", 2048, points, KERNELS, H100)
    assert [r.label for r in rows[:3]] == ["cuBLAS", "Naive", "Tiled"]
    naive = rows[1]
    assert naive.kernel == "fp32/naive" and naive.figures.tflops == 5.0
    assert naive.figures.percent_of_cublas == pytest.approx(10.0)
    assert naive.figures.percent_of_peak == pytest.approx(100 * 5.0 / (132 * 256 * 1980e6 / 1e12))
    assert rows[2].figures.tflops is None  # not measured: shown as a gap, never as a number
    assert "| Tiled | `fp32/smem_tile` | - | - | - | - | - | - |" in markdown_table(rows)
    assert markdown_table(rows).startswith("| step | kernel | TFLOP/s | % of cuBLAS | % of peak "
                                           "| median SM clock (MHz) |")


def test_each_step_says_what_it_bought_over_the_step_above():
    points = [Point("fp32/cublas", 2048, 50.0, 1980.0), Point("fp32/naive", 2048, 5.0, 1900.0),
              Point("fp32/smem_tile", 2048, 7.5, 1900.0), Point("fp32/register_cache", 2048, float("nan"), 1900.0),
              Point("fp32/float4", 2048, 30.0, 1900.0)]
    rows = ladder(SEEDS["001"], "fp32", 2048, points, KERNELS, H100)
    assert [r.kernel for r in rows[:6]] == ["fp32/cublas", "fp32/naive", "fp32/smem_tile", "fp32/thread_tile_1d",
                                            "fp32/register_cache", "fp32/float4"]
    assert [r.over_step_above for r in rows[:3]] == [None, None, pytest.approx(1.5)]  # not over cuBLAS's row
    assert rows[3].over_step_above is None  # not measured itself
    assert rows[5].over_step_above is None  # the step above has no figure
    assert "| Tiled | `fp32/smem_tile` | 7.50 | 15.0 | " in markdown_table(rows)
    assert markdown_table(rows).splitlines()[4].endswith(" | 1.50 | 1.50 |")


def test_each_step_also_says_what_it_bought_at_one_sm_clock():
    # At the power cap the step above ran at a higher clock: slower as timed, faster a clock.
    points = [Point("fp32/cublas", 2048, 50.0, 1980.0), Point("fp32/naive", 2048, 5.0, 1980.0),
              Point("fp32/smem_tile", 2048, 4.9, 1800.0), Point("fp32/thread_tile_1d", 2048, 6.0, float("nan"))]
    rows = ladder(SEEDS["001"], "fp32", 2048, points, KERNELS, H100)
    assert rows[2].over_step_above == pytest.approx(0.98)
    assert rows[2].over_step_above_per_clock == pytest.approx(0.98 * 1980 / 1800)
    assert rows[3].over_step_above == pytest.approx(6.0 / 4.9) and rows[3].over_step_above_per_clock is None
    assert markdown_table(rows).splitlines()[4].endswith(" | 0.98 | 1.08 |")


def test_the_fp16_ladder_of_seed_001_uses_the_fp16_baseline():
    rows = ladder(SEEDS["001"], "fp16", 2048, [Point("fp16/cublas", 2048, 600.0, 1700.0)], KERNELS, H100)
    assert rows[0].kernel == "fp16/cublas" and rows[0].figures.percent_of_cublas == pytest.approx(100.0)
    assert {r.kernel for r in rows} >= {"fp16/wmma_naive", "fp16/mma_unrolled"}


def test_without_gpu_facts_there_is_no_percent_of_peak():
    rows = ladder(SEEDS["000"], "fp32", 4096, [Point("fp32/naive", 4096, 6.0, 1900.0)], KERNELS, Gpu("some GPU"))
    assert all(r.figures.percent_of_peak is None for r in rows)


GEMM_SUITE = """
class Gemm:
    params = [["cublas", "naive", "float4"], [1024, 4096], ["fp32", "fp16"]]
    param_names = ["kernel", "size", "precision"]

    def setup(self, kernel, size, precision):
        if precision == "fp16" and kernel != "cublas":
            raise NotImplementedError("no such kernel")

    def track_tflops(self, kernel, size, precision):
        return {"cublas": 50.0, "naive": 5.0, "float4": 35.0}[kernel] * size / 4096 * (10 if precision == "fp16" else 1)

    def track_sm_clock(self, kernel, size, precision):
        return 1900.0 + size / 1024
"""


def test_points_come_from_what_asv_recorded(asv_run_suite):
    repo = asv_run_suite("bench_gemm", GEMM_SUITE, machine="nvidia-h100-80gb-hbm3")
    points, commit, facets = points_from_asv(repo / "results", "nvidia-h100-80gb-hbm3")
    found = {(p.kernel, p.size): (p.tflops, p.sm_clock_mhz) for p in points}
    assert found[("fp32/float4", 4096)] == (35.0, 1904.0)
    assert found[("fp16/cublas", 1024)] == (125.0, 1901.0)
    assert ("fp16/naive", 1024) not in found  # a skip is no point
    assert len(points) == 8 and len(commit) == 40 and facets["machine"] == "nvidia-h100-80gb-hbm3"


def test_a_missing_machine_or_commit_is_a_clear_error(asv_run_suite, tmp_path):
    with pytest.raises(ReportError, match="no asv results for machine 'nowhere'.*machines there: none"):
        points_from_asv(tmp_path, "nowhere")
    repo = asv_run_suite("bench_gemm", GEMM_SUITE)
    with pytest.raises(ReportError, match="no Gemm results for machine 'synthetic' at commit ffff"):
        points_from_asv(repo / "results", "synthetic", commit="ffff")


def test_a_commit_prefix_that_matches_two_measured_commits_is_refused_not_read_as_the_newest(tmp_path):
    figures = {(asvsuite.GEMM, asvsuite.TFLOPS): {("naive", 1024, "fp32"): [5.0]}}
    for commit, date_ms in (("ab1" + "0" * 37, 1_000), ("ab2" + "0" * 37, 2_000)):
        write_asv_run(tmp_path, "box", commit, date_ms, figures)
    with pytest.raises(ReportError, match="--commit ab matches 2 measured commits .*ab1000000000, ab2000000000.*"
                                          "give more of it"):
        points_from_asv(tmp_path, "box", commit="ab")
    assert points_from_asv(tmp_path, "box", commit="ab1")[1].startswith("ab1")


def test_the_report_holds_every_seed_table_and_a_plot_per_ladder(tmp_path):
    pytest.importorskip("matplotlib")
    points = [Point(name, size, rate * size / 4096, 1980.0) for size in (1024, 2048, 4096)
              for name, rate in (("fp32/cublas", 50.0), ("fp32/naive", 6.0), ("fp32/float4", 36.0),
                                 ("fp16/cublas", 700.0), ("fp16/mma_unrolled", 400.0))]
    written = write_report(tmp_path, list(SEEDS.values()), KERNELS, points, H100, ["- Date: today"])
    names = {p.name for p in written}
    assert {"README.md", "points.json", "000-fp32.png", "001-fp32.png", "001-fp16.png", "004-fp32.png"} <= names
    readme = (tmp_path / "README.md").read_text()
    assert readme.startswith(f"{GENERATED_NOTE}\n\n# Seed ladders on NVIDIA H100 80GB HBM3")
    assert "- Date: today" in readme
    assert SM_CLOCK_NOTE in readme and "mean" not in readme.lower()
    assert "| Transposed | `fp32/float4` | 18.00 | 72.0 |" in readme  # seed 001's table is at 2048
    assert (tmp_path / "001-fp16.png").read_bytes()[:4] == b"\x89PNG"


def test_a_fresh_runs_points_carry_the_median_sm_clock():
    def result(kernel, m, n, k, clocks):
        return CaseResult([1e-3] * len(clocks), clocks, kernel, m, n, k, "NVIDIA H100 80GB HBM3", 1e-7)

    # A mean would read 1933.3 here, and one slow sample would pull it down further.
    points = points_from_cases({"a": result("fp32/naive", 2048, 2048, 2048, [1900.0, 1910.0, 1990.0]),
                                "b": result("fp32/naive", 2048, 1024, 2048, [1980.0]),
                                "c": RuntimeError("failed")})
    assert points == [Point("fp32/naive", 2048, pytest.approx(2 * 2048**3 / 1e-3 / 1e12), 1910.0)]


def test_the_clock_note_says_median_and_why_a_reading_can_pass_the_maximum():
    assert SM_CLOCK_NOTE.startswith("Median SM clock: the median")
    assert "clock64" in SM_CLOCK_NOTE and "%globaltimer" in SM_CLOCK_NOTE and "above" in SM_CLOCK_NOTE


def test_points_json_reads_back_as_it_was_written(tmp_path):
    points = [Point("fp32/cublas", 1024, 34.5, 1983.1), Point("fp32/naive", 1024, 6.0, math.nan),
              Point("fp16/cublas", 4096, 695.25, 1712.0)]
    write_report(tmp_path, [], KERNELS, points, H100, [])
    gpu, read, source = read_points(tmp_path / "points.json")
    assert gpu == H100 and source is None
    assert [(p.kernel, p.size, p.tflops) for p in read] == [(p.kernel, p.size, p.tflops) for p in points]
    assert read[0].sm_clock_mhz == 1983.1 and math.isnan(read[1].sm_clock_mhz)


def test_points_json_keeps_what_the_figures_came_from(tmp_path):
    write_report(tmp_path, [], KERNELS, [Point("fp32/cublas", 1024, 34.5, 1983.1)], H100, [],
                 source="asv results of machine `box`, commit 0123456789ab")
    assert read_points(tmp_path / "points.json")[2] == "asv results of machine `box`, commit 0123456789ab"


def test_a_points_file_that_is_not_a_reports_is_a_clear_error(tmp_path):
    (tmp_path / "points.json").write_text(json.dumps([{"machine": "a cross-GPU page's"}]))
    with pytest.raises(ReportError, match="cannot read the points of a seed ladder report from .*points.json"):
        read_points(tmp_path / "points.json")
    with pytest.raises(ReportError, match="cannot read the points"):
        read_points(tmp_path / "missing.json")


def test_every_series_of_a_long_ladder_has_its_own_colour_and_marker():
    names = [f"fp32/kernel_{index}" for index in range(40)] + ["fp32/cublas"]
    styles = series_styles(names)
    assert list(styles) == names
    assert len({(style["color"], style["marker"]) for style in styles.values()}) == len(names)
    assert styles["fp32/cublas"]["color"] == "#000000"
    assert all(style["color"] != "#000000" for name, style in styles.items() if name != "fp32/cublas")


def test_close_sizes_get_their_tick_labels_on_two_lines():
    assert size_tick_labels([1000, 1024, 2048, 4096]) == ["1000", "\n1024", "2048", "4096"]
    assert size_tick_labels([512, 1024, 2048]) == ["512", "1024", "2048"]
    assert size_tick_labels([]) == []


SEED_002_SIZES = (1000, 1024, 2048, 4096)


@pytest.fixture
def seed_002():
    """Seed 002's FP32 ladder: cuBLAS and 15 steps, two of which are the same kernel, measured at four sizes."""
    pytest.importorskip("matplotlib")
    names = [row.kernel for row in ladder(SEEDS["002"], "fp32", 4096, [], KERNELS, H100)]
    assert len(names) == 16 and len(set(names)) == 15
    points = [Point(name, size, 1.0 + index + size / 4096, 1980.0) for index, name in enumerate(names)
              for size in SEED_002_SIZES]
    return names, points


def test_the_ladder_plot_tells_every_kernel_apart_in_ladder_order(seed_002):
    names, points = seed_002
    figure = ladder_figure("002 FP32", names, points)
    axes = figure.axes[0]
    lines = axes.get_lines()
    unique = list(dict.fromkeys(names))
    assert [line.get_label() for line in lines] == unique
    assert len({(line.get_color(), line.get_marker()) for line in lines}) == len(unique) == 15
    legend = axes.get_legend()
    assert [text.get_text() for text in legend.get_texts()] == unique  # ladder order, each kernel once
    cublas, *others = lines
    assert cublas.get_label() == "fp32/cublas" and cublas.get_color() == "#000000"
    assert all(cublas.get_linewidth() > line.get_linewidth() for line in others)


def test_the_ladder_plot_has_a_log_size_axis_labelled_with_the_sizes(seed_002):
    names, points = seed_002
    axes = ladder_figure("002 FP32", names, points).axes[0]
    assert axes.get_xscale() == "log" and axes.xaxis.get_transform().base == 2
    assert list(axes.get_xticks()) == list(SEED_002_SIZES)
    assert [label.get_text().strip() for label in axes.get_xticklabels()] == [str(s) for s in SEED_002_SIZES]
    assert axes.xaxis.get_minorticklocs().size == 0


def test_the_ladder_legend_lies_clear_of_the_data(seed_002):
    names, points = seed_002
    figure = ladder_figure("002 FP32", names, points)
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    axes = figure.axes[0]
    legend, frame = axes.get_legend().get_window_extent(renderer), axes.get_window_extent(renderer)
    assert legend.x0 >= frame.x1  # to the right of the axes, over no line
    assert figure.bbox.contains(legend.x1 - 1, legend.y0 + 1)  # and inside the picture


def test_the_ladder_png_is_written(seed_002, tmp_path):
    names, points = seed_002
    assert plot_ladder(tmp_path / "002.png", "002 FP32", names, points)
    assert (tmp_path / "002.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# As the H100's history measured them: cuBLAS FP16 at every size some FP16 kernel runs at, the Hopper ladder at two.
CUBLAS_FP16_SIZES = (1000, 1024, 2048, 4096, 8192)
HOPPER_SIZES = (4096, 8192)


@pytest.fixture
def hopper_fp16():
    pytest.importorskip("matplotlib")
    names = [row.kernel for row in ladder(SEEDS["hopper"], "fp16", 4096, [], KERNELS, H100)]
    assert names[0] == "fp16/cublas" and len(names) > 2
    points = [Point("fp16/cublas", size, size / 10, 1500.0) for size in CUBLAS_FP16_SIZES]
    points += [Point(name, size, 300.0 + index, 1500.0) for index, name in enumerate(names[1:])
               for size in HOPPER_SIZES]
    return names, points


def test_the_hopper_plot_spans_the_ladders_own_sizes_not_the_baselines(hopper_fp16):
    names, points = hopper_fp16
    axes = ladder_figure("hopper FP16", names, points, "fp16/cublas").axes[0]
    assert list(axes.get_xticks()) == list(HOPPER_SIZES)
    left, right = axes.get_xlim()
    assert 2048 < left < 4096 and 8192 < right < 16384  # no room kept for 1000 to 2048
    cublas = next(line for line in axes.get_lines() if line.get_label() == "fp16/cublas")
    assert list(cublas.get_xdata()) == list(HOPPER_SIZES)  # cuBLAS beside the ladder, where the ladder was measured
    # Without naming the baseline, every measured size is drawn (the old picture: 60% of the width for cuBLAS alone).
    assert list(ladder_figure("hopper FP16", names, points).axes[0].get_xticks()) == list(CUBLAS_FP16_SIZES)


def test_a_ladder_of_the_baseline_alone_keeps_its_sizes(hopper_fp16):
    _, points = hopper_fp16
    assert ladder_sizes(["fp16/cublas"], points, "fp16/cublas") == list(CUBLAS_FP16_SIZES)
    assert ladder_sizes(["fp16/cublas", "fp16/wgmma_tma"], points[:5], "fp16/cublas") == list(CUBLAS_FP16_SIZES)
    nan = [Point("fp16/wgmma_tma", 2048, math.nan, math.nan)]  # a size with no rate is no size of the ladder
    assert ladder_sizes(["fp16/cublas", "fp16/wgmma_tma"], points[:5] + nan, "fp16/cublas") == list(CUBLAS_FP16_SIZES)


def test_the_report_plots_each_ladder_against_its_precisions_baseline(hopper_fp16, tmp_path, monkeypatch):
    _, points = hopper_fp16
    drawn = {}

    def plot_ladder(path, title, kernel_names, points, baseline_name=None):
        drawn[path.name] = baseline_name
        return True

    monkeypatch.setattr(ladders, "plot_ladder", plot_ladder)
    write_report(tmp_path, [SEEDS["hopper"]], KERNELS, points, H100, [])
    assert drawn == {"hopper-fp16.png": "fp16/cublas"}


def test_a_fresh_report_measures_the_ladders_steps_and_baselines_this_gpu_can_run(monkeypatch):
    asked = []

    def run_cases(cases, device, progress):
        asked.extend(case.id for case in cases)
        for index, case in enumerate(cases):
            progress(index, case)
        return {case.id: (RuntimeError("no samples\nmore") if case.kernel.name == "fp32/naive" else
                          CaseResult([1e-3], [1980.0], case.kernel.name, case.m, case.n, case.k, "H100", 0.0))
                for case in cases}

    monkeypatch.setattr(record, "run_cases", run_cases)
    said = []
    volta = Gpu("Tesla V100", 70, 80)  # below the FP16 kernels' compute capability 8.0
    points = measured_points([SEEDS["001"]], KERNELS, [64], volta, 0, said.append)
    steps = {kernel.name for _, kernel in seed_kernels(SEEDS["001"], KERNELS)}
    runnable = {name for name in steps | {"fp32/cublas", "fp16/cublas"}
                if KERNELS[name].min_compute_capability <= 70 and not KERNELS[name].shape_problem(64, 64, 64)}
    assert {case_id.rsplit("/", 1)[0] for case_id in asked} == runnable
    assert {p.kernel for p in points} == runnable - {"fp32/naive"}
    assert said[0] == f"[1/{len(asked)}] {asked[0]}" and "fp32/naive/64x64x64 left out: no samples" in said


def test_the_header_says_when_where_from_what_and_how():
    lines = header_lines(H100, "asv results of machine `h100`", "sgemm report --out docs/ladders/h100")
    assert lines[1] == "- GPU: NVIDIA H100 80GB HBM3, 132 SMs, max SM clock 1980 MHz"
    assert lines[2:5] == ["- Driver (of the box that made the report): 580.159.04",
                          "- Source: asv results of machine `h100`",
                          "- Command: `sgemm report --out docs/ladders/h100`"]
    assert header_lines(Gpu("some GPU"), "x", "y")[1] == "- GPU: some GPU"
