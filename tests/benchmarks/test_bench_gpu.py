"""The GPU facts suite's version numbers (benchmarks/bench_gpu.py): a dotted version as one number asv can keep,
different versions never the same number, anything else NaN; on a box without a GPU the figures are NaN, not an
error."""

import math

import pytest

from benchmarks import bench_gpu


@pytest.mark.parametrize(("text", "number"), [("580.159.04", 580159004.0), ("535.54", 535054.0),
                                              ("13.1.0", 13001000.0), ("550", 550.0)])
def test_a_dotted_version_is_one_number(text, number):
    assert bench_gpu.version_number(text) == number


def test_different_versions_are_different_numbers():
    versions = ["580.159.04", "580.159.4", "580.15.904", "581.0.0", "580.159.05"]
    numbers = [bench_gpu.version_number(v) for v in versions]
    assert numbers[0] == numbers[1]  # 04 and 4 are one patch level
    assert len(set(numbers[1:])) == 4


@pytest.mark.parametrize("text", ["", "r580", "580.1234.1", "580..1", "v1.2"])
def test_anything_else_is_nan(text):
    assert math.isnan(bench_gpu.version_number(text))


@pytest.mark.no_gpu
def test_without_a_gpu_the_versions_are_nan_not_an_error():
    suite = bench_gpu.Gpu()
    assert math.isnan(suite.track_cublas_version()) and math.isnan(suite.track_cuda_driver_version())
