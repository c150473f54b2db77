"""tools/acceptance/inject.py, the one kernel-slowing edit of the acceptance runs, on this repository's kernels with no
GPU: each place is where its kernel file has it once, a spin reaches the programs of the kernels it is meant to slow
and of no other kernel of their file (compiled offline, as the resource suite compiles them), the percent a demo asks
for becomes its calibrated count of cycles, and a file that is not the one an edit expects is refused."""

import shutil
from pathlib import Path

import pytest

from sgemm import sourcetree
from sgemm.measuring.resources import compile_offline
from tools.acceptance import inject

ROOT = Path(__file__).resolve().parents[3]
# Each place, the kernels its spin must change (the rest of its file's kernels must stay the programs they were),
# and the architecture they compile for.
SLOWED = [
    (inject.TMA_STORE_EPILOGUE, {"fp16/wgmma_grouped_tma_store", "bf16/wgmma_grouped_tma_store"}, "sm_90a"),
    (inject.LEAN_LOOP_TMA_STORE_EPILOGUE, {"fp16/wgmma_lean_loop", "bf16/wgmma_lean_loop"}, "sm_90a"),
    (inject.NAIVE_BEFORE_K_LOOP, {"fp32/naive"}, "sm_90"),
    (inject.WARPTILE_BLOCK_START, {"fp32/warptile"}, "sm_90"),
    (inject.FRAGMENT_BUFFERED_BLOCK_START, {"fp16/mma_fragment_buffered"}, "sm_90"),
    (inject.THREAD_TILE_16X8_BLOCK_START, {"fp32/async_thread_tile_16x8"}, "sm_90"),
]


def source_tree(folder: Path) -> Path:
    """This repository's kernels and catalogue, as sgemm.sourcetree exports a commit's."""
    shutil.copytree(ROOT / "kernels", folder / "kernels")
    (folder / "sgemm").mkdir()
    shutil.copy(ROOT / "sgemm" / "catalogue.toml", folder / "sgemm" / "catalogue.toml")
    return folder


@pytest.mark.parametrize("place", [place for place, _, _ in SLOWED], ids=lambda place: place.source)
def test_each_place_is_in_its_kernel_file_once(place):
    assert (ROOT / place.source).read_text().count(place.anchor) == 1


@pytest.mark.parametrize("place, slowed, arch", SLOWED, ids=[place.source for place, _, _ in SLOWED])
def test_a_spin_reaches_the_slowed_kernels_programs_and_no_other_of_their_file(place, slowed, arch, tmp_path):
    plain, spun = source_tree(tmp_path / "plain"), source_tree(tmp_path / "spun")
    inject.spin(spun, place, "K" if place.only else "100", "a test's spin")
    text = (spun / place.source).read_text()
    assert text.count("clock64() < until") == 1 and text.count(place.anchor) == 1
    before, after = sourcetree.kernels(plain), sourcetree.kernels(spun)
    same_file = {name for name, kernel in after.items() if f"kernels/{kernel.source}" == place.source}
    assert slowed <= same_file
    # Where the spin's reads of the SM's cycle counter land: in CI runs under load, NVRTC has numbered an unchanged
    # kernel's registers otherwise for a source that differs only in a discarded branch (cause not found), so the
    # whole PTX or cubin cannot be the test; the gate then times such a case, which costs time, not a verdict.
    assert not any("%clock64" in compile_offline(before[name], arch).ptx for name in same_file)
    spinning = {name for name in same_file if "%clock64" in compile_offline(after[name], arch).ptx}
    assert spinning == slowed


def test_a_percent_becomes_its_calibrated_cycles(tmp_path):
    tree = source_tree(tmp_path)
    inject.slow_by_percent(tree, inject.HOPPER_PER_TILE.place.source, 1.0)
    inject.slow_by_percent(tree, inject.WARPTILE_PER_K.place.source, 2.0)
    assert "clock64() + 1670; clock64() < until;" in (tree / "kernels" / "wgmma_specialized.cu").read_text()
    assert "clock64() + 12LL * K; clock64() < until;" in (tree / "kernels" / "fp32_warptile.cu").read_text()
    inject.slow_by_percent(tree, inject.FRAGMENT_BUFFERED_PER_K.place.source, 0.6)
    assert "clock64() + 400LL * K / 1024; clock64() < until;" in \
        (tree / "kernels" / "fp16_mma_pipelined.cu").read_text()


def test_a_file_the_edit_does_not_expect_is_refused_and_left_as_it_was(tmp_path):
    tree = source_tree(tmp_path)
    with pytest.raises(inject.InjectError, match="no slowdown is known for kernels/fp32_float4.cu"):
        inject.slow_by_percent(tree, "kernels/fp32_float4.cu", 1.0)
    naive = tree / inject.NAIVE_BEFORE_K_LOOP.source
    naive.write_text(naive.read_text() * 2)  # the anchor twice: which one is meant?
    doubled = naive.read_text()
    with pytest.raises(inject.InjectError, match=r"fp32_naive.cu is not the kernel file this edit expects"):
        inject.spin(tree, inject.NAIVE_BEFORE_K_LOOP, "K", "a test's spin")
    assert naive.read_text() == doubled
