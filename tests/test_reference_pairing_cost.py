"""scripts/reference-pairing-cost.py: which cases it samples, the settings it pairs with, what it writes and says,
and bad input refused before any work."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.gpu import Gpu
from sgemm.history import run
from sgemm.measuring import record, telemetry

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "reference-pairing-cost.py"
spec = importlib.util.spec_from_file_location("reference_pairing_cost", SCRIPT)
cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cost)

ROOT = Path(__file__).resolve().parents[1]


def test_it_samples_every_nth_compiled_case_in_the_suite_s_order():
    every_case = [case.kernel for case in run.suite_cases(ROOT)]
    sampled, compiled = cost.sampled_cases(ROOT, 3)
    assert compiled == len([name for name in every_case if not name.endswith("/cublas")])
    assert len(sampled) == -(-compiled // 3)
    assert not any(case.kernel.library for case in sampled)
    positions = [every_case.index(case.kernel.name) for case in sampled]
    assert positions == sorted(positions)


def test_the_history_s_settings_unless_others_are_given():
    assert cost.settings_from(cost.parse([])) == record.REFERENCE_SETTINGS
    chosen = cost.settings_from(cost.parse(["--block-s", "0.005", "--min-pairs", "6", "--max-s", "0.4"]))
    assert (chosen.block_s, chosen.min_pairs, chosen.max_s) == (0.005, 6, 0.4)
    assert chosen.max_warmup_s == record.REFERENCE_SETTINGS.max_warmup_s


@pytest.mark.parametrize("args, message", [
    (["--every", "0"], "--every must be at least 1, got 0"),
    (["--seconds", "0"], "--seconds must be above 0"),
    (["--block-s", "-0.01"], "--block-s must be above 0"),
    (["--min-pairs", "2.5"], "invalid int value: '2.5'"),
    (["--out", "/"], "--out / is not a file"),
])
def test_bad_input_is_refused_before_any_work(args, message):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_without_a_gpu_it_says_so(monkeypatch, capsys):
    def no_gpu(device=0):
        raise record.NoGpuError("no usable CUDA GPU: no NVIDIA driver on this machine")

    monkeypatch.setattr(cost, "device_info", no_gpu)
    assert cost.main([]) == 2
    assert "reference-pairing-cost: no usable CUDA GPU" in capsys.readouterr().err


def test_each_case_is_written_as_it_is_paired_and_the_rate_is_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cost, "device_info", lambda device=0: Gpu("NVIDIA H100 80GB HBM3", 90, 132))
    monkeypatch.setattr(cost.run, "reference_tree", lambda repo, work: tmp_path)
    monkeypatch.setattr(cost, "prepare_reference_builds",
                        lambda cases, tree: ("c" * 40, {case.id: case.kernel for case in cases}))
    monkeypatch.setattr(telemetry.CardReadings, "of", staticmethod(lambda device: None))
    paired = []

    def time_against_reference(case, reference, commit, readings, settings):
        paired.append(case.id)
        return {"commit": commit, "ratio": 1.001, "interval": [1.0, 1.002], "pair_ratios": [1.001] * 8,
                "warmup_s": 0.1, "seconds": 0.5}

    monkeypatch.setattr(cost, "time_against_reference", time_against_reference)
    out = tmp_path / "pairs.jsonl"
    assert cost.main(["--every", "50", "--out", str(out), "--min-pairs", "6"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["case"] for line in lines] == paired and len(paired) >= 2
    assert lines[0] == {"case": paired[0], "commit": "c" * 40, "ratio": 1.001, "interval": [1.0, 1.002],
                        "warmup_s": 0.1, "seconds": 0.5}
    said = capsys.readouterr()
    _, compiled = cost.sampled_cases(ROOT, 50)
    assert f"{len(paired)} of {len(paired)} sampled cases paired (the last {paired[-1]}) in " \
           f"{0.5 * len(paired):.1f} s: 0.50 s a case (median 0.50 s); all {compiled} compiled cases at that rate: " \
           f"about {0.5 * compiled:.0f} s" in said.out
    assert "min_pairs=6" in said.err
