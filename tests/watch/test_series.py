"""A machine's history read as series (sgemm.watch.series): the ratio track where recorded, else round medians;
commits in branch order; a renamed kernel's history continued; a moved reference starting afresh; a corrupt run
file refused by name; the versions each run recorded."""

import dataclasses
import json

import pytest
from history_tree import MACHINE, Case, make_branch, write_history

from sgemm.catalogue import load_catalogue
from sgemm.results import asvsuite
from sgemm.watch.series import WATCHED_TRACK, Environment, WatchError, branch_commits, read_history

KERNELS = load_catalogue()


@pytest.fixture
def branch(tmp_path):
    return tmp_path / "repo", make_branch(tmp_path / "repo", 8)


def test_each_case_follows_its_ratio_where_recorded_else_its_round_medians(tmp_path, branch):
    repo, commits = branch
    cases = [Case("fp32/warptile", 4096, [1.0] * 8),
             Case("fp32/cublas", 4096, [2e-3] * 8, track=asvsuite.ROUND_TIME),
             Case("fp32/warptile", 4096, [5e-3] * 8, track=asvsuite.ROUND_TIME)]
    write_history(tmp_path / "results", commits, cases)
    history = read_history(tmp_path / "results", MACHINE, branch_commits(repo, "main"), KERNELS)
    tracks = {s.case.kernel: s.track for s in history.series}
    assert tracks == {"fp32/warptile": WATCHED_TRACK, "fp32/cublas": asvsuite.ROUND_TIME}
    warptile = next(s for s in history.series if s.case.kernel == "fp32/warptile")
    assert [p.commit for p in warptile.points] == commits
    assert warptile.points[0].sm_clock_mhz == 1500.0 and warptile.points[0].power_w == 700.0
    assert warptile.points[0].card == 0xABC


def test_gaps_are_left_out_and_positions_kept(tmp_path, branch):
    _, commits = branch
    values = [None, None, 1.0, 1.0, None, 1.0, 1.0, 1.0]  # a kernel added at the third commit, one commit failed
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, values)], measured=[2, 3, 5, 6, 7])
    history = read_history(tmp_path / "results", MACHINE, commits, KERNELS)
    assert [p.position for p in history.series[0].points] == [2, 3, 5, 6, 7]
    assert history.measured == [commits[i] for i in (2, 3, 5, 6, 7)]


def test_a_renamed_kernel_goes_on_under_its_new_name(tmp_path, branch):
    _, commits = branch
    renamed = next(k for k in KERNELS.values() if not k.library and k.sizes)
    kernels = dict(KERNELS)
    precision = renamed.precision
    kernels[renamed.name] = dataclasses.replace(renamed, renamed_from=(f"{precision}/old_name",))
    size = renamed.sizes[0]
    old = Case(f"{precision}/old_name", size, [1.0] * 4 + [None] * 4)
    new = Case(renamed.name, size, [None] * 4 + [1.0] * 4)
    write_history(tmp_path / "results", commits, [old, new])
    [series] = read_history(tmp_path / "results", MACHINE, commits, kernels).series
    assert series.case.kernel == renamed.name and len(series.points) == 8


def test_ratios_to_an_older_reference_are_left_out(tmp_path, branch):
    _, commits = branch
    write_history(tmp_path / "results", commits[:4], [Case("fp32/warptile", 4096, [1.0] * 4)],
                  reference_version="reference old")
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, [None] * 4 + [0.9] * 4)],
                  reference_version="reference new", measured=[4, 5, 6, 7])
    [series] = read_history(tmp_path / "results", MACHINE, commits, KERNELS).series
    assert [p.position for p in series.points] == [4, 5, 6, 7]


def test_a_corrupt_run_file_is_refused_by_name(tmp_path, branch):
    _, commits = branch
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, [1.0] * 8)])
    broken = sorted((tmp_path / "results" / MACHINE).glob("*-existing-py.json"))[3]
    broken.write_text("{not json")
    with pytest.raises(WatchError, match=broken.name):
        read_history(tmp_path / "results", MACHINE, commits, KERNELS)
    assert broken.read_text() == "{not json"  # left as it was


@pytest.mark.parametrize("value", ["fast", float("inf")])
def test_a_run_file_holding_a_figure_that_is_no_number_is_refused(tmp_path, branch, value):
    # An infinite ratio would be a step of its own; a string, a traceback.
    _, commits = branch
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, [1.0] * 8)])
    damaged = sorted((tmp_path / "results" / MACHINE).glob("*-existing-py.json"))[3]
    content = json.loads(damaged.read_text())
    figures = content["results"][f"{asvsuite.MODULE}.{asvsuite.GEMM}.{WATCHED_TRACK}"][0]
    figures[next(i for i, figure in enumerate(figures) if figure is not None)] = value
    damaged.write_text(json.dumps(content))
    with pytest.raises(WatchError, match="which is no figure: the run file is damaged"):
        read_history(tmp_path / "results", MACHINE, commits, KERNELS)


def test_no_branch_is_a_clear_error(tmp_path, branch):
    repo, _ = branch
    with pytest.raises(WatchError, match="cannot list the commits of 'trunk'"):
        branch_commits(repo, "trunk")


def test_versions_recorded_per_run_and_their_changes_in_words(tmp_path, branch):
    _, commits = branch
    environment = {i: {asvsuite.DRIVER_VERSION: 580159004.0 if i < 4 else 580165002.0,
                       asvsuite.CUBLAS_VERSION: 130100.0} for i in range(8)}
    write_history(tmp_path / "results", commits, [Case("fp32/warptile", 4096, [1.0] * 8)], environment=environment)
    history = read_history(tmp_path / "results", MACHINE, commits, KERNELS)
    before, after = history.environments[commits[3]], history.environments[commits[4]]
    assert before == Environment(580159004.0, None, 130100.0)
    assert before.differences(after) == ["driver 580.159.04 to 580.165.02"]
    assert Environment().differences(after) == []
