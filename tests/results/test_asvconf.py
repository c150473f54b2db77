"""The project's asv configuration rewritten with directories of its own."""

import json
from pathlib import Path

from sgemm.results.asvconf import run_environment, write_asv_config

ROOT = Path(__file__).resolve().parents[2]


def test_directories_move_and_the_project_build_stays(tmp_path):
    path = write_asv_config(ROOT, tmp_path / "asv.conf.json", env_dir=tmp_path / "env",
                            results_dir=tmp_path / "results", html_dir=tmp_path / "html")
    config = json.loads(path.read_text())
    assert config["results_dir"] == str(tmp_path / "results")
    assert config["env_dir"] == str(tmp_path / "env")
    assert config["html_dir"] == str(tmp_path / "html")
    assert config["benchmark_dir"] == str(ROOT / "benchmarks")
    assert config["repo"] == str(ROOT)
    assert config["environment_type"] == "virtualenv"  # asv continuous refuses 'existing'
    assert any("SGEMM_CUDA_SITE" in step for step in config["install_command"])
    assert config["launch_method"] == "forkserver"


def test_a_folder_named_with_an_emoji_reaches_asv_as_it_is_named(tmp_path):
    """The newcomer's U02 and X20emo: asv reads its configuration with json5, which made the escaped pair of an emoji
    two lone surrogates that no path can hold, and asv failed late (`surrogates not allowed`)."""
    from asv.config import Config

    site, results = tmp_path / "site 😀", tmp_path / "résultats 😀"
    path = write_asv_config(ROOT, tmp_path / "asv.conf.json", html_dir=site, results_dir=results)
    config = Config.load(str(path))
    assert (config.html_dir, config.results_dir) == (str(site), str(results))
    Path(config.html_dir).mkdir()  # what asv publish does first


def test_the_history_and_the_gate_start_asv_without_asv_pythonpath(monkeypatch):
    """asv would make it the PYTHONPATH of every benchmark process of a virtualenv and then strip those paths, the
    linked CUDA stack's among them; the history and the gate's unpaired rounds both start asv through this."""
    from sgemm.history import run

    monkeypatch.setenv("ASV_PYTHONPATH", "/somewhere/site")
    monkeypatch.setenv("SGEMM_CUDA_SITE", "/cuda/site")
    assert "ASV_PYTHONPATH" not in run_environment()
    assert run_environment({"A": "1", "ASV_PYTHONPATH": "x"}) == {"A": "1"}
    env = run._asv_environment()
    assert "ASV_PYTHONPATH" not in env and env["SGEMM_CUDA_SITE"] == "/cuda/site"
