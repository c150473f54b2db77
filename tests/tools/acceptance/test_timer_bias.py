"""tools/acceptance/timer_bias.py on the CPU: its verdict on the processes' log ratios and idle shares, and its
processes stood in for (the timing itself needs a GPU)."""

import json
import os
import random
import sys


from tools.acceptance import timer_bias


def test_an_unbiased_timer_passes_and_a_biased_one_fails():
    rng = random.Random(1)
    unbiased = [rng.gauss(0, 0.0002) for _ in range(20)]
    assert timer_bias.judge("k:1", unbiased, [0.001] * 20).passed
    biased = [x + 0.0004 for x in unbiased]  # the second build read 0.04% slow in every process
    verdict = timer_bias.judge("k:1", biased, [0.001] * 20)
    assert not verdict.passed and "does not hold 0" in verdict.why


def test_an_interval_too_wide_to_bound_the_bias_fails():
    rng = random.Random(2)
    noisy = [rng.gauss(0, 0.003) for _ in range(20)]
    verdict = timer_bias.judge("k:1", noisy, [0.0] * 20)
    assert not verdict.passed and "reaches past ±0.02%" in verdict.why


def test_a_process_that_left_the_gpu_idle_fails():
    verdict = timer_bias.judge("k:1", [0.0, 0.00001, -0.00001] * 7, [0.002] * 20 + [0.05])
    assert not verdict.passed and "left the GPU idle 5.00%" in verdict.why


def test_the_whole_run_passes_unbiased_processes_and_writes_its_verdicts(monkeypatch, tmp_path, capsys):
    # Each stand-in process reads 0.01% slow or fast in turn (a counter file between them): unbiased by design, where
    # random draws made the run fail one time in twenty.
    script, counter = tmp_path / "one.py", tmp_path / "count"
    script.write_text("import json, math, pathlib, sys\n"
                      f"counter = pathlib.Path({str(counter)!r})\n"
                      "n = int(counter.read_text()) if counter.exists() else 0\n"
                      "counter.write_text(str(n + 1))\n"
                      "x = 0.0001 if n % 2 else -0.0001\n"
                      "print(json.dumps({'case': sys.argv[1] + ':' + sys.argv[2], 'ratio': math.exp(x), "
                      "'log_ratio': x, 'pairs': 40, 'idle_share': 0.001, 'method': 'paired'}))\n")
    monkeypatch.setattr(timer_bias, "ONE_PROCESS", (sys.executable, str(script)))
    out = tmp_path / "verdicts.json"
    assert timer_bias.main(["--processes", "6", "--case", "fp32/warptile:4096", "--out", str(out)]) == 0
    verdicts = json.loads(out.read_text())
    assert [v["case"] for v in verdicts] == ["fp32/warptile:4096"] and verdicts[0]["processes"] == 6
    assert len([line for line in capsys.readouterr().out.splitlines() if '"log_ratio"' in line]) == 6


def test_a_process_that_fails_stops_the_run_with_status_2(monkeypatch, capsys):
    monkeypatch.setattr(timer_bias, "ONE_PROCESS", (sys.executable, "-c", "import sys; sys.exit('no GPU here')"))
    assert timer_bias.main(["--processes", "3", "--case", "fp32/warptile:4096"]) == 2
    assert "a process exited 1: no GPU here" in capsys.readouterr().err


def test_a_case_without_a_size_is_refused():
    assert timer_bias.main(["--case", "fp32/warptile"]) == 2


def test_seconds_reach_every_process_and_a_length_that_is_not_positive_is_refused(monkeypatch, tmp_path, capsys):
    # The stand-in process prints its own arguments back: each must carry `--seconds 16`.
    script = tmp_path / "one.py"
    script.write_text("import json, sys\n"
                      "print(json.dumps({'argv': sys.argv[1:], 'log_ratio': 0.0, 'idle_share': 0.0}))\n")
    monkeypatch.setattr(timer_bias, "ONE_PROCESS", (sys.executable, str(script)))
    timer_bias.main(["--processes", "2", "--case", "fp32/warptile:4096", "--seconds", "16"])
    argvs = [json.loads(line)["argv"] for line in capsys.readouterr().out.splitlines() if '"argv"' in line]
    assert argvs == [["fp32/warptile", "4096", "--seconds", "16.0"]] * 2
    assert timer_bias.main(["--case", "fp32/warptile:4096", "--seconds", "0"]) == 2
    assert "expected a positive number of seconds" in capsys.readouterr().err


def test_processes_run_at_once_each_on_a_card_of_its_own(monkeypatch, tmp_path, capsys):
    # Each stand-in process prints the card it was given; two cards, four processes: each card takes two.
    script = tmp_path / "one.py"
    script.write_text("import json, os, time\ntime.sleep(0.2)\n"
                      "print(json.dumps({'card': os.environ.get('CUDA_VISIBLE_DEVICES'), 'log_ratio': 0.0, "
                      "'idle_share': 0.0}))\n")
    monkeypatch.setattr(timer_bias, "ONE_PROCESS", (sys.executable, str(script)))
    lines, failed = timer_bias.run_case("fp32/warptile:4096", 4, cards=["GPU-a", "GPU-b"])
    assert failed is None and sorted(line["card"] for line in lines) == ["GPU-a", "GPU-a", "GPU-b", "GPU-b"]
    lines, _ = timer_bias.run_case("fp32/warptile:4096", 2)
    assert [line["card"] for line in lines] == [os.environ.get("CUDA_VISIBLE_DEVICES")] * 2  # one GPU: as it is set


def test_more_gpus_than_the_process_may_use_or_none_are_refused(monkeypatch, capsys):
    from sgemm.measuring import cards

    monkeypatch.setattr(cards, "visible_cards", lambda: [cards.Card(0, "H", "GPU-a"), cards.Card(1, "H", "GPU-b")])
    assert timer_bias.main(["--case", "fp32/warptile:4096", "--gpus", "3"]) == 2
    assert "timer_bias: --gpus 3: this process may use 2 GPUs" in capsys.readouterr().err
    assert timer_bias.main(["--case", "fp32/warptile:4096", "--gpus", "0"]) == 2
    assert "expected a number of GPUs (at least 1) or all" in capsys.readouterr().err
