import contextlib
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from sgemm.catalogue import get_kernel
from sgemm.gpu import Gpu
from sgemm.measuring import record
from sgemm.measuring.measure import FORBIDDEN_IN_CASE_IDS
from sgemm.measuring.record import AsvCase, CaseResult, MeasuredCase, skip_reason
from sgemm.measuring.verify import VerificationError

H100 = Gpu("NVIDIA H100 80GB HBM3", 90, 132)


def result(**changes) -> CaseResult:
    fields = dict(kernel="fp32/naive", m=1024, n=1024, k=1024, gpu="H100", relative_error=1e-7,
                  samples_s=[0.002, 0.001, 0.003], sm_clock_mhz=[1980.0, 1970.0], telemetry={"power_w_mean": 400.0})
    fields.update(changes)
    return CaseResult(**fields)


def test_figures_of_a_case():
    r = result()
    assert r.median_s == 0.002
    assert r.tflops == pytest.approx(2 * 1024**3 / 0.002 / 1e12)
    assert r.median_sm_clock_mhz == 1975.0  # the median of two clocks: their mean


def test_a_result_survives_a_round_trip(tmp_path):
    result().save(tmp_path / "r.json")
    assert CaseResult.load(tmp_path / "r.json") == result()


def test_skip_reasons():
    old_gpu = Gpu("Tesla P100", 60, 56)
    assert "needs compute capability 7.0" in skip_reason(get_kernel("fp32/naive"), 64, 64, 64, old_gpu)
    assert "multiple of 4" in skip_reason(get_kernel("fp32/float4"), 64, 63, 64, H100)
    assert skip_reason(get_kernel("fp32/float4"), 64, 64, 64, H100) is None


def test_cases_a_gpu_cannot_run_are_set_aside_with_the_reason():
    kernels = [get_kernel("fp32/naive"), get_kernel("fp32/float4")]
    runnable, skipped = record.select_cases(kernels, [(64, 64, 64), (64, 63, 64)], H100)
    assert [case.id for case in runnable] == ["fp32/naive/64x64x64", "fp32/naive/64x63x64", "fp32/float4/64x64x64"]
    assert [(case.id, "multiple of 4" in reason) for case, reason in skipped] == [("fp32/float4/64x63x64", True)]
    every_size, _ = record.select_cases([get_kernel("fp32/naive")], None, H100)
    assert [case.m for case in every_size] == list(get_kernel("fp32/naive").sizes)


def test_a_hopper_kernel_is_a_skip_with_the_reason_on_any_other_gpu():
    wgmma = get_kernel("bf16/wgmma_cluster")
    assert skip_reason(wgmma, 4096, 4096, 4096, H100) is None
    a100, b200 = Gpu("NVIDIA A100-SXM4-80GB", 80, 108), Gpu("NVIDIA B200", 100, 148)
    assert skip_reason(wgmma, 4096, 4096, 4096, a100) == (
        "bf16/wgmma_cluster is built for sm_90a, which runs on compute capability 9.0 alone; this GPU has 8.0 "
        "(NVIDIA A100-SXM4-80GB)")
    assert "this GPU has 10.0 (NVIDIA B200)" in skip_reason(wgmma, 4096, 4096, 4096, b200)
    assert skip_reason(get_kernel("bf16/cublas"), 4096, 4096, 4096, a100) is None


@pytest.fixture
def fake_measurements(monkeypatch):
    class Calls(list):
        """The cases of each measuring process; .nvbench_args: the NVBench options each was given."""

    calls, nvbench = Calls(), []

    def run_cases(cases, device=0, progress=None, nvbench_args=()):
        calls.append(cases)
        nvbench.append(nvbench_args)
        for index, case in enumerate(cases):
            if progress:
                progress(index, case)
        return {case.id: result(kernel=case.kernel.name, samples_s=[float(len(calls))]) for case in cases}

    monkeypatch.setattr(record, "run_cases", run_cases)
    measuring_stand_ins(monkeypatch)
    calls.nvbench_args = nvbench
    return calls


def measuring_stand_ins(monkeypatch):
    """What a measuring process asks of CUDA before it runs its cases, answered as on an H100."""
    from sgemm.measuring import ab

    monkeypatch.setattr(record, "device_info", lambda device=0: H100)
    monkeypatch.setattr(ab, "compile_ahead", lambda kernels, device=0: None)


def test_an_asv_run_measures_each_case_once_per_round_for_all_its_methods(tmp_path, fake_measurements):
    case = AsvCase(str(tmp_path), get_kernel("fp32/naive"), 1024, 1024, 1024)
    assert case.result("time").samples_s == [1.0]
    assert case.result("sm_clock").samples_s == [1.0]
    assert case.result("power").samples_s == [1.0]
    assert len(fake_measurements) == 1
    # a method's second call is round 2: measured afresh by whichever method asks first, read by the others
    assert case.result("power").samples_s == [2.0]
    assert case.result("time").samples_s == [2.0]
    assert len(fake_measurements) == 2
    assert sorted(p.name for p in case.dir.glob("round-*.json")) == ["round-1.json", "round-2.json"]


def test_an_asv_run_times_with_nvbench_s_brief_stopping_rule_unless_told_otherwise(tmp_path, monkeypatch,
                                                                                    fake_measurements):
    AsvCase(str(tmp_path / "a"), get_kernel("fp32/naive"), 1024, 1024, 1024).result("time")
    monkeypatch.setenv(record.NVBENCH_ARGS_VARIABLE, "--min-time 0.3 --timeout 9")
    AsvCase(str(tmp_path / "b"), get_kernel("fp32/naive"), 1024, 1024, 1024).result("time")
    assert fake_measurements.nvbench_args == [record.ASV_NVBENCH_ARGS, ("--min-time", "0.3", "--timeout", "9")]
    assert record.ASV_NVBENCH_ARGS == ("--min-time", "0.05", "--max-noise", "5", "--timeout", "5")


def test_rounds_are_keyed_explicitly_not_by_the_order_methods_run_in(tmp_path, fake_measurements):
    # A method that runs twice before another reads round 1 afterwards all the same.
    case = AsvCase(str(tmp_path), get_kernel("fp32/naive"), 1024, 1024, 1024)
    assert [case.result("time").samples_s, case.result("time").samples_s] == [[1.0], [2.0]]
    assert case.result("card").samples_s == [1.0]
    assert case.result("card").samples_s == [2.0]
    assert len(fake_measurements) == 2


def test_a_failed_measurement_fails_the_benchmark_records_nothing_and_says_why(tmp_path, monkeypatch):
    wrong = VerificationError("fp32/naive at 1024x1024x1024: relative error 0.0443 > 1e-05")
    monkeypatch.setattr(record, "run_cases", lambda cases, device=0, **_: {cases[0].id: wrong})
    measuring_stand_ins(monkeypatch)
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("SGEMM_CASE_EVENTS", str(events))
    monkeypatch.setenv("ASV_COMMIT", "c" * 40)
    case = AsvCase(str(tmp_path), get_kernel("fp32/naive"), 1024, 1024, 1024)
    with pytest.raises(record.NotMeasured, match="wrong result: .*relative error"):
        case.result("time")
    assert [p.name for p in case.dir.glob("round-*.json")] == ["round-1.not-measured.json"]
    with pytest.raises(record.NotMeasured):  # every other method of the round says the same, measuring nothing
        case.result("tflops")
    assert json.loads(events.read_text()) == {
        "commit": "c" * 40, "case": "fp32/naive/1024x1024x1024", "kind": "failed",
        "reason": "wrong result: fp32/naive at 1024x1024x1024: relative error 0.0443 > 1e-05"}


@pytest.mark.parametrize("error, reason", [
    (record.BuildError("fp32/x: NVRTC could not compile fp32_x.cu:\nline 3: error: expected a ;\n\nmore"),
     "compile error: fp32/x: NVRTC could not compile fp32_x.cu: / line 3: error: expected a ; / more"),
    (RuntimeError("NVBench recorded no samples for fp16/cublas/8192x8192x8192: timeout (all samples throttled)"),
     "no samples: NVBench recorded no samples for fp16/cublas/8192x8192x8192: timeout (all samples throttled)"),
    (KeyError("x"), "KeyError: 'x'"),
])
def test_failure_reasons_a_report_can_show(error, reason):
    assert record.failure_reason(error) == reason


def test_a_shared_gpu_is_not_measured(tmp_path, monkeypatch):
    from sgemm.measuring.telemetry import GpuProcess

    monkeypatch.setattr(record, "nvml_handle", lambda device=0: "handle")
    monkeypatch.setattr(record, "other_processes", lambda handle: [GpuProcess(4242, 1532, "python3")])
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("SGEMM_CASE_EVENTS", str(events))
    monkeypatch.setattr(record, "run_cases",
                        lambda cases, device=0, **_: pytest.fail("measured beside another process"))
    case = AsvCase(str(tmp_path), get_kernel("fp32/naive"), 1024, 1024, 1024)
    with pytest.raises(record.SharedGpu, match=r"shared with pid 4242 \(python3, 1,532 MiB\)"):
        case.result("time")
    assert json.loads(events.read_text())["kind"] == "gpu shared"
    assert not [p for p in case.dir.glob("round-*.json") if not p.name.endswith(".not-measured.json")]


def test_asv_skips_what_this_commit_or_kernel_cannot_do(tmp_path):
    with pytest.raises(NotImplementedError, match="no fp32/not_yet kernel"):
        record.asv_case(str(tmp_path), "fp32/not_yet", 1024, 1024, 1024)
    with pytest.raises(NotImplementedError, match="multiple of 4"):
        record.asv_case(str(tmp_path), "fp32/float4", 1001, 1001, 1001)


def test_a_case_measured_earlier_in_the_run_is_read_without_cuda(tmp_path, monkeypatch, fake_measurements):
    AsvCase(str(tmp_path), get_kernel("fp32/naive"), 1024, 1024, 1024).result("time")

    def no_cuda(device=0):
        raise AssertionError("CUDA must not be started to read a recorded case")

    monkeypatch.setattr(record, "device_info", no_cuda)
    assert record.asv_case(str(tmp_path), "fp32/naive", 1024, 1024, 1024).result("tflops").samples_s == [1.0]


def test_case_ids_are_valid_nvbench_axis_values():
    case_id = MeasuredCase(get_kernel("fp32/naive"), 1000, 1028, 516).id
    assert case_id == "fp32/naive/1000x1028x516"
    assert not set(case_id) & set(FORBIDDEN_IN_CASE_IDS)


@pytest.mark.gpu
def test_run_cases_verifies_measures_and_records_telemetry():
    # NVBench runs once per process: measure in a child of our own
    code = """
import json
from sgemm.measuring import record
from sgemm.catalogue import get_kernel
cases = [record.MeasuredCase(get_kernel(name), 256, 256, 256) for name in ("fp32/naive", "fp32/float4")]
results = record.run_cases(cases)
print(json.dumps({k: (vars(v) if isinstance(v, record.CaseResult) else repr(v)) for k, v in results.items()}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    for case_id in ("fp32/naive/256x256x256", "fp32/float4/256x256x256"):
        r = results[case_id]
        assert isinstance(r, dict), r
        r = CaseResult(**r)
        assert r.relative_error <= 1e-5 and r.median_s > 0 and 200 < r.median_sm_clock_mhz < 4000
        assert r.telemetry["readings"] >= 2 and r.telemetry["power_w_mean"] > 0


@pytest.mark.requires("cupy")
@pytest.mark.parametrize("cuda_says, count, driver, expected", [
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version", None, False,
     "no usable CUDA GPU: no NVIDIA driver on this machine (libcuda.so.1 cannot be loaded)"),
    ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version", None, True,
     "no usable CUDA GPU: the NVIDIA driver is older than the CUDA runtime CuPy was built for"),
    (None, 1, True, "CUDA device 3 does not exist (1 visible)"),
])
def test_no_gpu_says_whether_the_driver_is_missing_or_too_old(monkeypatch, cuda_says, count, driver, expected):
    """CuPy says "driver version is insufficient" where there is no driver at all: the reason must not send the
    reader after the wrong fix."""
    import ctypes

    import cupy

    from sgemm.measuring.record import NoGpuError, device_info

    def load(name, *args, **kwargs):
        if not driver:
            raise OSError(f"{name}: cannot open shared object file")

    def device_count():
        if cuda_says:
            raise RuntimeError(cuda_says)
        return count

    monkeypatch.setattr(ctypes, "CDLL", load)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", device_count)
    with pytest.raises(NoGpuError) as raised:
        device_info(3)
    assert str(raised.value).startswith(expected) and "insufficient" not in str(raised.value)


@pytest.mark.requires("cupy")
def test_cuda_says_what_the_gpu_is(monkeypatch):
    import cupy

    from sgemm.measuring.record import device_info

    properties = {"name": b"NVIDIA H100 80GB HBM3", "major": 9, "minor": 0, "multiProcessorCount": 132}
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceCount", lambda: 1)
    monkeypatch.setattr(cupy.cuda.runtime, "getDeviceProperties", lambda device: properties)
    assert device_info(0) == Gpu("NVIDIA H100 80GB HBM3", 90, 132)


def test_the_first_method_of_a_round_measures_every_case_of_the_run_in_its_one_process(tmp_path, monkeypatch,
                                                                                          fake_measurements):
    monkeypatch.setenv(record.CASES_VARIABLE, json.dumps([["fp32/naive", 1024, 1024, 1024],
                                                          ["fp32/float4", 2048, 2048, 2048],
                                                          ["fp32/no_such_kernel", 64, 64, 64]]))
    first = AsvCase(str(tmp_path), get_kernel("fp32/float4"), 2048, 2048, 2048)
    assert first.result("time").samples_s == [1.0]
    assert [sorted(case.id for case in cases) for cases in fake_measurements] == [
        ["fp32/float4/2048x2048x2048", "fp32/naive/1024x1024x1024"]]  # a kernel this commit lacks is left out
    other = record.asv_case(str(tmp_path), "fp32/naive", 1024, 1024, 1024)
    assert other.result("card").samples_s == [1.0]
    assert len(fake_measurements) == 1  # read, not measured again


def test_a_measured_case_is_read_without_asking_its_program_again(tmp_path, monkeypatch, fake_measurements):
    """Every track of every case is a process of its own; once the run has measured a case, its readers must not
    load NVRTC to ask the compiled program for its launch geometry (about 0.1 s a process, ~2,950 a commit)."""
    first = record.asv_case(str(tmp_path), "fp32/naive", 1024, 1024, 1024)
    assert first.result("time").samples_s == [1.0]

    def asked(*args):
        raise AssertionError("the launch geometry was asked for again")

    monkeypatch.setattr(record, "_shape_problem", asked)
    monkeypatch.setattr(record, "skip_reason", asked)
    reader = record.asv_case(str(tmp_path), "fp32/naive", 1024, 1024, 1024)
    assert reader.result("tflops").samples_s == [1.0]


def test_each_case_is_timed_against_its_reference_build(tmp_path, monkeypatch, fake_measurements, capsys):
    from pathlib import Path

    from sgemm import sourcetree
    from sgemm.measuring import ab

    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    tree = sourcetree.export(root, head, tmp_path / "reference")
    (tree / record.REFERENCE_COMMIT_FILE).write_text(head + "\n")
    monkeypatch.setenv(record.REFERENCE_VARIABLE, str(tree))
    timed = []

    class Timing:
        pair_ratios = [[1.004, 1.006, 1.005]]
        method = "paired in one process, L2 flushed before each launch"
        joules_per_launch = 1.25
        warmup_s = 0.4

    def measure(builds, m, n, k, settings, readings, checked):
        assert settings.flush_l2  # the history's reference pairing flushes L2, as the gate's rounds do
        timed.append([(build.label, build.kernel.kernel_dir) for build in builds])
        assert checked == {"commit"}  # checked against FP64 before NVBench timed it, in this process
        return ab.ABResult([b.label for b in builds], Timing(), [1e-7, 1e-7], ["", ""])

    monkeypatch.setattr(ab, "measure", measure)
    monkeypatch.setattr(ab.ABResult, "ratio", lambda self, build=1: 1.005)
    monkeypatch.setattr(ab.ABResult, "interval", lambda self, build=1: (1.004, 1.006))
    monkeypatch.setenv(record.CASES_VARIABLE, json.dumps([["fp32/naive", 64, 64, 64], ["fp32/cublas", 64, 64, 64]]))
    naive = AsvCase(str(tmp_path / "run"), get_kernel("fp32/naive"), 64, 64, 64).result("time_over_reference")
    seconds = naive.reference.pop("seconds")
    assert 0 <= seconds < 5
    assert naive.reference == {"commit": head, "ratio": 1.005, "interval": [1.004, 1.006],
                               "pair_ratios": [1.004, 1.006, 1.005],
                               "method": "paired in one process, L2 flushed before each launch", "l2": "flushed",
                               "joules_per_launch": 1.25, "warmup_s": 0.4}
    assert timed == [[("reference", tree / "kernels"), ("commit", get_kernel("fp32/naive").kernel_dir)]]
    said = capsys.readouterr().err  # where the commit's time went, for asv's log
    assert re.search(r"round 1: 2 cases: compiled in \d+ s, timed with NVBench in \d+ s, paired against the "
                     r"reference in \d+ s", said)
    # and each case's share of it
    assert re.search(r"fp32/naive/64x64x64 round 1: .*; NVBench \d+\.\d s; 1\.0050 of the reference \(3 pairs, "
                     r"warm-up 0\.4 s, \d+\.\d s in all\)", said)
    cublas = record.asv_case(str(tmp_path / "run"), "fp32/cublas", 64, 64, 64).result("time_over_reference")
    assert cublas.reference == {"commit": head, "missing": "a library call: the reference would be the same library"}


def test_a_kernel_newer_than_the_reference_says_so(tmp_path):
    from pathlib import Path

    from sgemm import sourcetree

    root = Path(__file__).resolve().parents[2]
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    tree = sourcetree.export(root, head, tmp_path / "reference")
    catalogue = tree / "sgemm" / "catalogue.toml"
    text = catalogue.read_text()
    start = text.index('[[kernel]]\nname = "fp32/warptile"')
    catalogue.write_text(text[:start] + text[text.index("[[kernel]]", start + 1):])
    builds = record._reference_builds([MeasuredCase(get_kernel("fp32/warptile"), 64, 64, 64),
                                       MeasuredCase(get_kernel("fp32/naive"), 64, 64, 64)], tree)
    assert builds["fp32/warptile/64x64x64"] == "fp32/warptile is newer than the reference commit"
    assert builds["fp32/naive/64x64x64"].kernel_dir == tree / "kernels"


def test_a_reference_build_that_cannot_be_measured_leaves_the_reason_instead_of_a_ratio(monkeypatch):
    from sgemm.measuring import ab

    def measure(builds, m, n, k, settings, readings, checked):
        raise ab.BuildFailed("reference", "wrong result", "fp32/naive is wrong at 64x64x64: relative error 0.5")

    monkeypatch.setattr(ab, "measure", measure)
    naive = get_kernel("fp32/naive")
    assert record.time_against_reference(MeasuredCase(naive, 64, 64, 64), naive, "c" * 40, None) == {
        "commit": "c" * 40,
        "missing": "the reference build: wrong result: fp32/naive is wrong at 64x64x64: relative error 0.5"}


def test_without_an_energy_counter_every_charged_case_says_why_and_the_others_are_untouched(monkeypatch):
    from sgemm.measuring.energy import EnergyUnavailable

    def no_counter(device, name):
        raise EnergyUnavailable("no energy counter on the NVIDIA H100 80GB HBM3: NVML has no energy counter on this "
                                "GPU (NVML_ERROR_NOT_SUPPORTED)")

    monkeypatch.setattr(record, "board_energy", no_counter)
    monkeypatch.setattr(record, "device_info", lambda device=0: H100)
    cases = [MeasuredCase(get_kernel("fp16/cublas"), size, size, size) for size in (2048, 4096, 8192)]
    failed = MeasuredCase(get_kernel("bf16/cublas"), 8192, 8192, 8192)
    results = {case.id: result(kernel=case.kernel.name, m=case.m, n=case.n, k=case.k) for case in cases}
    results[failed.id] = RuntimeError("NVBench recorded no samples")
    record.charge_energy([*cases, failed], results, (4096, 8192))
    assert results[cases[0].id].energy == {}  # 2048 is not charged
    assert [results[case.id].energy["missing"] for case in cases[1:]] == [
        "no energy counter on the NVIDIA H100 80GB HBM3: NVML has no energy counter on this GPU "
        "(NVML_ERROR_NOT_SUPPORTED)"] * 2
    assert isinstance(results[failed.id], RuntimeError)


def test_the_energy_step_says_when_its_first_case_begins_and_after_each(monkeypatch):
    """The history's estimate takes a phase's pace from its first case's start: a step that first spoke after one
    case would count that case as taking no time."""
    monkeypatch.setattr(record, "board_energy", lambda device, name: object())
    monkeypatch.setattr(record, "device_info", lambda device=0: H100)
    told = []

    def charge(launch, board, settings):
        told.append("charging")
        raise record.EnergyUnavailable("the counter did not move")

    monkeypatch.setattr(record, "make_problem", lambda kernel, m, n, k: SimpleNamespace(launch=None))
    monkeypatch.setattr(record, "charge_launch", charge)
    monkeypatch.setattr("cupy.cuda.Device", lambda device: contextlib.nullcontext())
    cases = [MeasuredCase(get_kernel("fp16/cublas"), size, size, size) for size in (4096, 8192)]
    results = {case.id: result(kernel=case.kernel.name, m=case.m, n=case.n, k=case.k) for case in cases}
    record.charge_energy(cases, results, (4096, 8192), charged=lambda done, total: told.append((done, total)))
    assert told == [(0, 2), "charging", (1, 2), "charging", (2, 2)]


def test_a_result_from_before_energy_was_charged_loads_with_none(tmp_path):
    path = tmp_path / "r.json"
    fields = json.loads(json.dumps(result().__dict__))
    del fields["energy"]
    path.write_text(json.dumps(fields))
    assert CaseResult.load(path).energy == {}


def test_the_measuring_charges_energy_only_at_the_sizes_the_run_names(tmp_path, monkeypatch, fake_measurements):
    charged = []
    monkeypatch.setattr(record, "charge_energy", lambda cases, results, sizes, device=0, **options:
                        charged.append(([case.id for case in cases], sizes)))
    progress = tmp_path / "progress.jsonl"
    monkeypatch.setenv(record.MEASURING_PROGRESS_VARIABLE, str(progress))
    monkeypatch.delenv(record.ENERGY_SIZES_VARIABLE, raising=False)
    AsvCase(str(tmp_path / "a"), get_kernel("fp16/cublas"), 4096, 4096, 4096).result("time")
    assert charged == []
    monkeypatch.setenv(record.ENERGY_SIZES_VARIABLE, "4096,8192")
    AsvCase(str(tmp_path / "b"), get_kernel("fp16/cublas"), 4096, 4096, 4096).result("time")
    assert charged == [(["fp16/cublas/4096x4096x4096"], (4096, 8192))]


def test_the_pairing_takes_the_cases_in_an_order_unrelated_to_their_cost(tmp_path, monkeypatch, fake_measurements):
    """The history extrapolates the pairing's time left from the cases paired so far: in the suite's order (the FP32
    ladder first, the power-capped tensor-core kernels last) those were the cheap ones. A digest of each case's id
    orders them instead, the same way every run; the pairing's pace counts from when the reference builds are made."""
    import hashlib

    names = ("fp32/naive", "fp32/warptile", "fp16/mma_buffered", "fp16/cublas", "bf16/wgmma_grouped_tma_store")
    listed = [[name, size, size, size] for name in names for size in (1024, 4096)]
    monkeypatch.setenv(record.CASES_VARIABLE, json.dumps(listed))
    monkeypatch.setenv(record.REFERENCE_VARIABLE, str(tmp_path / "reference"))
    progress = tmp_path / "progress.jsonl"
    monkeypatch.setenv(record.MEASURING_PROGRESS_VARIABLE, str(progress))
    paired = []

    def time_over_reference(cases, results, tree, device, told):
        paired.extend(case.id for case in cases)
        told(0)
        told(len(cases))

    monkeypatch.setattr(record, "_time_over_reference", time_over_reference)
    AsvCase(str(tmp_path / "run"), get_kernel("fp32/naive"), 1024, 1024, 1024).result("time")
    suite_order = [f"{name}/{size}x{size}x{size}" for name, size, _, _ in listed]
    assert sorted(paired) == sorted(suite_order) and paired != suite_order
    assert paired == sorted(suite_order, key=lambda case_id: hashlib.sha256(case_id.encode()).digest())
    lines = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [line["done"] for line in lines if line["phase"] == "pairing"] == [0, 0, len(listed)]
