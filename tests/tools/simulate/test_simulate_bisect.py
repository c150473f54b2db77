"""tools/simulate/simulate_bisect.py: bisect's own search on simulated ranges, in a small version of its full run
(lab/2026-11-28-bisect-simulation and lab/2026-11-28-bisect-outliers run 5,000 a row)."""

import pytest

from tools.simulate import simulate_bisect


def test_the_pooled_search_rarely_gives_up_where_todays_often_did():
    rows = simulate_bisect.run(300, 16, seed=7, settings=((0.01, 0.003),), outlier_shares=(0.0,),
                               rules=("today", "pooled + noise file"))
    today, pooled = rows
    assert today["unknown"] >= 0.15 * today["runs"], today  # each commit on its own 3-9 rounds
    assert pooled["unknown"] <= 0.05 * pooled["runs"] and pooled["wrong_commit"] <= 0.01 * pooled["runs"], pooled
    assert pooled["builds_median"] <= 6 and pooled["rounds_mean"] <= today["rounds_mean"]


def test_the_simulation_runs_from_its_command_line(tmp_path, capsys):
    assert simulate_bisect.main(["--runs", "2", "--commits", "4", "--json", str(tmp_path / "rows.json")]) == 0
    assert "| found |" in capsys.readouterr().out.replace("| spread | found", "| found")
    assert (tmp_path / "rows.json").is_file()


def test_outlier_rounds_leave_the_pooled_search_decided_and_right():
    # 5% of rounds ten times as noisy: each commit's outlier round is set aside and timed again, the bad end's too
    rows = simulate_bisect.run(300, 16, seed=7, settings=((0.01, 0.003),), outlier_shares=(0.05,),
                               rules=("today", "pooled + noise file"))
    today, pooled = rows
    assert pooled["unknown"] <= 0.05 * pooled["runs"] and pooled["wrong_commit"] <= 0.01 * pooled["runs"], pooled
    assert pooled["builds_median"] <= 6 and pooled["rounds_mean"] <= today["rounds_mean"]


def test_a_json_that_cannot_be_written_is_said_before_the_simulation(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simulate_bisect, "run", lambda *a, **k: pytest.fail("simulated before --json was checked"))
    with pytest.raises(SystemExit) as stopped:
        simulate_bisect.main(["--json", str(tmp_path / "missing" / "rows.json")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
