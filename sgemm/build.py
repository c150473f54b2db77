"""Compile catalogue kernels at run time with NVRTC through cupy.RawModule, once per kernel and process."""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from .catalogue import KERNEL_DIR, Kernel

_LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def local_includes(source_text: str) -> list[str]:
    """The headers a CUDA source includes with quotes (ours, in kernels/), in order."""
    return _LOCAL_INCLUDE.findall(source_text)


class BuildError(RuntimeError):
    """A kernel failed to compile; the message holds the compiler log."""


def toolkit_include_dirs() -> list[str]:
    """The CUDA toolkit's include directory, when there is one.

    <mma.h> needs crt/mma.h, which CuPy's pip headers lack unless the nvidia-cuda-crt wheel is installed; the
    toolkit's copy serves where it is not.
    """
    roots = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    found = [Path(root) / "include" for root in roots if root and (Path(root) / "include" / "crt" / "mma.h").is_file()]
    return [str(found[0])] if found else []


def nvrtc_options(kernel_dir: Path = KERNEL_DIR) -> tuple[str, ...]:
    """Options common to every compile, on the GPU (CuPy) and off it (resources)."""
    return ("--std=c++17", f"-I{kernel_dir}", *(f"-I{d}" for d in toolkit_include_dirs()))


def kernel_source(kernel: Kernel, kernel_dir: Path = KERNEL_DIR) -> str:
    """The kernel's source, with a digest of each local header it includes appended.

    CuPy caches compiled modules on disk keyed by source text and options only; without the digests an edited
    header would be served from the cache as the old binary.
    """
    text = (kernel_dir / kernel.source).read_text()
    digests = [
        f"// {header}: sha256 {hashlib.sha256((kernel_dir / header).read_bytes()).hexdigest()}"
        for header in local_includes(text)
        if (kernel_dir / header).is_file()
    ]
    return "\n".join([text, *digests, ""])


@functools.cache
def compiled(kernel: Kernel):
    """The kernel's cupy.RawKernel for the current device. Raises BuildError with NVRTC's log."""
    import cupy

    if kernel.library:
        raise BuildError(f"{kernel.name} is a {kernel.library} call, not a compiled kernel")
    try:
        module = cupy.RawModule(code=kernel_source(kernel), options=nvrtc_options(), name_expressions=[kernel.entry])
        return module.get_function(kernel.entry)
    except cupy.cuda.compiler.CompileException as exc:
        raise BuildError(f"{kernel.name}: NVRTC could not compile {kernel.source}:\n{exc.get_message()}") from exc
