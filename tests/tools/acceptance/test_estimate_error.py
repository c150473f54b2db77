"""tools/acceptance/estimate_error.py: a history log's estimates scored against when the run really ended."""

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


def test_a_log_without_its_end_needs_end_s(tmp_path, capsys):
    log = tmp_path / "history.log"
    log.write_text(LOG.replace("sgemm history: ended after 300 s\n", ""))
    assert estimate_error.main([str(log)]) == 2
    assert "give --end-s" in capsys.readouterr().err
    assert estimate_error.main([str(log), "--end-s", "300"]) == 0
