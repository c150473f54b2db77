"""tools/acceptance/estimate_error.py: a history log's estimates scored against when the run really ended."""

import pytest

from tools.acceptance import estimate_error

LOG = """sgemm history: machine box: 1 commit to measure
asv:   0% · starting · 30 s so far, about 4.0 min left
asv:   0% · commit 1 of 1 (abcdef12) · 1.5 min so far, about 3.0 min left
asv:  40% · commit 1 of 1 (abcdef12) · 3.0 min so far, about 1.6 min left
sgemm history: ended after 300 s
"""


def test_every_line_is_scored_against_the_real_end(tmp_path, capsys):
    log = tmp_path / "history.log"
    log.write_text(LOG)
    assert estimate_error.main([str(log)]) == 0
    out = capsys.readouterr().out
    assert "worst ratio 1.25" in out and "0 beyond 2x" in out  # 96 s estimated where 120 s were left


def test_a_line_beyond_twice_the_truth_fails(tmp_path, capsys):
    log = tmp_path / "history.log"
    log.write_text(LOG.replace("about 1.6 min left", "about 107.6 min left"))
    assert estimate_error.main([str(log)]) == 1
    assert "1 beyond 2x" in capsys.readouterr().out


def test_the_time_left_carries_the_rounding_of_the_elapsed_time_it_is_taken_from(tmp_path, capsys):
    # "7.4 min so far" is 441-447 s: at a real end of 444 s, "2 s left" is right within what the log can say.
    log = tmp_path / "history.log"
    last = "asv: 100% · commit 1 of 1 (abcdef12) · 7.4 min so far, about {} left\n"
    log.write_text(last.format("2 s"))
    assert estimate_error.main([str(log), "--end-s", "444"]) == 0
    assert "0 beyond 2x" in capsys.readouterr().out
    log.write_text(last.format("20 s"))
    assert estimate_error.main([str(log), "--end-s", "444"]) == 1


def test_a_log_without_its_end_needs_end_s(tmp_path, capsys):
    log = tmp_path / "history.log"
    log.write_text(LOG.replace("sgemm history: ended after 300 s\n", ""))
    assert estimate_error.main([str(log)]) == 2
    assert "give --end-s" in capsys.readouterr().err
    assert estimate_error.main([str(log), "--end-s", "300"]) == 0


@pytest.mark.parametrize("option, value", [("--end-s", "nan"), ("--after-s", "-1"), ("--allowed", "inf"),
                                           ("--allowed", "0.5")])
def test_a_limit_that_is_no_usable_number_is_refused_in_one_line(tmp_path, capsys, option, value):
    log = tmp_path / "history.log"
    log.write_text("1.0 min so far, about 2.0 min left\nsgemm history: ended after 180 s\n")
    with pytest.raises(SystemExit) as stopped:
        estimate_error.main([str(log), option, value])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{option} is a finite number of at least" in error
