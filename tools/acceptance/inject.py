"""The one kernel-slowing edit of the acceptance runs: a kernel made to spin on the SM's cycle counter at one place of
its source, so that it takes longer by a known share while what it computes is unchanged. The gate's self-test
(gate_selftest), the history demo (history_demo) and the bisect demo (bisect_demo) all slow kernels this way.

A spin is a loop on clock64() put before one statement of a kernel file, its anchor, which must occur there once:
the kernel runs every instruction it ran before, and waits. Where the wait goes matters, because the compiler
schedules the code around it and the hardware runs it differently from place to place (the same spin after
fp32/naive's stores made it faster at 4096 rather than slower), so the places are fixed below, each one measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class InjectError(ValueError):
    """The kernel file is not the one the edit was written for: the message names the file and what it lacks."""


@dataclass(frozen=True)
class Place:
    """Where in a kernel file a spin goes: before `anchor`, at the anchor's indentation, and, where the file's other
    instantiations must stay the programs they were, inside `if constexpr (only)`."""

    source: str  # the kernel file, relative to a source tree's root
    anchor: str  # the whole line the spin goes before
    only: str | None = None

    @property
    def indent(self) -> str:
        return self.anchor[:len(self.anchor) - len(self.anchor.lstrip(" "))]


# Each tile of the Hopper specialized kernels, before its TMA stores: only the TMA-store epilogue of the
# warpgroups that share their tiles and rebuild their wgmma descriptors each K step (fp16/ and
# bf16/wgmma_grouped_tma_store) takes this branch, so the file's other kernels, wgmma_pingpong's and
# wgmma_lean_loop's included, compile to the programs they were.
TMA_STORE_EPILOGUE = Place(
    "kernels/wgmma_specialized.cu",
    "                float* buffers = reinterpret_cast<float*>(shared + STAGES * L::kStageBytes) +\n",
    only="!L::kTakesTurns && (FEATURES & kDescriptorOffsets) == 0")
# The same place in the Hopper ladder's newest step alone (fp16/ and bf16/wgmma_lean_loop, the kernels that offset
# their wgmma descriptors): its tile and epilogue are step g's, so step g's cycles a percent serve it.
LEAN_LOOP_TMA_STORE_EPILOGUE = Place(TMA_STORE_EPILOGUE.source, TMA_STORE_EPILOGUE.anchor,
                                     only="!L::kTakesTurns && (FEATURES & kDescriptorOffsets) != 0")
# Each thread of fp32/naive's 32 x 32 instantiation, before its K loop; the file's other kernels are unchanged.
NAIVE_BEFORE_K_LOOP = Place("kernels/fp32_naive.cu", "    for (int k = 0; k < K; ++k) {\n", only="BLOCK_X == 32")
# Each block of fp32/warptile, before it starts: a spin in proportion to K costs the same share of the block's time
# at every size, since its main loop runs K / BK steps.
WARPTILE_BLOCK_START = Place("kernels/fp32_warptile.cu", "    constexpr int WARP = 32;\n")
# The same at the start of the best step of each later ladder, the file's other kernels unchanged: FP16 mma.sync's
# fp16/mma_fragment_buffered (fp16/mma_grouped differs from it by GROUP alone) and FP32's
# fp32/async_thread_tile_16x8 (the only 16 x 8 thread tile of its file).
FRAGMENT_BUFFERED_BLOCK_START = Place(
    "kernels/fp16_mma_pipelined.cu", "    extern __shared__ __align__(128) unsigned char shared[];\n",
    only="GROUP == 1 && BN == 256 && FEATURES == (kK16 | kFragmentDoubleBuffer)")
THREAD_TILE_16X8_BLOCK_START = Place("kernels/fp32_async.cu", "    constexpr int WARP = 32;\n",
                                     only="TM == 16 && TN == 8")


def replace_once(path: Path, old: str, new: str) -> None:
    """`old`, which must occur in the file exactly once, replaced by `new`."""
    text = path.read_text()
    if text.count(old) != 1:
        raise InjectError(f"{path} is not the kernel file this edit expects: it needs one `{old.strip()}`")
    path.write_text(text.replace(old, new))


def spin(tree: Path, place: Place, cycles: str, why: str) -> None:
    """The kernel file at `place` in the source tree `tree` made to spin `cycles` SM cycles (a C++ expression: a
    count, or one of the kernel's parameters, as K) each time a thread reaches the place; `why` is the comment the
    edit carries."""
    indent, inner = place.indent, place.indent + ("    " if place.only else "")
    loop = f"{inner}for (const long long until = clock64() + {cycles}; clock64() < until;) {{\n{inner}}}\n"
    if place.only:
        edit = f"{indent}if constexpr ({place.only}) {{  // {why}\n{loop}{indent}}}\n"
    else:
        edit = f"{indent}// {why}\n{loop}"
    replace_once(tree / place.source, place.anchor, edit + place.anchor)


@dataclass(frozen=True)
class Calibration:
    """How many SM cycles of spin at a place make its kernel about 1% slower: that many in all, or, `per_k`, that
    many per `k_unit` of K."""

    place: Place
    cycles_per_percent: int
    per_k: bool = False
    k_unit: int = 1


# Measured on an H100 (the gate self-test, tools/acceptance/gate_selftest.py): 18 cycles per unit of K made
# fp32/warptile 3.0-3.1% slower at 4096, alike in the gate and side by side.
WARPTILE_PER_K = Calibration(WARPTILE_BLOCK_START, 6, per_k=True)
# Calibrated on an H100 at 8192 (lab/2026-11-27-history-pairing/); the slowdown is not in proportion to the spin
# (lab/2026-11-25-gate-selftest/ had a shorter one), for reasons not measured.
HOPPER_PER_TILE = Calibration(TMA_STORE_EPILOGUE, 1670)
# Measured on an H200 (lab/2026-11-28-four-cards, calls 16-18, the independent cold-L2 timer), per 1,024 of K:
# fp16/mma_fragment_buffered 0.17% slower at 4096 and 0.32% at 8192 with 225 cycles, 1.23% and 1.56% with 792 (the
# slowdown not in proportion to the spin, nor to K); fp32/async_thread_tile_16x8 0.39% at 4096 and 8192 with 1,110,
# 0.49% (4096) with 1,710; fp16/mma_fragment_buffered again, with 400 (read between the two): 0.43% at 4096 and
# 0.64% at 8192.
FRAGMENT_BUFFERED_PER_K = Calibration(FRAGMENT_BUFFERED_BLOCK_START, 667, per_k=True, k_unit=1024)
THREAD_TILE_16X8_PER_K = Calibration(THREAD_TILE_16X8_BLOCK_START, 2850, per_k=True, k_unit=1024)
# The kernel files a slowdown by percent knows how to edit.
CALIBRATIONS = {calibration.place.source: calibration for calibration in
                (WARPTILE_PER_K, HOPPER_PER_TILE, FRAGMENT_BUFFERED_PER_K, THREAD_TILE_16X8_PER_K)}


def slow_by_percent(tree: Path, source: str, percent: float) -> None:
    """The kernels of one file of `tree` made about `percent`% slower, at the place and rate their calibration
    gives (InjectError for a file none is known for)."""
    if source not in CALIBRATIONS:
        raise InjectError(f"no slowdown is known for {source}: only for {', '.join(CALIBRATIONS)}")
    calibration = CALIBRATIONS[source]
    count = round(percent * calibration.cycles_per_percent)
    if calibration.per_k:
        per = f" / {calibration.k_unit}" if calibration.k_unit > 1 else ""
        unit = f"{calibration.k_unit} of K" if calibration.k_unit > 1 else "unit of K"
        spin(tree, calibration.place, f"{count}LL * K{per}", f"History demo: spin {count} SM cycles per {unit} "
             f"before the block starts, about {percent:g}% of its time.")
    else:
        spin(tree, calibration.place, str(count), f"History demo: spin {count} SM cycles a tile before its TMA stores.")
