"""The resource suite: parameters from the working tree, figures from ptxas, skips and failures told apart."""

import importlib
import sys
from pathlib import Path

import pytest

from sgemm.catalogue import architectures, load_catalogue
from sgemm.measuring import resources
from sgemm.measuring.resources import ResourceUsage

ROOT = Path(__file__).resolve().parents[2]


def load_suite():
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module("benchmarks.bench_resources")
    finally:
        sys.path.remove(str(ROOT))


def test_parameters_are_every_compiled_kernel_on_every_tracked_architecture_and_target():
    kernels, archs = load_suite().Resources.params
    assert kernels == [k.name for k in load_catalogue().values() if not k.library]
    assert archs == architectures() + ["sm_90a"] and "sm_90" in archs  # append only: history is keyed by them


def test_a_kernel_is_not_tracked_on_an_architecture_it_is_not_built_for():
    suite = load_suite().Resources()
    with pytest.raises(NotImplementedError, match="fp16/wgmma_tma is built for sm_90a, not sm_90"):
        suite.setup({}, "fp16/wgmma_tma", "sm_90")
    with pytest.raises(NotImplementedError, match="fp32/naive is built for the generic architectures, not sm_90a"):
        suite.setup({}, "fp32/naive", "sm_90a")


def test_figures_come_from_the_cached_table():
    suite = load_suite().Resources()
    table = {("fp32/naive", "sm_90"): ResourceUsage(28, 0, 16, 4, 8)}
    suite.setup(table, "fp32/naive", "sm_90")
    figures = [suite.track_registers(table, "fp32/naive", "sm_90"), suite.track_shared_memory(table, "", ""),
               suite.track_local_memory(table, "", ""), suite.track_spill_stores(table, "", ""),
               suite.track_spill_loads(table, "", "")]
    assert figures == [28, 0, 16, 4, 8]


def test_a_kernel_the_commit_lacks_is_a_skip_and_a_compile_error_a_failure():
    suite = load_suite().Resources()
    with pytest.raises(NotImplementedError, match="no fp32/naive kernel"):
        suite.setup({}, "fp32/naive", "sm_90")
    with pytest.raises(RuntimeError, match="identifier"):
        suite.setup({("fp32/naive", "sm_90"): "fp32/naive: identifier x is undefined"}, "fp32/naive", "sm_90")
    with pytest.raises(NotImplementedError, match="NVRTC is not usable"):
        suite.setup({"unavailable": "NVRTC is not usable here: no cuda"}, "fp32/naive", "sm_90")


def test_setup_cache_compiles_every_kernel_for_every_architecture(compile_once, monkeypatch, tmp_path):
    # Each build is test_every_kernel_compiles_without_a_gpu_...'s as well: compile_once makes it once a run.
    monkeypatch.setattr(resources, "compile_offline", compile_once)
    table = load_suite().Resources().setup_cache()
    compiled = [k for k in load_catalogue().values() if not k.library]
    assert set(table) == {(k.name, arch) for k in compiled for arch in k.architectures(tuple(architectures()))}
    failures = {key: value for key, value in table.items() if isinstance(value, str)}
    assert not failures
    # Two programs compiled afresh, together in the table's threads as setup_cache compiles them, give the figures
    # the table holds.
    monkeypatch.undo()
    monkeypatch.setenv("SGEMM_CACHE_DIR", str(tmp_path))  # what the table kept on disk is not read back
    two = list({(k.source, k.entry): k for k in compiled if not k.target}.values())[:2]
    fresh = resources.usage_table(two, ("sm_90",))
    assert len(fresh) == 2 and fresh == {key: table[key] for key in fresh}


def test_the_byte_tracks_say_bytes_so_that_asv_draws_them_from_zero_and_each_name_says_per_what():
    suite = load_suite().Resources
    units = {name: getattr(suite, name).unit for name in dir(suite) if name.startswith("track_")}
    assert units == {"track_registers": "registers/thread", "track_shared_memory": "bytes",
                     "track_local_memory": "bytes", "track_spill_stores": "bytes", "track_spill_loads": "bytes"}
    names = {name: getattr(suite, name).pretty_name for name in units}
    assert names["track_shared_memory"].endswith("per block")
    assert all(name.endswith("per thread") for track, name in names.items() if track != "track_shared_memory")


def test_the_tracks_the_history_names_are_the_suite_s():
    from sgemm.results.asvsuite import RESOURCE_TRACKS, RESOURCES

    suite = load_suite()
    assert f"bench_resources.{suite.Resources.__name__}" == RESOURCES
    assert set(RESOURCE_TRACKS) == {name for name in dir(suite.Resources) if name.startswith("track_")}
