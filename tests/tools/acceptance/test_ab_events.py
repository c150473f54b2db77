"""tools/acceptance/ab_events.py's interval: the spread of its ratio over equal stretches of the timed runs (the
timing itself needs a GPU: tools/acceptance/gate_selftest.py runs it)."""

import random

import pytest

from tools.acceptance import ab_events


def runs(ratio: float, seed: int, count: int = 600) -> tuple[list[list[float]], list[list[int]]]:
    """Times of two builds, the second `ratio` times the first, 1% noise a run, spread over the windows in order."""
    rng = random.Random(seed)
    times = [[1e-3 * (1 + rng.gauss(0, 0.01)) for _ in range(count)],
             [1e-3 * ratio * (1 + rng.gauss(0, 0.01)) for _ in range(count)]]
    windows = [index * ab_events.WINDOWS // count for index in range(count)]
    return times, [windows, windows]


def test_the_interval_holds_the_true_ratio_about_as_often_as_it_says():
    held = 0
    for seed in range(200):
        low, high = ab_events.interval(*runs(1.005, seed))
        assert low < high
        held += low <= 1.005 <= high
    assert 180 <= held <= 200  # 95% nominal: 190 of 200 expected


def test_the_interval_narrows_with_more_runs():
    widths = []
    for count in (120, 1200):
        low, high = ab_events.interval(*runs(1.0, 7, count))
        widths.append(high / low - 1)
    assert widths[1] < widths[0] / 2


def test_one_window_gives_no_interval():
    times = [[1e-3, 1e-3], [1e-3, 1e-3]]
    assert ab_events.interval(times, [[0, 0], [0, 0]]) is None


def test_durations_out_of_range_are_refused_before_any_gpu_work(monkeypatch, capsys):
    for argv, said in ((["--idle-us", "400"], "--idle-us takes a duration"),
                       (["--flush-l2", "--idle-us", "-1"], "--idle-us takes a duration"),
                       (["--flush-l2", "--idle-us", "1e300"], "--idle-us takes a duration of 0 to 1e+06"),
                       (["--flush-l2", "--idle-us", "nan"], "expected a finite number, got 'nan'"),
                       (["--seconds", "0"], "--seconds takes a duration above 0"),
                       (["--seconds", "inf"], "expected a finite number, got 'inf'")):
        monkeypatch.setattr("sys.argv", ["ab_events", "a", "b", "fp32/naive", "64", *argv])
        with pytest.raises(SystemExit) as exit_info:
            ab_events.main()
        assert exit_info.value.code == 2
        assert said in capsys.readouterr().err
