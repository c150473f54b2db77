"""scripts/pairing-bias.py: the slowed tree it builds, the conditions each process runs, its summary, and bad input
refused before any work."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pairing-bias.py"
spec = importlib.util.spec_from_file_location("pairing_bias", SCRIPT)
bias = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bias)


def test_the_slowed_tree_carries_the_demos_edits_and_the_plain_one_none(tmp_path):
    plain, slowed = bias.prepare_trees(tmp_path, bias.slowdowns(1.0, 2.0))
    hopper, warptile = "kernels/wgmma_specialized.cu", "kernels/fp32_warptile.cu"
    assert "clock64() + 1670;" in (slowed / hopper).read_text()
    assert "clock64() + 12LL * K;" in (slowed / warptile).read_text()
    assert "clock64()" not in (plain / warptile).read_text()
    assert (plain / hopper).read_text().count("clock64()") == (slowed / hopper).read_text().count("clock64()") - 2
    (slowed / hopper).write_text("kept")
    bias.prepare_trees(tmp_path, bias.slowdowns(1.0, 2.0))  # exported once, then reused
    assert (slowed / hopper).read_text() == "kept"


def test_every_process_runs_every_condition_starting_at_its_own():
    firsts = [bias.rotated(process)[0] for process in range(len(bias.CONDITIONS))]
    assert sorted(firsts) == sorted(bias.CONDITIONS)
    assert all(sorted(bias.rotated(process)) == sorted(bias.CONDITIONS) for process in range(20))
    assert ("history", "float4") in bias.CONDITIONS and ("long", "self") not in bias.CONDITIONS
    assert bias.SETTINGS["history"].block_s == 0.01 and bias.SETTINGS["brief"].block_s == 0.005


def test_the_summary_gives_each_setting_s_mean_and_spread_over_the_processes(tmp_path):
    lines = [{"case": "fp16/x", "setting": "long", "prelude": "float4", "ratio": ratio, "sm_clock_mhz": clock}
             for ratio, clock in ((1.008, 1350), (1.010, 1400))]
    assert bias.summary(lines) == ["fp16/x long after float4: 1.0090 over 2 processes (sd 0.14%), SM clock 1375 MHz"]
    path = tmp_path / "bias.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert bias.main(["--summary", str(path)]) == 0
    path.write_text('{"case": "fp16/x"}\n')
    assert bias.main(["--summary", str(path)]) == 2


@pytest.mark.parametrize("argv, says", [
    ([], "--process N (0 or more) is needed"),
    (["--process", "-1"], "--process N (0 or more) is needed"),
    (["--process", "0", "--hopper-percent", "0"], "--hopper-percent must be above 0"),
    (["--process", "0", "--out", "/no/such/folder/bias.jsonl"], "its folder does not exist"),
    (["--summary", "/no/such/file"], "is not a file"),
])
def test_bad_input_is_refused_before_any_work(argv, says):
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True)
    assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
