"""Every tool with a command line says a bad argument in one line and exits 2, as `sgemm` does: none builds a plain
argparse parser, whose error prints the usage first."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = sorted(path for path in (ROOT / "tools").rglob("*.py")
               if "ToolParser(" in path.read_text() and path.name != "parser.py")


def test_no_tool_builds_a_plain_argparse_parser():
    plain = [str(path.relative_to(ROOT)) for path in (ROOT / "tools").rglob("*.py")
             if "ArgumentParser(" in path.read_text() and path.name != "parser.py"]
    assert plain == []
    assert len(TOOLS) >= 13


@pytest.mark.parametrize("tool", TOOLS, ids=lambda path: path.stem)
def test_a_bad_argument_is_one_line_and_exit_2(tool):
    module = ".".join(tool.relative_to(ROOT).with_suffix("").parts)
    done = subprocess.run([sys.executable, "-m", module, "--no-such-option"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "usage:" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"{tool.name}: "), done.stderr
