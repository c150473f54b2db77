"""The layout of a results tree: which files of a machine's directory are asv's runs, and where a bisect's result
and its state lie, so that no reader mistakes one for another."""

from sgemm.results import confirmations, resultstree


def test_machines_are_the_directories_holding_a_machine_file(tmp_path):
    for name in ("nvidia-h200", "nvidia-h100-80gb-hbm3"):
        (tmp_path / name).mkdir()
        (tmp_path / name / resultstree.MACHINE_FILE).write_text("{}")
    (tmp_path / "not-a-machine").mkdir()
    (tmp_path / "benchmarks.json").write_text("{}")
    assert resultstree.machines(tmp_path) == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]


def test_only_asv_runs_are_run_files(tmp_path):
    machine = tmp_path / "box"
    assert resultstree.is_run_file(machine / "0123abcd-existing-py3.12.json")
    for name in (resultstree.MACHINE_FILE, confirmations.FILE, ".box.sgemm-lock", "notes.txt"):
        assert not resultstree.is_run_file(machine / name), name


def test_a_bisect_result_and_its_state_are_told_apart(tmp_path):
    result = resultstree.bisect_result(tmp_path / "box", "n-1")
    state = resultstree.bisect_state(tmp_path / "box", "n-1")
    assert result.parent == state.parent == tmp_path / "box" / resultstree.BISECT_FOLDER
    assert result != state
    assert resultstree.is_bisect_state(state) and not resultstree.is_bisect_state(result)
