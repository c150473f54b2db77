"""tools/simulate/simulate_gates.py in a small version of its full run (lab/2026-11-28-gate-simulation): whole gates
of 14, 58 and 260 cases through the gate's own looks and verdicts, each case's noise as measured at its size."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.gate import looks
from tools.simulate import simulate_gates

ROOT = Path(__file__).resolve().parents[3]


def simulate(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tools.simulate.simulate_gates", *args, "--workers", "1"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])[0]


def test_it_drives_the_gates_own_looks_and_verdicts():
    assert simulate_gates.run_looks is looks.run_looks


@pytest.mark.parametrize("cases", [14, 58, 260])
def test_each_gate_is_the_catalogues_cases_each_with_a_measured_sd_at_its_size(cases):
    chosen = simulate_gates.gate_cases(cases)
    assert len(chosen) == len(set(chosen)) == cases
    measured = json.loads(simulate_gates.MEASURED_SDS.read_text())["sizes"]
    assert {size for _, size in chosen} <= set(measured)
    if cases == 14:
        assert {size for _, size in chosen} == {"8192"}


def test_a_small_run_holds_the_targets_under_normal_rounds_and_a_true_file():
    result = simulate("--cases", "58", "--aa", "40", "--ab", "20", "--seed", "3")
    assert result["row"] == {"cases": 58, "shape": "normal", "file": "true", "aa": 40, "ab": 20, "seed": 3,
                             "sds_from_4096": False, "entry_df": 0}
    assert result["false_alarm"]["hits"] <= 2
    assert result["undecided"]["hits"] <= 3
    assert result["found"]["hits"] >= 18  # a 0.5% slowdown of one case, drawn at random, at the 0.25% threshold


def test_a_file_at_half_the_truth_is_set_aside_and_raises_no_alarm():
    result = simulate("--cases", "58", "--file", "half", "--aa", "20", "--ab", "0", "--seed", "4")
    assert result["file_set_aside"]["hits"] >= 18
    assert result["false_alarm"]["hits"] <= 1


def test_stale_entries_narrow_a_tenth_of_the_file_and_raise_no_alarm(monkeypatch):
    import random

    class EntriesLearned(Exception):
        pass

    def no_looks(labels, measure, schedule):
        raise EntriesLearned  # the file is what this part looks at, not a gate run over it

    widths = []
    real_learned = simulate_gates.learned
    monkeypatch.setattr(simulate_gates, "learned", lambda rng, shape, sd, df, scale:
                        widths.append(scale) or real_learned(rng, shape, sd, df, scale))
    monkeypatch.setattr(simulate_gates, "run_looks", no_looks)
    row = simulate_gates.Row(260, "normal", "stale", 1, 0, 5)
    measured = json.loads(simulate_gates.MEASURED_SDS.read_text())["sizes"]
    with pytest.raises(EntriesLearned):
        simulate_gates.one_gate(random.Random(5), row, simulate_gates.gate_cases(260), measured, None)
    assert set(widths) == {1.0, simulate_gates.STALE_SCALE} and 0.05 < widths.count(0.5) / len(widths) < 0.15
    result = simulate("--cases", "58", "--file", "stale", "--aa", "20", "--ab", "0", "--seed", "4")
    assert result["false_alarm"]["hits"] <= 1


def test_heavy_tailed_rounds_leave_a_gate_of_every_case_decided():
    # before outlier rounds were set aside and the file learned without them, 29% of such gates ended undecided
    result = simulate("--cases", "260", "--shape", "t3", "--aa", "30", "--ab", "0", "--seed", "3")
    assert result["undecided"]["hits"] <= 3 and result["false_alarm"]["hits"] <= 1


def test_outlier_rounds_cost_their_cases_a_round_not_the_gate():
    # 62% of such gates ended undecided before; the rules still leave some (lab/2026-11-28-gate-outlier-rounds)
    result = simulate("--cases", "58", "--shape", "outliers", "--aa", "60", "--ab", "0", "--seed", "3")
    assert result["undecided"]["hits"] <= 15 and result["false_alarm"]["hits"] <= 3


def test_the_few_cases_an_outlier_left_open_get_the_rounds_to_decide():
    # A gate of every case with 5% outlier rounds and entries of 24 degrees of freedom: with 6 rounds past the ninth,
    # 14 of these 100 gates ended undecided (the cases an outlier round or an entry learned wide kept open need far
    # more); with the default's, 3.
    result = simulate("--cases", "260", "--shape", "outliers", "--entry-df", "24", "--aa", "100", "--ab", "0",
                      "--seed", "3")
    assert result["undecided"]["hits"] <= 6 and result["false_alarm"]["hits"] <= 5
    assert result["mean_rounds_a_case"] < 3.5  # the extra rounds go to a few cases alone


def test_heavy_tails_and_correlated_rounds_run_as_described():
    import math
    import random

    rng = random.Random(5)
    for shape in simulate_gates.SHAPES:
        draws = [simulate_gates.draw(rng, shape, common=rng.gauss(0, 1)) for _ in range(40000)]
        sd = math.sqrt(sum(x * x for x in draws) / len(draws))
        expected = math.sqrt(1 + simulate_gates.OUTLIER_SHARE * simulate_gates.OUTLIER_SDS ** 2) \
            if shape == "outliers" else 1.0
        assert sd == pytest.approx(expected, rel=0.06 if shape == "t3" else 0.03), shape


def test_entries_may_be_learned_with_more_degrees_of_freedom_than_measured():
    import random

    cases = simulate_gates.gate_cases(14)
    measured = json.loads(simulate_gates.MEASURED_SDS.read_text())["sizes"]
    as_measured = simulate_gates.Truth(measured, cases, random.Random(1), False)
    more = simulate_gates.Truth(measured, cases, random.Random(1), False, entry_df=24)
    assert more.sd == as_measured.sd and max(as_measured.df) < 24
    assert more.df == [24] * len(cases)


def test_a_negative_entry_df_is_refused_before_any_gate_is_simulated(capsys):
    with pytest.raises(SystemExit) as exit_info:
        simulate_gates.main(["--cases", "14", "--entry-df", "-1"])
    assert exit_info.value.code == 2
    assert "--entry-df must be at least 0, got -1" in capsys.readouterr().err
