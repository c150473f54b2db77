"""The history demo's synthetic run (made-up figures through the real suite's asv names, asv's own regression
detection, the history's detector and the demo's checks), for every scenario: asv's Regressions page must list the
slowed kernels' judged track at their slowing commits alone, and the history must file one notice per slowing
commit. The GPU run is `scripts/history-demo.py run` on a GPU box."""

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "scripts" / "history-demo.py"
HOPPER = ["track_time_over_reference('wgmma_grouped_tma_store', 8192, 'bf16')",
          "track_time_over_reference('wgmma_grouped_tma_store', 8192, 'fp16')"]
HOPPER_NOTICE = "bf16/wgmma_grouped_tma_store and fp16/wgmma_grouped_tma_store at 8192"


def synthetic(out: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(DEMO), "synthetic", str(out), *options], capture_output=True, text=True)


@pytest.mark.parametrize("scenario, listed, notices", [
    ("warptile", ["track_time('warptile', 4096, 'fp32')"], ["fp32/warptile at 4096"]),
    ("hopper", HOPPER, [HOPPER_NOTICE]),
    ("watch", [*HOPPER, "track_time_over_reference('warptile', 4096, 'fp32')"],
     ["fp32/warptile at 4096", HOPPER_NOTICE]),
])
def test_each_step_is_listed_and_noticed_at_its_commit_alone(tmp_path, scenario, listed, notices):
    done = synthetic(tmp_path, "--scenario", scenario)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    found = [line.strip().split(" at ")[0].removeprefix("bench_gemm.Gemm.") for line in lines
             if line.startswith("    bench_gemm.")]
    assert sorted(found) == sorted(listed)
    noticed = [line.split(": ", 1)[1].split(", first bad")[0] for line in lines if line.startswith("    candidate: ")]
    assert sorted(noticed) == sorted(notices)
    assert "check of asv's page: PASS" in lines and "check of the notices: PASS" in lines
    with tarfile.open(tmp_path / "history-demo.tar.gz") as archive:
        demo = json.load(archive.extractfile("demo.json"))
    assert demo["scenario"]["name"] == scenario and demo["synthetic"]


def test_a_step_too_small_to_see_fails_both_checks(tmp_path):
    """0.05% is inside the made-up noise: nothing is listed or noticed, and the demo says its checks failed."""
    done = synthetic(tmp_path, "--scenario", "hopper", "--percent", "0.05")
    assert done.returncode == 1
    assert "check of asv's page: FAIL" in done.stdout and "check of the notices: FAIL" in done.stdout


def test_resume_refuses_an_archive_of_made_up_figures(tmp_path):
    assert synthetic(tmp_path, "--scenario", "watch").returncode == 0
    done = subprocess.run([sys.executable, str(DEMO), "run", str(tmp_path), "--scenario", "watch", "--resume"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "is the archive of another demo (watch, made up)" in done.stderr
