"""The README is a front door and docs/ a manual: the README stays short, carries no figure of a run (those live in
lab/, dated), says how to gate a pull request on its first screen, and no link in it or in docs/ leads nowhere."""

import re
from pathlib import Path

import pytest

from sgemm import kernel_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES, MAX_WIDTH, FIRST_SCREEN = 150, 120, 40

# A number followed by a unit of time, rate, clock, power, energy or share, or by a test count's word: what a run
# measures. A number glued to a letter or an underscore before it (sm_90, float4, fp16) or followed by any other word
# (exit 2, CUDA 12, 2-block) is not one.
FIGURE = re.compile(r"(?<![\w.])\d[\d,.]*(?:[-–]\d[\d,.]*)?\s?"
                    r"(?:%|TFLOP/s|(?:ms|s|min|minutes?|seconds?|hours?|MHz|GHz|W|J|passed|skipped|failed)\b)")
# [text](target) and ![alt](target); the target ends at the first space or closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def _outside_generated_block(lines: list[str]) -> list[tuple[int, str]]:
    kept, inside = [], False
    for number, line in enumerate(lines, start=1):
        if line.strip() == kernel_table.BEGIN:
            inside = True
        elif line.strip() == kernel_table.END:
            inside = False
        elif not inside:
            kept.append((number, line))
    return kept


def test_the_readme_is_at_most_150_lines_of_at_most_120_characters():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; the manual is docs/"
    wide = [f"{number}: {len(line)}" for number, line in enumerate(lines, start=1) if len(line) > MAX_WIDTH]
    assert not wide, f"README.md lines over {MAX_WIDTH} characters: {wide}"


def test_the_readme_says_how_to_gate_a_pull_request_on_its_first_screen():
    assert "sgemm gate" in "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])


def test_no_figure_of_a_run_is_typed_into_the_readme():
    found = [f"{number}: {match.group(0)!r} in {line.strip()!r}"
             for number, line in _outside_generated_block(README.read_text().splitlines())
             for match in FIGURE.finditer(line)]
    assert not found, "figures of a run belong in a dated lab/ entry, linked from docs/: " + "; ".join(found)


@pytest.mark.parametrize("text", ["took 9.8 min", "4.4–5.4 min in all", "2,003 passed", "133 skipped", "0.25%",
                                  "691 s on an H100", "at 1,506 MHz", "736 TFLOP/s", "1.2 J a GEMM", "700 W",
                                  "in 10 minutes", "between 0.3-0.5% a round"])
def test_the_figure_pattern_finds_a_measured_figure(text):
    assert FIGURE.search(text)


@pytest.mark.parametrize("text", ["exit 2 undecided", "exit 0 pass, 1 a kernel got slower", "sm_90a", "sm_70+",
                                  "CUDA 12 or 13", "Python ≥ 3.11", "float4 access", "fp16, bf16", "2-block clusters",
                                  "FP64 reference", "seed 003's sweep", "`[[kernel]]` table", "the 11th commit"])
def test_the_figure_pattern_leaves_words_that_are_not_figures_alone(text):
    assert not FIGURE.search(text)


@pytest.mark.parametrize("page", _pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(page):
    broken = []
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a web address, or a place on this page
            if not (page.parent / target.split("#", 1)[0]).exists():
                broken.append(f"{number}: {target}")
    assert not broken, f"{page.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_manual_has_its_pages():
    pages = {"install", "commands", "gate", "watch", "bisect", "history", "site", "kernels", "ci-security",
             "architecture"}
    assert {page.stem for page in (ROOT / "docs").glob("*.md")} >= pages | {"README"}
    index = (ROOT / "docs" / "README.md").read_text()
    assert all(f"({page}.md)" in index for page in pages)
