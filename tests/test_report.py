"""Seed ladder reports: tables from points, points from real asv results, and the files written."""

import pytest

from sgemm.catalogue import load_catalogue, seeds
from sgemm.report import Gpu, Point, ReportError, ladder, markdown_table, points_from_asv, seed_kernels, write_report

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
    assert naive.kernel == "fp32/naive" and naive.tflops == 5.0 and naive.percent_of_cublas == pytest.approx(10.0)
    assert naive.percent_of_peak == pytest.approx(100 * 5.0 / (132 * 256 * 1980e6 / 1e12))
    assert rows[2].tflops is None  # not measured: shown as a gap, never as a number
    assert "| Tiled | `fp32/smem_tile` | - | - | - | - |" in markdown_table(rows)


def test_the_fp16_ladder_of_seed_001_uses_the_fp16_baseline():
    rows = ladder(SEEDS["001"], "fp16", 2048, [Point("fp16/cublas", 2048, 600.0, 1700.0)], KERNELS, H100)
    assert rows[0].kernel == "fp16/cublas" and rows[0].percent_of_cublas == pytest.approx(100.0)
    assert {r.kernel for r in rows} >= {"fp16/wmma_naive", "fp16/mma_unrolled"}


def test_without_gpu_facts_there_is_no_percent_of_peak():
    rows = ladder(SEEDS["000"], "fp32", 4096, [Point("fp32/naive", 4096, 6.0, 1900.0)], KERNELS, Gpu("some GPU"))
    assert all(r.percent_of_peak is None for r in rows)


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


def test_the_report_holds_every_seed_table_and_a_plot_per_ladder(tmp_path):
    pytest.importorskip("matplotlib")
    points = [Point(name, size, rate * size / 4096, 1980.0) for size in (1024, 2048, 4096)
              for name, rate in (("fp32/cublas", 50.0), ("fp32/naive", 6.0), ("fp32/float4", 36.0),
                                 ("fp16/cublas", 700.0), ("fp16/mma_unrolled", 400.0))]
    written = write_report(tmp_path, list(SEEDS.values()), KERNELS, points, H100, ["- Date: today"])
    names = {p.name for p in written}
    assert {"README.md", "points.json", "000-fp32.png", "001-fp32.png", "001-fp16.png", "004-fp32.png"} <= names
    readme = (tmp_path / "README.md").read_text()
    assert "# Seed ladders on NVIDIA H100 80GB HBM3" in readme and "- Date: today" in readme
    assert "| Transposed | `fp32/float4` | 18.00 | 72.0 |" in readme  # seed 001's table is at 2048
    assert (tmp_path / "001-fp16.png").read_bytes()[:4] == b"\x89PNG"
