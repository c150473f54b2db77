"""The cross-GPU report from real asv results of two GPU boxes (the `two_gpu_results` tree of conftest.py): each
machine's run and GPU facts, the size they share, the table per precision against each GPU's own cuBLAS and peak,
and the Markdown, HTML, JSON and plots written."""

import json
import re
from dataclasses import replace

import pytest

from sgemm.catalogue import load_catalogue
from sgemm.figures import Figures
from sgemm.gpu import Gpu
from sgemm.site.crossgpu import (GpuRun, bar_figure, common_size, gpu_runs, html_table, markdown_table, read_runs,
                                 report_across_gpus, table, write_cross_gpu)
from sgemm.site.ladders import GENERATED_NOTE, SM_CLOCK_NOTE, Point, ReportError
from sgemm.style import html_with_code

KERNELS = load_catalogue()
H100, H200 = "nvidia-h100-80gb-hbm3", "nvidia-h200"
# The peak of a compute capability 9.0 GPU with 132 SMs at 1980 MHz, in TFLOP/s (see sgemm.peak).
FP32_PEAK = 132 * 256 * 1980e6 / 1e12
FP16_PEAK = 132 * 4096 * 1980e6 / 1e12


@pytest.fixture(scope="module")
def runs(two_gpu_results):
    return gpu_runs(two_gpu_results.results)


def test_every_machine_is_read_with_the_gpu_facts_of_its_own_run(two_gpu_results, runs):
    assert [run.machine for run in runs] == [H100, H200]
    h100, h200 = runs
    assert h100.gpu == Gpu("NVIDIA H100 80GB HBM3", 90, 132, 1980.0, "580.159.04")
    assert h200.gpu == Gpu("NVIDIA H200", 90, 132, 1980.0, "580.159.04")
    assert h100.commit == h200.commit == two_gpu_results.commit
    # The H100 ran cuBLAS and naive at 1024 and 2048 only; its skips are no points.
    assert sorted((p.kernel, p.size) for p in h100.points) == [
        ("fp16/cublas", 1024), ("fp16/cublas", 2048), ("fp32/cublas", 1024), ("fp32/cublas", 2048),
        ("fp32/naive", 1024), ("fp32/naive", 2048)]
    assert len(h200.points) == 12  # 3 sizes x (three fp32 kernels + fp16 cuBLAS)
    # The median of the recorded SM clock samples, and the rate of each box.
    assert Point("fp32/naive", 2048, 2.5, 1757.0) in h100.points
    assert Point("fp32/float4", 4096, 52.5, 1834.0) in h200.points
    assert Point("fp16/cublas", 1024, 187.5, 1831.0) in h200.points


def test_the_common_size_is_the_largest_every_gpu_measured(runs):
    h100, h200 = runs
    assert common_size(runs) == 2048
    assert common_size([h200]) == 4096
    assert common_size([h100]) == 2048


def test_gpus_that_share_no_size_are_a_clear_error(runs):
    h100, h200 = runs
    only_4096 = replace(h200, points=[p for p in h200.points if p.size == 4096])
    with pytest.raises(ReportError, match="the GPUs share no measured size: pass one with --size"):
        common_size([h100, only_4096])


def test_the_fp32_table_reads_each_gpu_against_its_own_cublas_and_peak(runs):
    rows = dict(table("fp32", 2048, runs, KERNELS))
    assert list(rows) == ["fp32/cublas", "fp32/naive", "fp32/float4"]  # catalogue order
    (h100_cublas, h200_cublas), (h100_naive, h200_naive), (h100_float4, h200_float4) = rows.values()
    assert h100_cublas == Figures(25.0, 100.0, pytest.approx(100 * 25.0 / FP32_PEAK), 1757.0)
    assert h200_cublas == Figures(37.5, 100.0, pytest.approx(100 * 37.5 / FP32_PEAK), 1832.0)
    assert h100_naive.tflops == 2.5 and h100_naive.percent_of_cublas == pytest.approx(10.0)
    assert h200_naive.tflops == 3.75 and h200_naive.percent_of_cublas == pytest.approx(10.0)
    assert h100_naive.percent_of_peak == pytest.approx(3.7364650)
    assert h200_naive.percent_of_peak == pytest.approx(5.6046975)
    assert h200_float4 == Figures(26.25, pytest.approx(70.0), pytest.approx(39.232883), 1832.0)
    assert h100_float4 == Figures()  # the H100 did not measure it: an empty cell, never a zero


def test_the_fp16_table_uses_the_tensor_core_peak(runs):
    assert table("fp16", 2048, runs, KERNELS) == [
        ("fp16/cublas", [Figures(250.0, 100.0, pytest.approx(100 * 250.0 / FP16_PEAK), 1757.0),
                         Figures(375.0, 100.0, pytest.approx(35.029360), 1832.0)])]


def test_a_size_one_gpu_did_not_measure_leaves_its_cells_empty(runs):
    rows = dict(table("fp32", 4096, runs, KERNELS))
    assert list(rows) == ["fp32/cublas", "fp32/naive", "fp32/float4"]
    assert all(cells[0] == Figures() for cells in rows.values())
    assert rows["fp32/float4"][1].tflops == 52.5 and rows["fp32/float4"][1].sm_clock_mhz == 1834.0
    assert table("fp32", 512, runs, KERNELS) == []  # nobody measured it: no row at all


def test_the_markdown_table_has_a_column_group_per_gpu(runs):
    text = markdown_table(table("fp32", 2048, runs, KERNELS), runs).splitlines()
    assert text[0] == ("| kernel | H100 80GB HBM3 TFLOP/s | H100 80GB HBM3 J/GEMM | H100 80GB HBM3 % cuBLAS | "
                       "H100 80GB HBM3 % peak | H100 80GB HBM3 median SM MHz | H200 TFLOP/s | H200 J/GEMM | "
                       "H200 % cuBLAS | H200 % peak | H200 median SM MHz |")
    assert text[1] == "| :--- |" + " ---: |" * 10
    # No energy charged at 2048: a gap beside each rate, never a zero.
    assert text[2:] == ["| `fp32/cublas` | 25.00 | - | 100.0 | 37.4 | 1757 | 37.50 | - | 100.0 | 56.0 | 1832 |",
                        "| `fp32/naive` | 2.50 | - | 10.0 | 3.7 | 1757 | 3.75 | - | 10.0 | 5.6 | 1832 |",
                        "| `fp32/float4` | - | - | - | - | - | 26.25 | - | 70.0 | 39.2 | 1832 |"]


def test_the_report_is_written_as_markdown_html_json_and_a_plot_per_precision(two_gpu_results, runs, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "gpus"
    written = write_cross_gpu(out, runs, KERNELS, 2048, ["Made: today", "Command: `sgemm publish`"])
    assert written == [out / "README.md", out / "index.html", out / "points.json", out / "fp32.png",
                       out / "fp16.png"]
    assert sorted(path.name for path in out.iterdir()) == ["README.md", "fp16.png", "fp32.png", "index.html",
                                                           "points.json"]
    for png in ("fp32.png", "fp16.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    commit = two_gpu_results.commit[:12]
    readme = (out / "README.md").read_text()
    assert readme.startswith(f"{GENERATED_NOTE}\n\n# GEMM kernels across GPUs, 2048x2048x2048\n\n"
                             "- Made: today\n- Command: `sgemm publish`\n")
    assert (f"- NVIDIA H100 80GB HBM3 (asv machine `{H100}`, commit {commit}; compute capability 9.0, 132 SMs, "
            "max SM clock 1980 MHz)") in readme
    assert f"- NVIDIA H200 (asv machine `{H200}`, commit {commit}; compute capability 9.0" in readme
    assert "## FP32" in readme and "## FP16" in readme
    float4 = "| `fp32/float4` | - | - | - | - | - | 26.25 | - | 70.0 | 39.2 | 1832 |"
    assert readme.index("## FP32") < readme.index(float4) < readme.index("![FP32 TFLOP/s per GPU](fp32.png)") \
        < readme.index("## FP16")
    assert "| `fp16/cublas` | 250.00 | - | 100.0 | 23.4 | 1757 | 375.00 | - | 100.0 | 35.0 | 1832 |" in readme
    assert "fp16/naive" not in readme  # no such kernel: no row

    page = (out / "index.html").read_text()
    assert '<a href="../index.html">&larr; benchmark history</a>' in page  # back to asv's pages
    assert "<title>GEMM kernels across GPUs, 2048x2048x2048</title>" in page
    assert '<th colspan="5">NVIDIA H100 80GB HBM3</th><th colspan="5">NVIDIA H200</th>' in page
    assert ("<tr><td><code>fp32/float4</code></td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>26.25</td>"
            "<td>-</td><td>70.0</td><td>39.2</td><td>1832</td></tr>") in page
    assert '<img src="fp32.png"' in page and '<img src="fp16.png"' in page
    assert "<li>Command: <code>sgemm publish</code></li>" in page and "`" not in page
    assert f"(asv machine <code>{H100}</code>, commit {commit};" in page
    assert "https://" not in page and "http://" not in page  # nothing to vendor

    data = json.loads((out / "points.json").read_text())
    assert [entry["machine"] for entry in data] == [H100, H200]
    assert data[0]["gpu"] == {"name": "NVIDIA H100 80GB HBM3", "compute_capability": 90, "sm_count": 132,
                              "max_sm_clock_mhz": 1980.0, "driver": "580.159.04", "memory_gib": None, "card": ""}
    assert data[1]["commit"] == two_gpu_results.commit
    assert {"kernel": "fp32/float4", "size": 4096, "tflops": 52.5, "sm_clock_mhz": 1834.0,
            "power_w": None, "joules_per_gemm": None} in data[1]["points"]
    assert len(data[0]["points"]) == 6 and len(data[1]["points"]) == 12  # every size, not only the one shown


@pytest.fixture(scope="module")
def factless(two_gpu_results, tmp_path_factory):
    """The two-GPU tree with two more machines that ran the Gemm class alone, so that no SM count or maximum clock
    was recorded: an A100 (compute capability 8.0 in its machine entry) and an L40S whose entry lacks it."""
    tree = two_gpu_results.copy(tmp_path_factory.mktemp("factless") / "tree")
    a100 = replace(tree.H100, machine="nvidia-a100-sxm4-80gb", gpu="NVIDIA A100-SXM4-80GB", scale=0.5,
                   sizes=(2048,), sm_clock=1400.0, compute_capability="8.0")
    l40s = replace(tree.H100, machine="nvidia-l40s", gpu="NVIDIA L40S", gpu_memory="45 GiB", scale=0.4,
                   kernels=("cublas",), sizes=(2048,), sm_clock=2490.0, compute_capability=None)
    for box in (a100, l40s):
        tree.run(box, bench="bench_gemm")
    return tree


def test_a_machine_without_gpu_facts_gets_no_percent_of_peak(factless):
    runs = gpu_runs(factless.results)
    assert [run.machine for run in runs] == ["nvidia-a100-sxm4-80gb", H100, H200, "nvidia-l40s"]
    assert runs[0].gpu == Gpu("NVIDIA A100-SXM4-80GB", 80, None, None)
    assert runs[3].gpu == Gpu("NVIDIA L40S", None, None, None)
    assert common_size(runs) == 2048

    rows = dict(table("fp32", 2048, runs, KERNELS))
    a100_cublas, h100_cublas, _, l40s_cublas = rows["fp32/cublas"]
    assert a100_cublas == Figures(12.5, 100.0, None, 1402.0)
    assert l40s_cublas == Figures(10.0, 100.0, None, 2492.0)
    assert h100_cublas.percent_of_peak == pytest.approx(100 * 25.0 / FP32_PEAK)  # the others keep theirs
    assert rows["fp32/naive"][0] == Figures(1.25, pytest.approx(10.0), None, 1402.0)
    assert rows["fp32/naive"][3] == Figures()

    out = factless.root / "gpus"
    write_cross_gpu(out, runs, KERNELS, 2048, [])
    readme = (out / "README.md").read_text()
    assert ("| `fp32/naive` | 1.25 | - | 10.0 | - | 1402 | 2.50 | - | 10.0 | 3.7 | 1757 | 3.75 | - | 10.0 | 5.6 | "
            "1832 | - | - | - | - | - |") in readme
    assert (f"- NVIDIA L40S (asv machine `nvidia-l40s`, commit {factless.commit[:12]}; SM count and max clock not "
            "recorded: % peak left out)") in readme
    page = (out / "index.html").read_text()
    assert "SM count and max clock not recorded" in page
    assert page.count("132 SMs, max SM clock 1980 MHz") == 2


def test_the_page_says_why_a_gpu_of_known_compute_capability_has_no_percent_of_peak(factless):
    out = factless.root / "gpus-a100"
    write_cross_gpu(out, gpu_runs(factless.results), KERNELS, 2048, [])
    a100 = next(line for line in (out / "README.md").read_text().splitlines() if "NVIDIA A100" in line)
    assert "compute capability 8.0" in a100
    assert "SM count and max clock not recorded" in a100


def test_a_machine_without_gemm_results_is_left_out(two_gpu_results, tmp_path):
    tree = two_gpu_results.copy(tmp_path / "tree")
    tree.run(replace(tree.H100, machine="nvidia-l4", gpu="NVIDIA L4"), bench="bench_gpu")
    assert (tree.results / "nvidia-l4" / "machine.json").is_file()
    assert [run.machine for run in gpu_runs(tree.results)] == [H100, H200]


def test_no_machines_is_a_clear_error(tmp_path):
    with pytest.raises(ReportError, match=f"no asv machine directories in {re.escape(str(tmp_path))}"):
        gpu_runs(tmp_path)
    (tmp_path / "benchmarks.json").write_text("{}")
    with pytest.raises(ReportError, match="no asv machine directories"):
        gpu_runs(tmp_path)


def test_machines_with_no_gemm_results_at_all_are_a_clear_error(two_gpu_results, tmp_path):
    tree = two_gpu_results.copy(tmp_path / "tree")
    for machine in (H100, H200):
        for run_file in (tree.results / machine).glob("*.json"):
            if run_file.name != "machine.json":
                run_file.unlink()
    with pytest.raises(ReportError, match=f"no Gemm results for any machine in {re.escape(str(tree.results))}"):
        gpu_runs(tree.results)


def test_the_report_of_a_results_tree_is_at_the_shared_size_unless_one_is_given(two_gpu_results, tmp_path):
    written = report_across_gpus(two_gpu_results.results, tmp_path / "shared", KERNELS, ["header line"])
    assert (tmp_path / "shared" / "README.md") in written
    shared = (tmp_path / "shared" / "README.md").read_text()
    assert shared.startswith(f"{GENERATED_NOTE}\n\n# GEMM kernels across GPUs, 2048x2048x2048")
    report_across_gpus(two_gpu_results.results, tmp_path / "asked", KERNELS, [], size=1024)
    assert "| `fp32/naive` | 1.25 |" in (tmp_path / "asked" / "README.md").read_text()


def test_the_page_renders_code_spans_and_says_how_the_clock_is_read(runs, tmp_path):
    out = tmp_path / "gpus"
    write_cross_gpu(out, runs, KERNELS, 2048, ["Made: from the asv results in `merged`",
                                               "Command: `sgemm publish --results merged --html site`"])
    page = (out / "index.html").read_text()
    assert "`" not in page
    assert "<li>Made: from the asv results in <code>merged</code></li>" in page
    assert "<li>Command: <code>sgemm publish --results merged --html site</code></li>" in page
    assert "<th>median SM MHz</th>" in page and "<th>SM MHz</th>" not in page
    assert html_with_code(SM_CLOCK_NOTE) in page
    assert SM_CLOCK_NOTE in (out / "README.md").read_text()


def test_points_json_reads_back_as_the_runs_it_was_written_from(runs, tmp_path):
    write_cross_gpu(tmp_path, runs, KERNELS, 2048, [])
    assert read_runs(tmp_path / "points.json") == runs
    (tmp_path / "points.json").write_text('{"gpu": {}, "points": []}')  # a seed ladder report's, not a page's
    with pytest.raises(ReportError, match="cannot read the runs of a cross-GPU page from"):
        read_runs(tmp_path / "points.json")


def test_the_bar_chart_tells_every_gpu_apart_with_the_legend_clear_of_the_bars(factless):
    pytest.importorskip("matplotlib")
    runs = gpu_runs(factless.results)
    rows = table("fp32", 2048, runs, KERNELS)
    figure = bar_figure("FP32", rows, runs)
    renderer = figure.canvas.get_renderer()
    figure.draw(renderer)
    axes = figure.axes[0]
    assert [text.get_text() for text in axes.get_legend().get_texts()] == [run.gpu.name for run in runs]
    looks = {(tuple(bars.patches[0].get_facecolor()), bars.patches[0].get_hatch()) for bars in axes.containers}
    assert len(axes.containers) == len(looks) == 4
    legend, frame = axes.get_legend().get_window_extent(renderer), axes.get_window_extent(renderer)
    assert legend.x0 >= frame.x1 and figure.bbox.contains(legend.x1 - 1, legend.y0 + 1)


def test_joules_per_gemm_stand_beside_tflops_where_charged(tmp_path):
    h100 = GpuRun(H100, Gpu("NVIDIA H100 80GB HBM3", 90, 132, 1980.0), "c" * 40,
                  [Point("fp16/cublas", 8192, 640.0, 1309.0, 690.0, 1.22),
                   Point("fp16/wgmma_grouped_tma_store", 8192, 656.0, 1313.0, 690.0, 1.19),
                   Point("fp16/wgmma_cluster", 8192, 600.0, 1300.0)])  # a reading flagged: none recorded
    rows = dict(table("fp16", 8192, [h100], KERNELS))
    assert rows["fp16/wgmma_grouped_tma_store"][0].joules_per_gemm == 1.19
    assert rows["fp16/wgmma_cluster"][0].joules_per_gemm is None
    text = markdown_table(list(rows.items()), [h100]).splitlines()
    assert text[0].startswith("| kernel | H100 80GB HBM3 TFLOP/s | H100 80GB HBM3 J/GEMM | H100 80GB HBM3 % cuBLAS")
    assert "| `fp16/cublas` | 640.00 | 1.220 | 100.0 |" in text[2]
    assert any(line.startswith("| `fp16/wgmma_cluster` | 600.00 | - |") for line in text)
    assert "<td>656.00</td><td>1.190</td>" in html_table(list(rows.items()), [h100])
    write_cross_gpu(tmp_path, [h100], KERNELS, 8192, [])
    assert read_runs(tmp_path / "points.json") == [h100]  # the page can be redrawn with its energy
    assert "J/GEMM: the board's energy a launch" in (tmp_path / "README.md").read_text()
