"""What a sandboxed round's process wrote is read by the judge strictly: no link followed, nothing but a regular
file, its size bounded, every line but a last one cut off JSON; anything else is a RoundFileError (the gate then
exits 2 with its one line), never a file of the runner's read through the job's link."""

import json
import os

import pytest

from sgemm.rounds.session import RoundFileError, _read_lines, read_round_file

LINE = {"label": "k", "failed": {"kind": "build", "reason": "x"}}


def test_complete_lines_are_read_and_a_last_line_cut_off_is_left_out(tmp_path):
    out = tmp_path / "round-1.jsonl"
    out.write_text(json.dumps(LINE) + "\n" + '{"label": "k", "rat')
    assert _read_lines(out) == [LINE]
    assert _read_lines(tmp_path / "absent.jsonl") == []


@pytest.mark.parametrize("case", ["link", "fifo", "folder", "too large", "not json"])
def test_a_round_file_the_job_bent_is_refused(tmp_path, case):
    secret = tmp_path / "credentials"
    secret.write_text(json.dumps(LINE) + "\n")
    out = tmp_path / "round-1.jsonl"
    if case == "link":
        out.symlink_to(secret)
    elif case == "fifo":
        os.mkfifo(out)
    elif case == "folder":
        out.mkdir()
    elif case == "too large":
        out.write_text(json.dumps(LINE) + "\n" + " " * 2048 + "\n")
    else:
        out.write_text("not json\n" + json.dumps(LINE) + "\n")
    with pytest.raises(RoundFileError) as raised:
        if case == "too large":
            read_round_file(out, limit=1024)
        else:
            _read_lines(out)
    assert str(raised.value).startswith(str(out)) and "\n" not in str(raised.value)
