"""Which rounds are outliers (sgemm.rounds.outliers): far from their rounds' median by a known spread or their own,
none where most are far."""

from sgemm.rounds.evidence import Noise, PairedRounds
from sgemm.rounds.outliers import ordinary_groups, ordinary_rounds, outlier_indices, outlier_reach


def test_a_commit_whose_rounds_are_all_wide_is_judged_on_all_of_them():
    # most rounds far from the median: a jittery build, not a disturbed round; none is set aside
    logs = [0.0, 0.02, -0.015, 0.03, -0.025]
    assert ordinary_rounds(logs, Noise(0.001, 30)) == logs
    assert ordinary_rounds([0.0, 0.0005, -0.0004, 0.03, 0.0002], Noise(0.001, 30)) == [0.0, 0.0005, -0.0004, 0.0002]


def test_no_round_is_set_aside_by_a_spread_of_a_few_rounds():
    # the bad end's own three rounds, no noise file: a robust sd from them would move with the outlier itself
    assert outlier_reach([[0.01, 0.011, 0.04]], None) == 0
    assert outlier_reach([[0.01, 0.011, 0.04]], Noise(0.001, 2)) == 0
    assert outlier_reach([[0.01, 0.011, 0.04]], Noise(0.001, 12)) > 0



def test_a_known_spread_of_few_degrees_of_freedom_serves_where_the_caller_allows_it():
    # a gate's noise-file entry of 6 degrees of freedom: its upper bound already allows for how few they are
    logs = [0.0, 0.0005, -0.0004, 0.03, 0.0002]
    assert outlier_indices(logs, Noise(0.001, 6)) == []
    assert outlier_indices(logs, Noise(0.001, 6), known_df=1) == [3]


def test_a_round_set_aside_takes_every_figure_of_its_round_with_it():
    rounds = PairedRounds((1.0, 1.5, 1.001), base_clocks_mhz=(1, 2, 3), head_clocks_mhz=(4, 5, 6),
                          base_s=(0.1, 0.2, 0.3), head_s=(0.4, 0.5, 0.6), block_s=0.02, joules=(7, 8, 9))
    assert rounds.without([1]) == PairedRounds((1.0, 1.001), (1, 3), (4, 6), (0.1, 0.3), (0.4, 0.6), 0.02, (7, 9))


def test_a_spread_learned_where_none_is_known_is_not_widened_by_the_outliers_it_is_to_tell():
    # three gates of nine rounds at 0.1%, four of them disturbed by 0.6%: the robust sd of every round is itself
    # widened by them, and five of it would keep them; the passes at the learned spread's own rule drop them
    groups = [[0.001, -0.001, 0.0005, -0.0005, 0.0, 0.0015, -0.0015, 0.006, 0.0],
              [0.0008, -0.0008, 0.0002, -0.0002, 0.001, -0.001, -0.006, 0.0004, -0.0004],
              [0.0012, -0.0012, 0.0, 0.0006, -0.0006, 0.006, 0.0003, -0.0003, 0.0065]]
    assert outlier_reach(groups, None) > 0.0065  # one pass at OWN_OUTLIER_SD would keep them all
    kept = ordinary_groups(groups)
    assert [len(values) for values in kept] == [8, 8, 7]
    assert max(abs(value) for values in kept for value in values) < 0.002
    ordinary = [[0.001, -0.001, 0.0005, -0.0005, 0.0, 0.0015, -0.0015, 0.0002, 0.0]] * 3
    assert ordinary_groups(ordinary) == ordinary


def test_outliers_that_widen_the_rounds_own_spread_do_not_hide_themselves(monkeypatch):
    # nine rounds of a case whose entry (0.1%, 24 degrees of freedom) is right, three of them disturbed by about
    # 0.5%: their own robust sd is widened by those three (2.7 times the entry), and three of it would keep them all;
    # the six other rounds agree with the entry, so the three are the outliers
    from sgemm.rounds import outliers

    logs = [-0.0046, 0.0058, 0.0079, -0.0013, 0.0009, 0.0005, -0.0011, 0.0006, 0.0022]
    entry = Noise(0.001, 24)
    assert outliers.outlier_reach([logs], entry, known_df=1) > 0.0079
    assert sorted(outlier_indices(logs, entry, known_df=1)) == [0, 1, 2]
    monkeypatch.setattr(outliers, "WIDE_LEVEL", 0.0)  # the rest always "wider": the widened reach rules, as before
    assert outlier_indices(logs, entry, known_df=1) == []


def test_rounds_wide_throughout_are_not_told_by_a_narrow_entry():
    # rounds whose own spread is three times the entry's in every round, none disturbed: nothing is set aside
    logs = [-0.003, 0.0025, -0.0015, 0.0032, -0.0028, 0.0005, 0.0018, -0.0022, 0.004]
    assert outlier_indices(logs, Noise(0.001, 24), known_df=1) == []
