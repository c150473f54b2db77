"""tools/acceptance/sustained.py on a box without a GPU: bad arguments are refused before any process starts, and
the processes' figures are summed up as it says (the timing itself needs a GPU: the lab's runs of it)."""

import json
import math

import pytest

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
