"""The history demo's synthetic run (made-up figures through the real suite's asv names, asv's own regression
detection and the demo's check), for both scenarios: the Regressions page must list the slowed kernels' judged track
at the slowing commit alone. The GPU run is `scripts/history-demo.py run` on a GPU box."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("scenario, listed", [
    ("warptile", ["track_time('warptile', 4096, 'fp32')"]),
    ("hopper", ["track_time_over_reference('wgmma_grouped_tma_store', 8192, 'bf16')",
                "track_time_over_reference('wgmma_grouped_tma_store', 8192, 'fp16')"]),
])
def test_the_step_is_listed_at_its_commit_alone(tmp_path, scenario, listed):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "history-demo.py"), "synthetic", str(tmp_path),
                           "--scenario", scenario], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    found = [line.strip().split(" at ")[0].removeprefix("bench_gemm.Gemm.") for line in lines
             if line.startswith("    bench_gemm.")]
    assert sorted(found) == listed
    assert "check: PASS" in lines
    assert (tmp_path / "history-demo.tar.gz").is_file()
