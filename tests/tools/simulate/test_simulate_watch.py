"""tools/simulate/simulate_watch.py: the watch's change-point detector on simulated series, in a small version of
its full run. A/A series raise no step, and 1% and 2% steps are found at their commit through the noise the history
sees."""

from tools.simulate import simulate_watch


def test_simulated_series_small_version():
    """200 series a row (the tool runs 1,000): no false alarm at the noise of the ratio track, and 1% and 2%
    found almost always there."""
    rows = simulate_watch.run(200, 30, 15, seed=11, levels=(0.0005, 0.002), shapes=("normal", "t3"))
    for row in rows:
        if row["step"] == 0:
            assert row["with_a_step_found"] <= 1, row
        else:
            assert row["found_at_its_commit"] >= 0.9 * row["series"], row


def test_the_simulation_runs_from_its_command_line(tmp_path, capsys):
    assert simulate_watch.main(["--series", "3", "--commits", "12", "--json", str(tmp_path / "rows.json")]) == 0
    assert "false alarms" in capsys.readouterr().out
    assert (tmp_path / "rows.json").is_file()
