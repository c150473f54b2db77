"""tools/simulate/simulate_watch.py: the watch's detector and filing rules on simulated growing machine histories,
in a small, fast version of its full run (lab/2026-11-28-watch-simulation): no false notice on A/A machines, and a
real 1% step at 0.2% noise noticed soon, at its commit, with an interval that covers it."""

import numpy as np
import pytest

from tools.simulate import simulate_watch


def test_simulated_machines_small_version():
    rows = simulate_watch.run(1, 300, 300, seed=11, levels=(0.002,), series=60)
    for row in rows:
        if row["kind"] == "false notices":
            assert row["notices"] == 0, row
        else:
            assert row["noticed_within"] >= 0.9 and row["range_holds_step"] >= 0.95, row
            assert 0.88 <= row["interval_covers"] <= 1.0, row


def test_a_persisting_sighting_is_filed_once_and_a_single_one_never():
    seen = np.array([[False, True, True, True, False], [False, True, False, False, False]])
    first_bad = np.full((2, 5), 10)
    ranges = np.stack([first_bad, first_bad], axis=-1)
    counts = np.array([20, 21, 22, 23, 24])
    assert [notice[:2] for notice in simulate_watch.filed(seen, first_bad, ranges, counts)] == [(0, 2)]


def test_the_simulation_runs_from_its_command_line(tmp_path, capsys):
    assert simulate_watch.main(["--machines", "1", "--commits", "60", "--series", "8", "--histories", "20",
                                "--json", str(tmp_path / "rows.json")]) == 0
    assert "false notices" in capsys.readouterr().out
    assert (tmp_path / "rows.json").is_file()


def test_a_json_that_cannot_be_written_is_said_before_the_simulation(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(simulate_watch, "run", lambda *a, **k: pytest.fail("simulated before --json was checked"))
    with pytest.raises(SystemExit) as stopped:
        simulate_watch.main(["--json", str(tmp_path / "missing" / "rows.json")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
