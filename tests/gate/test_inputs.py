"""What the gate judges by comes from the base commit: a head that rewrites asv.conf.json (its build command, its
matrix), widens its machine's noise file and raises the gate's thresholds in its own code is measured, and judged
as the base would judge it. No GPU: the gate's run itself is stood in, and what it was handed is checked."""

import json
import subprocess
from types import SimpleNamespace

import pytest

from sgemm.gate import plan
from sgemm.gate.inputs import JudgeInputsError, export
from sgemm.gate.noise import write as write_noise
from sgemm.gate.run import PAIRED, UNPAIRED, UNPAIRED_THRESHOLD, GateResult
from sgemm.results import machine as machine_module
from sgemm.results.asvconf import write_asv_config
from sgemm.rounds.evidence import Noise
from sgemm.rounds.session import PAIRED_THRESHOLD

MACHINE = "test-box"
PWNED = "touch {build_dir}/../pwned"  # a build command of the head's, which would run for the base too


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def change(project_repo):
    """base: the project with a noise file of MACHINE; head: the same with a kernel touched and the judge's inputs
    rewritten, checked out."""
    repo = project_repo
    noise = repo / "noise" / f"{MACHINE}.json"
    write_noise(noise, MACHINE, {"fp32/naive 1024x1024x1024": Noise(0.001, 30)}, 5)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "noise of the test box")
    base = git(repo, "rev-parse", "HEAD")
    with open(repo / "kernels" / "fp32_naive.cu", "a") as source:
        source.write("\n// a change under test\n")
    config = (repo / "asv.conf.json").read_text()
    config = config.replace('"build_command": [\n', f'"build_command": [\n        "{PWNED}",\n')
    config = config.replace('"matrix": {"req": {', '"matrix": {"req": {"evil-package": [""], ')
    (repo / "asv.conf.json").write_text(config)
    write_noise(noise, MACHINE, {"fp32/naive 1024x1024x1024": Noise(0.5, 1000)}, 500)
    gate_code = repo / "sgemm" / "rounds" / "session.py"
    gate_code.write_text(gate_code.read_text().replace("PAIRED_THRESHOLD = 0.0025", "PAIRED_THRESHOLD = 0.5"))
    git(repo, "commit", "-qam", "widen the judge")
    return repo, base, git(repo, "rev-parse", "HEAD")


def test_the_head_really_changes_the_judges_inputs(change):
    repo, base, head = change
    changed = git(repo, "diff", "--name-only", base, head).split()
    assert {"asv.conf.json", f"noise/{MACHINE}.json", "sgemm/rounds/session.py"} <= set(changed)
    assert "evil-package" in (repo / "asv.conf.json").read_text() and PWNED in (repo / "asv.conf.json").read_text()


def test_the_base_commits_files_are_exported_not_the_working_trees(change, tmp_path):
    repo, base, _ = change
    inputs = export(repo, base, MACHINE, tmp_path / "judge")
    assert inputs.asv_config.read_text() == git(repo, "show", f"{base}:asv.conf.json") + "\n"
    assert "evil-package" not in inputs.asv_config.read_text()
    assert json.loads(inputs.noise_file.read_text())["cases"]["fp32/naive 1024x1024x1024"]["sd"] == 0.001
    assert export(repo, base, "other-box", tmp_path / "judge").noise_file is None  # none for that machine


def test_the_asv_configuration_of_both_sides_is_the_bases(change, tmp_path):
    repo, base, _ = change
    inputs = export(repo, base, MACHINE, tmp_path / "judge")
    config = json.loads(write_asv_config(repo, tmp_path / "asv.conf.json", inputs.asv_config,
                                         results_dir=tmp_path / "results").read_text())
    assert PWNED not in config["build_command"]
    assert "evil-package" not in config["matrix"]["req"]
    assert config["repo"] == str(repo) and config["benchmark_dir"] == str(repo / "benchmarks")  # what is measured
    assert config["results_dir"] == str(tmp_path / "results")


def test_a_base_without_an_asv_configuration_is_refused(project_repo, tmp_path):
    git(project_repo, "rm", "-q", "asv.conf.json")
    git(project_repo, "commit", "-qm", "no asv")
    with pytest.raises(JudgeInputsError, match="has no asv.conf.json"):
        export(project_repo, git(project_repo, "rev-parse", "HEAD"), MACHINE, tmp_path / "judge")


def test_the_gate_is_handed_the_bases_configuration_noise_and_thresholds(change, tmp_path, monkeypatch):
    repo, base, head = change
    handed = {}

    def stand_in(repo, base, head, selection, cases, machine, work_dir, settings, device, compute_capability,
                 asv_config, devices):
        handed.update(settings=settings, asv_config=asv_config, cases=cases, devices=devices)
        return GateResult(base, head, machine, selection, settings)

    gpu = SimpleNamespace(name="Stand-in GPU", compute_capability=90, compute_capability_text="9.0", driver="1",
                          memory_gib=80, max_sm_clock_mhz=1980.0)
    monkeypatch.setattr(machine_module, "detect_identity", lambda device: gpu)
    monkeypatch.setattr(machine_module, "write_machine_file", lambda entry: None)
    monkeypatch.setattr(plan, "run_gate", stand_in)
    request = plan.Request(repo, base, head, sizes=(1024,), sweep=False, machine=MACHINE,
                              work_dir=tmp_path / "gate")
    assert plan.gate(request) == 0
    assert handed["cases"], "the change selects nothing: the test measures nothing"
    assert handed["devices"] is None  # one card, the --device one, unless --gpus named more
    assert "evil-package" not in handed["asv_config"].read_text()
    assert handed["settings"].noise[UNPAIRED]["fp32/naive 1024x1024x1024"] == Noise(0.001, 30)
    settings = handed["settings"]
    assert settings.threshold_for("fp32/naive", PAIRED) == PAIRED_THRESHOLD == 0.0025
    assert settings.threshold_for("fp32/naive", UNPAIRED) == UNPAIRED_THRESHOLD
