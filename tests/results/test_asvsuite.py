"""The asv contract: a case's names, its selection pattern (checked against asv's own matching) and its figures read
back from results that asv's Results API wrote."""

import math
import re

import pytest
from conftest import write_asv_run

from sgemm.catalogue import get_kernel
from sgemm.results import asvsuite
from sgemm.results.asvsuite import GEMM, ROUND_TIME, SHAPES, TIME, SuiteCase, cases_for


def test_a_square_case_names_its_kernel_shape_and_asv_entry():
    case = SuiteCase.square("fp32/warptile", 4096)
    assert (case.kernel, case.precision, case.shape) == ("fp32/warptile", "fp32", (4096, 4096, 4096))
    assert case.label == "fp32/warptile 4096x4096x4096"
    assert case.entry(TIME) == "bench_gemm.Gemm.track_time('warptile', 4096, 'fp32')"


def test_a_sweep_case_names_its_shape_and_says_it_is_of_the_sweep():
    case = SuiteCase.sweep("fp16/mma", (1024, 2048, 512))
    assert case.shape == (1024, 2048, 512)
    assert case.label == "fp16/mma 1024x2048x512 (shape sweep)"
    assert case.entry(TIME) == "bench_gemm.GemmShapes.track_time('fp16/mma', '1024x2048x512')"


def test_the_pattern_selects_exactly_its_case_and_methods_as_asv_matches_names():
    case = SuiteCase.square("fp32/float4", 1024)
    pattern = case.pattern((TIME, ROUND_TIME))
    names = [other.entry(method) for other in (case, SuiteCase.square("fp32/float4", 10240),
                                                SuiteCase.square("fp32/float4x", 1024),
                                                SuiteCase.square("fp16/float4", 1024))
             for method in (TIME, ROUND_TIME, asvsuite.TFLOPS)]
    # asv's --bench keeps a benchmark when re.search finds the pattern in "name(param, ...)"
    assert [name for name in names if re.search(pattern, name)] == [case.entry(TIME), case.entry(ROUND_TIME)]


def test_controls_are_measured_at_the_square_sizes_only():
    naive, cublas = get_kernel("fp32/naive"), get_kernel("fp32/cublas")
    cases = cases_for([naive, cublas], [1024, 2048], ["fp32/naive", "fp32/cublas"], [(64, 32, 16)],
                      controls=("fp32/cublas",))
    assert [c.label for c in cases] == ["fp32/naive 1024x1024x1024", "fp32/naive 2048x2048x2048",
                                        "fp32/naive 64x32x16 (shape sweep)",
                                        "fp32/cublas 1024x1024x1024", "fp32/cublas 2048x2048x2048"]


def test_each_kernel_is_a_case_at_its_own_sizes():
    kernels = [get_kernel("fp32/naive"), get_kernel("bf16/wgmma_tma"), get_kernel("fp16/cublas")]
    assert [c.label for c in cases_for(kernels, [4096, 8192], [], [])] == [
        "fp32/naive 4096x4096x4096", "bf16/wgmma_tma 4096x4096x4096", "bf16/wgmma_tma 8192x8192x8192",
        "fp16/cublas 4096x4096x4096", "fp16/cublas 8192x8192x8192"]
    assert len(cases_for(kernels, None, [], [])) == 4 + 2 + 5  # every size each entry lists


@pytest.fixture
def results(tmp_path):
    square = {("naive", 64, "fp32"): [2.0, 3.0, 4.0], ("float4", 64, "fp32"): None}
    sweep = {("fp32/naive", "64x32x16"): [5.0]}
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {(GEMM, TIME): square, (SHAPES, TIME): sweep})
    write_asv_run(tmp_path, "box", "b" * 40, 2_000, {(GEMM, TIME): {("naive", 64, "fp32"): [7.0]}})
    return tmp_path


def test_runs_come_oldest_first_and_by_commit(results):
    assert [run.commit for run in asvsuite.runs(results, "box")] == ["a" * 40, "b" * 40]
    assert [run.commit for run in asvsuite.runs(results, "box", "b" * 40)] == ["b" * 40]


def test_a_run_reads_values_and_samples_and_tells_failed_from_not_run(results):
    run = asvsuite.runs(results, "box", "a" * 40)[0]
    naive, float4 = SuiteCase.square("fp32/naive", 64), SuiteCase.square("fp32/float4", 64)
    assert run.value(naive, TIME) == 3.0 and run.samples(naive, TIME) == [2.0, 3.0, 4.0]
    assert run.value(float4, TIME) is None and run.samples(float4, TIME) is None  # the benchmark failed
    assert math.isnan(run.value(SuiteCase.square("fp32/naive", 128), TIME))  # no such case was run
    assert math.isnan(run.value(naive, asvsuite.TFLOPS))  # no such method was run
    assert run.samples(SuiteCase.sweep("fp32/naive", (64, 32, 16)), TIME) == [5.0]


def test_values_lists_every_recorded_case_of_a_method(results):
    run = asvsuite.runs(results, "box", "a" * 40)[0]
    values = run.values(GEMM, TIME)
    assert values[SuiteCase.square("fp32/naive", 64)] == 3.0
    assert values[SuiteCase.square("fp32/float4", 64)] is None
    assert run.values(GEMM, asvsuite.TFLOPS) == {}
    assert run.scalar(asvsuite.SM_COUNT) is None


def test_joules_are_a_track_of_the_square_cases_at_the_charged_sizes_alone():
    charged, small, swept = (SuiteCase.square("fp16/cublas", 8192), SuiteCase.square("fp16/cublas", 2048),
                             SuiteCase.sweep("fp32/naive", (4096, 4096, 4096)))
    sizes = (4096, 8192)
    assert charged.charged(sizes) and not small.charged(sizes) and not swept.charged(sizes)
    assert charged.tracks(sizes) == asvsuite.TRACKS and asvsuite.JOULES in asvsuite.TRACKS
    assert asvsuite.JOULES not in small.tracks(sizes) and asvsuite.JOULES not in swept.tracks(sizes)
    assert asvsuite.JOULES not in charged.tracks()  # a run that charges nothing runs no energy track
    assert asvsuite.JOULES not in asvsuite.GATE_TRACKS  # the gate judges time; energy is the history's
    assert re.search(charged.pattern(charged.tracks(sizes)), charged.entry(asvsuite.JOULES))


def test_a_recorded_driver_version_reads_as_nvidia_writes_it():
    assert asvsuite.driver_text(580159004.0) == "580.159.04"
    assert asvsuite.driver_text(535054003.0) == "535.54.03"
    assert asvsuite.driver_text(535054.0) == "535.54"
    assert [asvsuite.driver_text(v) for v in (None, math.nan, 0.0)] == [None, None, None]
    assert asvsuite.cuda_text(13000.0) == "13.0" and asvsuite.cuda_text(12080.0) == "12.8"
    assert asvsuite.cublas_text(130100.0) == "13.1.0" and asvsuite.cublas_text(math.nan) is None
