"""The history demo's synthetic run (made-up figures through the real suite's asv names, asv's own regression
detection, the history's detector and the demo's checks): asv's Regressions page must list the slowed kernels'
judged track at their slowing commits alone, and the history must file one notice per slowing commit. The `watch`
scenario covers the paired path (two steps, the Hopper pair's over the reference build), `warptile` the unpaired one
(its time, the round medians). The GPU run is `python -m tools.acceptance.history_demo run` on a GPU box."""

import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from tools.acceptance import history_checks, history_demo

ROOT = Path(__file__).resolve().parents[3]
DEMO = [sys.executable, "-m", "tools.acceptance.history_demo"]
HOPPER = ["track_time_over_reference_flushed('wgmma_grouped_tma_store', 8192, 'bf16')",
          "track_time_over_reference_flushed('wgmma_grouped_tma_store', 8192, 'fp16')"]
HOPPER_NOTICE = "bf16/wgmma_grouped_tma_store and fp16/wgmma_grouped_tma_store at 8192"
SCENARIOS = {
    "warptile": (["track_time('warptile', 4096, 'fp32')"], ["fp32/warptile at 4096"]),
    "watch": ([*HOPPER, "track_time_over_reference_flushed('warptile', 4096, 'fp32')"],
              [HOPPER_NOTICE, "fp32/warptile at 4096"]),
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def synthetic(request, tmp_path_factory):
    """(scenario, the synthetic run, its output folder)."""
    out = tmp_path_factory.mktemp(request.param)
    done = subprocess.run([*DEMO, "synthetic", str(out), "--scenario", request.param], cwd=ROOT,
                          capture_output=True, text=True)
    return request.param, done, out


def test_each_step_is_listed_and_noticed_at_its_commit_alone(synthetic):
    scenario, done, out = synthetic
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    listed, notices = SCENARIOS[scenario]
    found = [line.strip().split(" at ")[0].removeprefix("bench_gemm.Gemm.") for line in lines
             if line.startswith("    bench_gemm.")]
    assert sorted(found) == sorted(listed)
    noticed = [line.split(": ", 1)[1].split(", first bad")[0] for line in lines if line.startswith("    candidate: ")]
    assert sorted(noticed) == sorted(notices)
    assert "check of asv's page: PASS" in lines and "check of the notices: PASS" in lines
    with tarfile.open(out / "history-demo.tar.gz") as archive:
        demo = json.load(archive.extractfile("demo.json"))
    assert demo["scenario"]["name"] == scenario and demo["synthetic"]


def test_the_checks_fail_on_a_step_elsewhere_or_a_step_missed(synthetic, tmp_path):
    """The archive's own notices and asv's listing, held against the demo moved: a slowing commit one later, or a
    slowdown the history did not see, fails both checks (asv's page then misses the one and wrongly lists the
    other)."""
    scenario, done, out = synthetic
    assert done.returncode == 0
    clone, demo, results_dir = history_demo.unpack(out / "history-demo.tar.gz", tmp_path)
    shutil.move(results_dir, clone / "results")  # where the clone's asv.conf.json reads them
    history_checks.set_regression_settings(clone / "asv.conf.json", demo.scenario, demo.scenario.threshold)
    subprocess.run([sys.executable, "-m", "asv", "publish"], cwd=clone, check=True, capture_output=True)
    notices = history_demo.detect_notices(clone, clone / "results")
    assert history_checks.check(clone / "html", demo).exact and history_checks.check_notices(notices, demo)
    first = demo.scenario.slowdowns[0]
    for moved in (replace(first, at=first.at + 1), replace(first, kernels=("fp32/float4",))):
        other = replace(demo, scenario=replace(demo.scenario, slowdowns=(moved, *demo.scenario.slowdowns[1:])))
        assert not history_checks.check_notices(notices, other)
        listing = history_checks.check(clone / "html", other)
        assert listing.missed and listing.extra


def test_resume_refuses_an_archive_of_made_up_figures(synthetic):
    scenario, done, out = synthetic
    done = subprocess.run([*DEMO, "run", str(out), "--scenario", scenario, "--resume"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2 and f"is the archive of another demo ({scenario}, made up)" in done.stderr
