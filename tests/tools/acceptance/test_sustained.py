"""tools/acceptance/sustained.py on a box without a GPU: bad arguments are refused before any process starts, and
the processes' figures are summed up as it says (the timing itself needs a GPU: the lab's runs of it)."""

import contextlib
import json
import math
from types import SimpleNamespace

import cupy
import pytest

from sgemm.measuring import ab, record, telemetry

from tools.acceptance import sustained


@pytest.mark.parametrize("argv, said", [
    (["fp16/nonesuch", "--size", "4096"], "unknown kernel 'fp16/nonesuch'"),
    (["fp16/cublas", "--size", "4096"], "name compiled kernels, not a library"),
    (["fp16/wgmma_cluster", "fp32/warptile", "--size", "4096"], "must share a precision"),
    (["fp16/wgmma_cluster", "--size", "100"], "fp16/wgmma_cluster needs M to be a multiple of 256"),
    (["fp16/wgmma_cluster", "--size", "4096", "--seconds", "0"], "--seconds takes 0 to 120 seconds"),
    (["fp16/wgmma_cluster", "--size", "4096", "--json", "/nonexistent-dir/x.json"], "--json"),
])
def test_bad_arguments_are_refused_in_a_line_before_any_process_starts(argv, said, capsys, monkeypatch):
    monkeypatch.setattr(sustained.subprocess, "run", lambda *a, **k: pytest.fail("a process was started"))
    assert sustained.main(argv) == sustained.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1


def test_nan_seconds_are_refused_by_the_parser():
    with pytest.raises(SystemExit) as exit_info:
        sustained.main(["fp16/wgmma_cluster", "--size", "4096", "--seconds", "nan"])
    assert exit_info.value.code == 2


def test_the_processes_figures_are_summed_up_by_median_interval_and_range():
    summary = sustained.across([100.0, 102.0, 104.0, 101.0, 103.0])
    assert summary["median"] == 102.0 and (summary["low"], summary["high"]) == (100.0, 104.0)
    low, high = summary["interval"]
    geometric = math.exp(sum(math.log(v) for v in (100, 102, 104, 101, 103)) / 5)
    assert low < geometric < high and 100.0 < low and high < 104.0
    assert sustained.across([101.0])["interval"] is None  # one process gives no interval


def test_each_process_s_figures_are_printed_and_summed_up(capsys, monkeypatch, tmp_path):
    def process(percent: float, capped: bool | None) -> dict:
        base = {"tflops": 650.0, "sm_clock_mhz": 1300.0, "launches_ms": 10000.0, "power_capped_ms": 10400.0,
                "capped_throughout": True, "throttle_reasons": ["SW power cap"]}
        kernel = base | {"tflops": 6.5 * percent, "capped_throughout": capped, "nvbench_percent": percent,
                         "paired_percent": percent + 1, "paired_interval": [percent + 0.9, percent + 1.1],
                         "paired_sm_clock_mhz": 1290.0}
        return {"fp16/cublas": base, "fp16/wgmma_cluster": kernel}

    outputs = iter([process(102.0, True), process(101.0, False), process(103.0, None)])  # None: no NVML reading
    monkeypatch.setattr(sustained.subprocess, "run", lambda *a, **k: sustained.subprocess.CompletedProcess(
        a[0], 0, stdout="NVBench's chatter\n" + json.dumps(next(outputs)) + "\n", stderr=""))
    assert sustained.main(["fp16/wgmma_cluster", "--size", "4096", "--processes", "3",
                           "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert ("process 2 (kernels, then cuBLAS): fp16/wgmma_cluster 101.0% NVBench (1300 MHz, NOT capped throughout), "
            "102.0% paired") in out
    summary = next(line for line in out.splitlines() if line.startswith("fp16/wgmma_cluster at 4096"))
    assert "nvbench_percent median 102.00" in summary and "paired_percent median 103.00" in summary
    assert "process 3 (cuBLAS, then kernels): fp16/wgmma_cluster 103.0% NVBench (1300 MHz, cap unknown)" in out
    assert summary.endswith("power cap held throughout in 1 of 3")
    assert (tmp_path / "s.json").is_file()


def test_every_second_process_takes_the_cases_backwards(monkeypatch):
    # A card warms through a process and its clock falls at the cap: the kernel timed last in every process would
    # read slow over all of them.
    started = []
    figures = {"fp16/cublas": {"tflops": 650.0, "sm_clock_mhz": 1300.0, "capped_throughout": True}}
    for name in ("fp16/wgmma_cluster", "fp16/wgmma_persistent"):
        figures[name] = figures["fp16/cublas"] | {"nvbench_percent": 100.0, "paired_percent": 100.0}

    def run(argv, **kwargs):
        started.append(argv)
        return sustained.subprocess.CompletedProcess(argv, 0, stdout=json.dumps(figures) + "\n", stderr="")

    monkeypatch.setattr(sustained.subprocess, "run", run)
    assert sustained.main(["fp16/wgmma_cluster", "fp16/wgmma_persistent", "--size", "4096", "--processes", "4"]) == 0
    assert ["--reversed" in argv for argv in started] == [False, True, False, True]
    base, first, second = "cublas", "cluster", "persistent"
    assert sustained.in_order(base, [first, second], False) == ([base, first, second], [first, second])
    assert sustained.in_order(base, [first, second], True) == ([second, first, base], [second, first])


def test_a_process_times_and_pairs_in_its_order_and_judges_the_cap_over_the_whole_window(monkeypatch):
    timed, paired = [], []

    def run_cases(cases, device, nvbench_args=()):
        timed.extend(case.kernel.name for case in cases)
        # Each case capped for 900 ms of a 1,000-ms window whose launches took 500 ms: the cap let go for a tenth
        # of the window, which the launches' time alone would hide.
        return {case.id: SimpleNamespace(samples_s=[0.25, 0.25], tflops=600.0, median_sm_clock_mhz=1300.0,
                                         telemetry={"throttled_ms": {"power": 900.0}, "window_ms": 1000.0})
                for case in cases}

    def measure(builds, m, n, k, settings, readings):
        paired.append([build.kernel.name for build in builds])
        assert settings.flush_l2
        # Build i runs at 1 + i/100 times cuBLAS's time.
        return SimpleNamespace(interval=lambda build: (0.99 + build / 100, 1.01 + build / 100),
                               ratio=lambda build: 1.0 + build / 100,
                               timing=SimpleNamespace(builds=[SimpleNamespace(median_sm_clock_mhz=1300.0 - i)
                                                              for i in range(len(builds))]))

    monkeypatch.setattr(record, "run_cases", run_cases)
    monkeypatch.setattr(ab, "measure", measure)
    monkeypatch.setattr(telemetry.CardReadings, "of", classmethod(lambda cls, device: None))
    monkeypatch.setattr(cupy.cuda, "Device", lambda device: contextlib.nullcontext())
    args = SimpleNamespace(kernels=["fp16/wgmma_cluster", "fp16/wgmma_persistent"], size=4096, seconds=1.0,
                           device=0, reversed=True)
    figures = sustained.one_process(args)
    assert timed == ["fp16/wgmma_persistent", "fp16/wgmma_cluster", "fp16/cublas"]
    # One paired session of cuBLAS and both kernels, the kernels in the process's order.
    assert paired == [["fp16/cublas", "fp16/wgmma_persistent", "fp16/wgmma_cluster"]]
    assert figures["fp16/wgmma_persistent"]["paired_percent"] == pytest.approx(100 / 1.01)
    assert figures["fp16/wgmma_cluster"]["paired_percent"] == pytest.approx(100 / 1.02)
    assert figures["fp16/wgmma_cluster"]["paired_interval"] == [pytest.approx(100 / 1.03), pytest.approx(100 / 1.01)]
    assert figures["fp16/wgmma_cluster"]["paired_sm_clock_mhz"] == 1298.0
    assert all(figure["capped_throughout"] is False for figure in figures.values())
    assert sustained.capped_throughout(990.0, 1000.0) is True
    assert sustained.capped_throughout(math.nan, 1000.0) is None and sustained.capped_throughout(900.0, 0.0) is None


def test_every_kernel_after_the_first_is_put_over_the_first_process_by_process(capsys, monkeypatch, tmp_path):
    def process(older: float, newer: float) -> dict:
        def kernel(percent: float) -> dict:
            return {"tflops": 6.5 * percent, "sm_clock_mhz": 1300.0, "capped_throughout": True,
                    "nvbench_percent": percent, "paired_percent": percent + 2, "paired_interval": [percent, percent]}

        return {"fp16/cublas": {"tflops": 650.0, "sm_clock_mhz": 1300.0, "capped_throughout": True},
                "fp16/wgmma_grouped_tma_store": kernel(older), "fp16/wgmma_lean_loop": kernel(newer)}

    # The newer step 1% faster by NVBench in every process, and its paired % 0.5% above the older one's.
    runs = [process(98.0, 98.98), process(96.0, 96.96), process(97.0, 97.97)]
    for run in runs:
        run["fp16/wgmma_lean_loop"]["paired_percent"] = run["fp16/wgmma_grouped_tma_store"]["paired_percent"] * 1.005
    outputs = iter(runs)
    monkeypatch.setattr(sustained.subprocess, "run", lambda *a, **k: sustained.subprocess.CompletedProcess(
        a[0], 0, stdout=json.dumps(next(outputs)) + "\n", stderr=""))
    assert sustained.main(["fp16/wgmma_grouped_tma_store", "fp16/wgmma_lean_loop", "--size", "4096",
                           "--processes", "3", "--json", str(tmp_path / "s.json")]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if " over " in line)
    assert line == ("fp16/wgmma_lean_loop over fp16/wgmma_grouped_tma_store, process by process: NVBench +1.00% "
                    "median (interval +1.00% to +1.00%); paired +0.50% median (interval +0.50% to +0.50%)")
    over = json.loads((tmp_path / "s.json").read_text())["summary"]["over_first"]
    assert list(over) == ["fp16/wgmma_lean_loop"]
    assert over["fp16/wgmma_lean_loop"]["paired_percent"]["median"] == pytest.approx(1.005)


def test_one_kernel_has_nothing_to_be_put_over(capsys, monkeypatch):
    run = {"fp16/cublas": {"tflops": 650.0, "sm_clock_mhz": 1300.0, "capped_throughout": True},
           "fp16/wgmma_cluster": {"tflops": 640.0, "sm_clock_mhz": 1300.0, "capped_throughout": True,
                                  "nvbench_percent": 98.5, "paired_percent": 99.0, "paired_interval": [98.9, 99.1]}}
    monkeypatch.setattr(sustained.subprocess, "run", lambda *a, **k: sustained.subprocess.CompletedProcess(
        a[0], 0, stdout=json.dumps(run) + "\n", stderr=""))
    assert sustained.main(["fp16/wgmma_cluster", "--size", "4096", "--processes", "2"]) == 0
    assert " over " not in capsys.readouterr().out


def test_a_failing_process_keeps_the_figures_of_those_before_it(monkeypatch, tmp_path):
    figures = {"fp16/cublas": {"tflops": 650.0, "sm_clock_mhz": 1300.0, "capped_throughout": True},
               "fp16/wgmma_cluster": {"tflops": 650.0, "sm_clock_mhz": 1300.0, "capped_throughout": True,
                                      "nvbench_percent": 100.0, "paired_percent": 100.0}}
    outputs = iter([json.dumps(figures) + "\n", "a traceback, no figures\n"])
    monkeypatch.setattr(sustained.subprocess, "run", lambda argv, **k: sustained.subprocess.CompletedProcess(
        argv, 0, stdout=next(outputs), stderr=""))
    out = tmp_path / "s.json"
    assert sustained.main(["fp16/wgmma_cluster", "--size", "4096", "--processes", "3", "--json", str(out)]) == 1
    assert json.loads(out.read_text())["processes"] == [figures]


def test_a_process_of_more_kernels_may_run_longer_before_it_counts_as_hung():
    one, three = sustained.process_limit_s(1, 10.0), sustained.process_limit_s(3, 10.0)
    assert three > one
    assert three >= 4 * (3 * 10.0 + 30)  # four NVBench cases, each to its own --timeout
