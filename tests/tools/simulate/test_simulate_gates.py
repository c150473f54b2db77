"""tools/simulate/simulate_gates.py, in a small version of its full run (20 seeds of 50 gates): simulated gates
through the gate's own looks raise few false alarms and find a 0.5% change through the H100's measured noise."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_simulation_reports_its_false_alarm_rate_and_power():
    done = subprocess.run([sys.executable, "-m", "tools.simulate.simulate_gates", "--seeds", "2", "--gates", "8",
                           "--noise-file", "--changed", "0.005"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["gates"] == 16
    assert summary["false_alarm"] <= 2
    assert summary["found"] >= 13  # a 0.5% change at the 0.25% threshold, through the H100's measured noise
