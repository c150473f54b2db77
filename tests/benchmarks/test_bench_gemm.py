"""The asv suite: discovery with no GPU, skips instead of errors, and the sample format asv must keep accepting."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.catalogue import default_sizes, load_catalogue, precision_names, sweep

ROOT = Path(__file__).resolve().parents[2]


def load_suite():
    sys.path.insert(0, str(ROOT))  # asv imports the suite as the package named after its directory
    try:
        return importlib.import_module("benchmarks.bench_gemm")
    finally:
        sys.path.remove(str(ROOT))


def test_parameters_come_from_the_catalogue():
    kernels, sizes, precisions = load_suite().Gemm.params
    assert set(kernels) == {k.family for k in load_catalogue().values()}
    assert sizes == default_sizes() and precisions == precision_names()


def test_the_shape_sweep_comes_from_the_catalogue_and_names_real_kernels():
    kernels, shapes = load_suite().GemmShapes.params
    sweep_kernels, sweep_shapes = sweep()
    assert kernels == sweep_kernels and set(kernels) <= set(load_catalogue())
    assert shapes == [f"{m}x{n}x{k}" for m, n, k in sweep_shapes]
    assert {m for m, _, _ in sweep_shapes} > {1024} and {k for _, _, k in sweep_shapes} > {1024}


def test_a_swept_shape_the_kernel_does_not_claim_is_a_skip(tmp_path):
    shapes = load_suite().GemmShapes()
    with pytest.raises(NotImplementedError, match="no fp32/nope kernel"):
        shapes.setup(str(tmp_path), "fp32/nope", "256x1024x1024")
    with pytest.raises(NotImplementedError, match="K to be a multiple of 4"):
        shapes.setup(str(tmp_path), "fp32/float4", "256x1024x1023")


def test_a_combination_without_a_kernel_is_a_skip(tmp_path):
    gemm = load_suite().Gemm()
    with pytest.raises(NotImplementedError, match="no fp16/naive kernel"):
        gemm.setup(str(tmp_path), "naive", 1024, "fp16")


def test_a_shape_the_kernel_does_not_claim_is_a_skip(tmp_path):
    gemm = load_suite().Gemm()
    with pytest.raises(NotImplementedError, match="M to be a multiple of 16"):
        gemm.setup(str(tmp_path), "wmma_naive", 1000, "fp16")


def test_a_size_the_kernel_is_not_timed_at_is_a_skip(tmp_path):
    gemm = load_suite().Gemm()
    with pytest.raises(NotImplementedError, match="fp32/naive is timed at 1000, 1024, 2048, 4096 alone"):
        gemm.setup(str(tmp_path), "naive", 8192, "fp32")
    with pytest.raises(NotImplementedError, match="bf16/wgmma_tma is timed at 4096, 8192 alone"):
        gemm.setup(str(tmp_path), "wgmma_tma", 1024, "bf16")


def test_asv_discovers_the_suite_without_a_gpu(tmp_path):
    out = tmp_path / "discovered.json"
    import asv

    runner = Path(asv.__file__).with_name("benchmark.py")
    subprocess.run([sys.executable, str(runner), "discover", str(ROOT / "benchmarks"), str(out)], check=True,
                   cwd=tmp_path)
    names = {entry["name"] for entry in json.loads(out.read_text())}
    assert {"bench_gemm.Gemm.track_time", "bench_gemm.Gemm.track_tflops", "bench_gemm.Gemm.track_sm_clock",
            "bench_gemm.GemmShapes.track_time", "bench_resources.Resources.track_registers",
            "bench_resources.Resources.track_spill_stores"} <= names


def test_asv_pin():
    import asv

    assert asv.__version__ == "0.6.6", "the samples format below is undocumented: re-check it before moving asv"


SYNTHETIC_SUITE = '''
class Synthetic:
    def track_time(self):
        return {"samples": [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.00], "number": 1}
    track_time.unit = "seconds"
'''


def test_asv_stores_statistics_for_a_track_benchmark_that_returns_samples(asv_run_suite):
    """Our benchmarks hand asv NVBench's samples this way; asv 0.6.6 keeps them with CI and quartiles."""
    repo = asv_run_suite("bench_synthetic", SYNTHETIC_SUITE)
    [results_file] = [p for p in (repo / "results" / "synthetic").glob("*.json") if p.name != "machine.json"]
    data = json.loads(results_file.read_text())
    row = dict(zip(data["result_columns"], data["results"]["bench_synthetic.Synthetic.track_time"]))
    assert row["result"] == [pytest.approx(1.0)]
    assert row["stats_ci_99_a"][0] < 1.0 < row["stats_ci_99_b"][0]
    assert row["stats_q_25"][0] <= 1.0 <= row["stats_q_75"][0]
    assert sorted(row["samples"][0]) == sorted([1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99, 1.00, 1.00])


def test_a_commit_whose_package_takes_square_sizes_only_still_runs_them(tmp_path, monkeypatch):
    import sgemm.measuring.record

    bound = []
    monkeypatch.setattr(sgemm.measuring.record, "asv_case",
                        lambda run_dir, name, size: bound.append((name, size)) or "case")
    suite = load_suite()
    gemm = suite.Gemm()
    gemm.setup(str(tmp_path), "naive", 1024, "fp32")
    assert bound == [("fp32/naive", 1024)] and gemm.case == "case"
    with pytest.raises(NotImplementedError, match="square shapes only"):
        suite.GemmShapes().setup(str(tmp_path), "fp32/naive", "256x1024x1024")


class Figures:
    """A case's recorded figures as a commit's package returns them; counts what each track asked under."""

    def __init__(self, reference):
        self.reference, self.asked = reference, []

    def result(self, method):
        self.asked.append(method)
        return self


WARM = {"commit": "c" * 40, "pair_ratios": [1.001, 0.999], "method": "paired in one process, L2 warm"}
FLUSHED = {**WARM, "method": "paired in one process, L2 flushed before each launch", "l2": "flushed"}


@pytest.mark.parametrize("recorded, warm, flushed", [(WARM, [1.001, 0.999], None), (FLUSHED, None, [1.001, 0.999])])
def test_the_reference_pairing_goes_to_the_track_of_its_l2_regime_and_the_other_skips(recorded, warm, flushed):
    """A commit from before the flush (its method says warm, no "l2") continues the warm series; one that flushes
    starts the flushed series: each series holds one regime, so neither shows a step where the regime changed."""
    suite = load_suite()
    gemm = suite.Gemm()
    gemm.case = Figures(recorded)
    for track, expected in (("track_time_over_reference", warm), ("track_time_over_reference_flushed", flushed)):
        if expected is None:
            with pytest.raises(suite.SkipNotImplemented, match="timed its reference pairing with L2"):
                getattr(gemm, track)("run")
        else:
            assert getattr(gemm, track)("run") == {"samples": expected, "number": 1}
    assert gemm.case.asked == ["time_over_reference", "time_over_reference_flushed"]  # a round count of its own each
    assert suite.Gemm.track_time_over_reference_flushed.version == suite.Gemm.track_time_over_reference.version


class Charged:
    """A case's recorded figures with an energy reading (or none, as a commit from before energy was charged)."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def result(self, method):
        assert method == "joules_per_gemm"
        return self


READING = {"joules_per_launch": 1.19, "power_w": 690.0, "window_s": 2.1, "error_bound": 0.005, "flag": ""}


@pytest.mark.parametrize("case, outcome", [
    (Charged(energy=READING), 1.19),
    (Charged(energy={**READING, "flag": "implied power 912 W over 2.10 s is above the board's enforced limit"}),
     "energy reading flagged, not recorded: implied power 912 W"),
    (Charged(energy={"missing": "no energy counter on the NVIDIA L40S: NVML has no energy counter"}),
     "no energy counter on the NVIDIA L40S"),
    (Charged(energy={}), "energy not charged"),
    (Charged(), "energy not charged"),  # a commit whose results have no energy at all
])
def test_joules_per_gemm_is_recorded_only_from_an_unflagged_reading_and_skips_saying_why(case, outcome):
    suite = load_suite()
    gemm = suite.Gemm()
    gemm.case = case
    if isinstance(outcome, str):
        with pytest.raises(suite.SkipNotImplemented, match=outcome.replace("(", r"\(")):
            gemm.track_joules_per_gemm("run")
    else:
        assert gemm.track_joules_per_gemm("run") == outcome
    assert suite.Gemm.track_joules_per_gemm.unit == "J"
