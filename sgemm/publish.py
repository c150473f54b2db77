"""The published site of a results tree (one box's, or several merged): `asv publish`, then the cross-GPU page
linked from asv's navbar, then every library the pages load vendored beside them, so that the site works offline.

asv publish runs under a configuration of its own (sgemm.asvconf) that points at the given results and HTML
directories, so the project's asv.conf.json and its `results/` stay as they are.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .asvconf import write_asv_config
from .catalogue import Kernel
from .crossgpu import report_across_gpus
from .report import ReportError
from .site import Vendored, add_nav_link, vendor_assets

CROSS_GPU_DIR = "gpus"
CROSS_GPU_LABEL = "Across GPUs"
# What of asv's output a failed publish shows: its last lines say why.
ASV_OUTPUT_TAIL = 3000


class PublishError(RuntimeError):
    """The site could not be built; the message says why. What was already in the results tree is untouched."""


@dataclass
class Site:
    html_dir: Path
    cross_gpu: list[Path] = field(default_factory=list)  # the cross-GPU page's files; empty when it was left out
    cross_gpu_skipped: str = ""  # why there is no cross-GPU page
    vendored: list[Vendored] = field(default_factory=list)


def asv_publish(repo: Path, results_dir: Path, html_dir: Path) -> None:
    """`asv publish` of `results_dir` into `html_dir` (which asv empties first), or PublishError with asv's words."""
    if not (results_dir / "benchmarks.json").is_file():
        raise PublishError(f"{results_dir}: not an asv results tree (no benchmarks.json); pass the directory that "
                           "`asv run` or `sgemm merge` filled")
    if not (repo / "asv.conf.json").is_file():
        raise PublishError(f"{repo}: no asv.conf.json; pass the repository the results were measured from (--repo)")
    with tempfile.TemporaryDirectory(prefix="sgemm-publish-") as scratch:
        config = write_asv_config(repo, Path(scratch) / "asv.conf.json", results_dir=results_dir,
                                  html_dir=html_dir, env_dir=Path(scratch) / "env")
        branches = json.loads(config.read_text()).get("branches", ["main"])
        done = subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(config)], cwd=repo,
                              capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-ASV_OUTPUT_TAIL:]
        raise PublishError(f"asv publish exited {done.returncode}:\n{output}")
    # asv draws a history only for commits it finds on the configured branches; for the others it says nothing.
    index = json.loads((html_dir / "index.json").read_text())
    if not index.get("revision_to_hash"):
        raise PublishError(f"none of the commits in {results_dir} is on the branches {branches} of "
                           f"{repo}: the site would show no history (pass the repository they were measured from, "
                           "with those branches fetched)")


def publish_site(repo: Path, results_dir: Path, html_dir: Path, kernels: dict[str, Kernel], header: list[str],
                 size: int | None = None, npm_cache: Path | None = None) -> Site:
    """The whole site of `results_dir` in `html_dir`. The cross-GPU page compares every machine's newest run at
    `size` (default: the largest size all of them measured); a tree with no Gemm results gets no such page."""
    asv_publish(repo, results_dir, html_dir)
    site = Site(html_dir)
    try:
        site.cross_gpu = report_across_gpus(results_dir, html_dir / CROSS_GPU_DIR, kernels, header, size)
        add_nav_link(html_dir, f"{CROSS_GPU_DIR}/index.html", CROSS_GPU_LABEL)
    except ReportError as exc:
        site.cross_gpu_skipped = str(exc)
    site.vendored = vendor_assets(html_dir, npm_cache)
    return site
