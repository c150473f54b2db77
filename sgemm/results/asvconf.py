"""The project's asv configuration, written anew with some directories moved: the gate's runs and a publish of
merged results each get their own, and the project's file stays as it is. The gate writes it from the base commit's
file (`source`), so that a change under test cannot change how either commit is built, installed or run."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path


def write_asv_config(repo: Path, path: Path, source: Path | None = None, **directories: Path) -> Path:
    """asv.conf.json of `repo` (or the file `source`, read as if it were repo's) with every path absolute and
    `directories` (e.g. results_dir=...) replaced."""
    from asv.util import load_json

    conf = load_json(str(source or repo / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(repo), benchmark_dir=str(repo / conf.get("benchmark_dir", "benchmarks")),
                **{key: str(Path(value).resolve()) for key, value in directories.items()})
    # Written as UTF-8, never as \\u escapes: asv reads its configuration with json5, which turns the escaped pair of
    # a character beyond the BMP (an emoji in a folder's name) into two lone surrogates that no path can hold.
    path.write_text(json.dumps(conf, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def run_environment(base: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment an `asv run` or `asv continuous` of virtualenv environments is started with: `base` less
    ASV_PYTHONPATH, which asv turns into PYTHONPATH for a virtualenv's processes and its benchmark runner then removes
    from sys.path, even where the environment's .pth file (SGEMM_CUDA_SITE) had put those paths there."""
    return {key: value for key, value in base.items() if key != "ASV_PYTHONPATH"}
