"""`sgemm noise --replay` (sgemm.gate.replay): a paired gate's recorded rounds judged again, with a noise file or
each gate with the noise the others taught; and bad input refused in one line, exit 2, before any gate is judged."""

import json
import random
import re

import pytest

from sgemm import cli

QUIET, SLOWED = "fp32/naive 4096x4096x4096", "fp16/wgmma_tma 4096x4096x4096"


def recorded_gate(work, seed: int, slowdown: float = 1.0, rounds: int = 9):
    """A work folder as a paired gate leaves it: rounds/round-N.jsonl, a line a case, ratios scattering 0.1%."""
    rng = random.Random(seed)
    folder = work / "paired" / "rounds"
    folder.mkdir(parents=True)
    for number in range(1, rounds + 1):
        lines = [{"label": QUIET, "ratio": 1 + rng.gauss(0, 1e-3)},
                 {"label": SLOWED, "ratio": slowdown * (1 + rng.gauss(0, 1e-3))}]
        (folder / f"round-{number}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return work


def noise_file(path, machine: str = "h100"):
    path.write_text(json.dumps({"machine": machine, "made": "2026-11-27T00:00Z", "runs": 0, "paired_runs": 3,
                                "cases": {}, "paired": {label: {"sd": 1e-3, "df": 24} for label in (QUIET, SLOWED)},
                                "paired_round": None}))
    return path


@pytest.fixture
def replay(capsys):
    """`sgemm noise --replay ARGS --machine h100`: (exit status, stdout, stderr)."""

    def run(*args, machine: str = "h100"):
        status = cli.main(["noise", "--replay", *map(str, args), "--machine", machine])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return status, out, err

    return run


def test_an_aa_gate_replays_same_and_a_slowed_case_as_a_regression(replay, tmp_path):
    status, out, err = replay(recorded_gate(tmp_path / "aa", 1), recorded_gate(tmp_path / "slow", 2, slowdown=1.01))
    assert status == 0, err
    first, second = (line for line in out.splitlines() if not line.startswith("  "))
    assert first.startswith(f"{tmp_path / 'aa'}: {{'SAME': 2}}") and "(no noise file)" in first
    assert "{'REGRESSION': 1, 'SAME': 1}" in second
    assert f"  {SLOWED}: REGRESSION, ratio 1.0" in out


def test_a_noise_file_decides_at_the_first_look_what_three_rounds_alone_cannot(replay, tmp_path):
    gate = recorded_gate(tmp_path / "aa", 3)
    _, alone, _ = replay(gate)
    assert "up to 3 rounds" not in alone  # two degrees of freedom: open after three rounds
    status, pooled, err = replay(gate, "--noise", noise_file(tmp_path / "noise.json"))
    assert status == 0, err
    assert "{'SAME': 2}" in pooled and "up to 3 rounds" in pooled
    assert f"(noise file {tmp_path / 'noise.json'})" in pooled


def test_leave_one_out_judges_each_gate_with_the_others_noise(replay, tmp_path):
    status, out, err = replay(*(recorded_gate(tmp_path / f"g{n}", n) for n in range(3)), "--leave-one-out")
    assert status == 0, err
    assert out.count("(noise from the other 2 gates)") == 3


def test_a_round_cut_off_mid_line_counts_its_complete_lines(replay, tmp_path):
    gate = recorded_gate(tmp_path / "cut", 7)
    with open(gate / "paired" / "rounds" / "round-9.jsonl", "a") as out:
        out.write('{"label": "fp32/naive 4096x4096x4096", "rat')
    status, out, _ = replay(gate)
    assert status == 0 and "{'SAME': 2}" in out


def test_a_look_wanting_rounds_the_gate_never_recorded_says_so(replay, tmp_path):
    _, out, _ = replay(recorded_gate(tmp_path / "short", 4, rounds=3))
    assert re.search(rf"  left out: {QUIET} \(wanted \d+ rounds, 3 recorded\)", out)


def test_a_gate_too_short_for_any_look_is_said_so_not_judged(replay, tmp_path):
    status, out, err = replay(recorded_gate(tmp_path / "one", 5, rounds=1))
    assert status == 0, err
    assert f"{tmp_path / 'one'}: {{}}; median detectable none; up to 0 rounds" in out
    assert out.count("  left out: ") == 2


def garbled(tmp_path, content: bytes, name: str = "garbled"):
    """A recorded gate whose first round file holds `content`."""
    gate = recorded_gate(tmp_path / name, 8, rounds=2)
    (gate / "paired" / "rounds" / "round-1.jsonl").write_bytes(content)
    return gate


def _no_ratio(tmp_path):
    """A recorded gate whose one round measured nothing (a ratio of 0 is a case that failed)."""
    gate = recorded_gate(tmp_path / "zero", 9, rounds=1)
    (gate / "paired" / "rounds" / "round-1.jsonl").write_text('{"label": "x", "ratio": 0}\n')
    return gate


UNREADABLE = "{tmp}/garbled: cannot read its rounds"
BAD_INPUT = [
    # (what is wrong, the arguments after --replay given the test's folder, the message's piece)
    ("a missing folder", lambda tmp: [tmp / "nowhere"], "{tmp}/nowhere: no such folder"),
    ("a folder with no rounds", lambda tmp: [(tmp / "empty").mkdir() or tmp / "empty"],
     "{tmp}/empty: no rounds/round-N.jsonl under it"),
    ("a round that is not JSON", lambda tmp: [garbled(tmp, b"not json\n")], UNREADABLE),
    ("a round line that is no object", lambda tmp: [garbled(tmp, b"[1, 2]\n")], UNREADABLE),
    ("a round line without its label", lambda tmp: [garbled(tmp, b'{"ratio": 1.0}\n')], UNREADABLE),
    ("a round file that is not text", lambda tmp: [garbled(tmp, b"\xff\xfe\n")], UNREADABLE),
    ("an infinite ratio", lambda tmp: [garbled(tmp, b'{"label": "x", "ratio": Infinity}\n')], UNREADABLE),
    ("a ratio that is not a number", lambda tmp: [garbled(tmp, b'{"label": "x", "ratio": NaN}\n')], UNREADABLE),
    ("a negative ratio", lambda tmp: [garbled(tmp, b'{"label": "x", "ratio": -1.0}\n')], UNREADABLE),
    ("rounds with no ratio", lambda tmp: [_no_ratio(tmp)], "{tmp}/zero: its rounds hold no measured ratio"),
    ("a bad gate after a good one", lambda tmp: [recorded_gate(tmp / "good", 1), tmp / "nowhere"],
     "{tmp}/nowhere: no such folder"),
    ("a noise file that is missing", lambda tmp: [recorded_gate(tmp / "g", 1), "--noise", tmp / "none.json"],
     "{tmp}/none.json is not a noise file"),
    ("another machine's noise file", lambda tmp: [recorded_gate(tmp / "g", 1), "--noise",
                                                  noise_file(tmp / "n.json", "h200")],
     "is the noise of machine 'h200', not of 'h100'"),
    ("leave-one-out of one gate", lambda tmp: [recorded_gate(tmp / "g", 1), "--leave-one-out"],
     "--leave-one-out takes two gates or more and no --noise"),
    ("leave-one-out beside a noise file", lambda tmp: [recorded_gate(tmp / "g", 1), recorded_gate(tmp / "h", 2),
                                                       "--leave-one-out", "--noise", noise_file(tmp / "n.json")],
     "--leave-one-out takes two gates or more and no --noise"),
    ("a noise file to write", lambda tmp: [recorded_gate(tmp / "g", 1), "--out", tmp / "n.json"],
     "--replay judges recorded gates and writes no noise file"),
]


@pytest.mark.parametrize("what, arguments, message", BAD_INPUT, ids=[row[0] for row in BAD_INPUT])
def test_bad_input_is_refused_in_one_line_before_any_gate_is_judged(what, arguments, message, replay, tmp_path):
    status, out, err = replay(*arguments(tmp_path))
    assert (status, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("sgemm noise: ") and message.format(tmp=tmp_path) in err, err


def test_the_replay_options_go_with_replay(tmp_path, capsys):
    for options in (["--noise", str(noise_file(tmp_path / "n.json"))], ["--leave-one-out"]):
        assert cli.main(["noise", "--machine", "h100", "--rounds", str(tmp_path), *options]) == 2
        err = capsys.readouterr().err
        assert err == "sgemm noise: --noise and --leave-one-out go with --replay WORK ...\n"
    assert not (tmp_path / "noise").exists()
