"""scripts/replay-gate.py: a paired gate's recorded rounds judged again, with a noise file or each gate with the
noise the others taught."""

import json
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "replay-gate.py"
QUIET, SLOWED = "fp32/naive 4096x4096x4096", "fp16/wgmma_tma 4096x4096x4096"


def recorded_gate(work: Path, seed: int, slowdown: float = 1.0, rounds: int = 9) -> Path:
    """A work folder as a paired gate leaves it: rounds/round-N.jsonl, a line a case, ratios scattering 0.1%."""
    rng = random.Random(seed)
    folder = work / "paired" / "rounds"
    folder.mkdir(parents=True)
    for number in range(1, rounds + 1):
        lines = [{"label": QUIET, "ratio": 1 + rng.gauss(0, 1e-3)},
                 {"label": SLOWED, "ratio": slowdown * (1 + rng.gauss(0, 1e-3))}]
        (folder / f"round-{number}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return work


def replay(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_an_aa_gate_replays_same_and_a_slowed_case_as_a_regression(tmp_path):
    done = replay(recorded_gate(tmp_path / "aa", 1), recorded_gate(tmp_path / "slow", 2, slowdown=1.01))
    assert done.returncode == 0, done.stderr
    first, second = (line for line in done.stdout.splitlines() if not line.startswith("  "))
    assert "{'SAME': 2}" in first and "(no noise file)" in first
    assert "{'REGRESSION': 1, 'SAME': 1}" in second
    assert f"  {SLOWED}: REGRESSION, ratio 1.0" in done.stdout


def test_a_noise_file_decides_at_the_first_look_what_three_rounds_alone_cannot(tmp_path):
    gate = recorded_gate(tmp_path / "aa", 3)
    alone = replay(gate)
    assert "up to 3 rounds" not in alone.stdout  # two degrees of freedom: open after three rounds
    noise = tmp_path / "noise.json"
    noise.write_text(json.dumps({"machine": "h100", "made": "2026-11-27T00:00Z", "runs": 0, "paired_runs": 3,
                                 "cases": {}, "paired": {label: {"sd": 1e-3, "df": 24} for label in (QUIET, SLOWED)},
                                 "paired_round": None}))
    pooled = replay(gate, "--noise", noise)
    assert pooled.returncode == 0, pooled.stderr
    assert "{'SAME': 2}" in pooled.stdout and "up to 3 rounds" in pooled.stdout


def test_leave_one_out_judges_each_gate_with_the_others_noise(tmp_path):
    gates = [recorded_gate(tmp_path / f"g{n}", n) for n in range(3)]
    done = replay(*gates, "--leave-one-out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("(noise from the other 2 gates)") == 3


def test_a_round_cut_off_mid_line_counts_its_complete_lines(tmp_path):
    gate = recorded_gate(tmp_path / "cut", 7)
    with open(gate / "paired" / "rounds" / "round-9.jsonl", "a") as out:
        out.write('{"label": "fp32/naive 4096x4096x4096", "rat')
    done = replay(gate)
    assert done.returncode == 0 and "Traceback" not in done.stderr and "{'SAME': 2}" in done.stdout


def test_a_look_wanting_rounds_the_gate_never_recorded_says_so(tmp_path):
    done = replay(recorded_gate(tmp_path / "short", 4, rounds=3))
    assert re.search(rf"  left out: {QUIET} \(wanted \d+ rounds, 3 recorded\)", done.stdout)


def test_bad_input_is_refused_with_a_message(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = replay(empty)
    assert done.returncode != 0 and "no rounds/round-N.jsonl" in done.stderr and "Traceback" not in done.stderr
    alone = replay(recorded_gate(tmp_path / "one", 5), "--leave-one-out")
    assert alone.returncode == 2 and "two gates or more" in alone.stderr
    garbled = recorded_gate(tmp_path / "garbled", 8)
    (garbled / "paired" / "rounds" / "round-1.jsonl").write_text("not json\n")
    done = replay(garbled)
    assert done.returncode == 1 and "cannot read its rounds" in done.stderr and "Traceback" not in done.stderr
    missing = replay(recorded_gate(tmp_path / "two", 6), "--noise", tmp_path / "none.json")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    # a bad gate after a good one: refused before the good one is judged
    late = replay(recorded_gate(tmp_path / "good", 7), empty)
    assert late.returncode != 0 and "no rounds/round-N.jsonl" in late.stderr and late.stdout == ""
