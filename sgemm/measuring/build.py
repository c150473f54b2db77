"""Compile catalogue kernels at run time with NVRTC through cupy.RawModule, once per kernel and process."""

from __future__ import annotations

import functools
import hashlib
import os
import posixpath
import re
from pathlib import Path
from typing import Callable

from ..catalogue import Kernel

# Both forms reach kernels/: quotes through the including file's folder, angle brackets through -I<kernel dir>.
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"]+)"|<([^>]+)>)', re.MULTILINE)


def kernel_files(source: str, read: Callable[[str], str | None]) -> list[str]:
    """`source` and every file of the kernel directory it includes, transitively, in the order first reached.

    Names are relative to the kernel directory. `read(name)` gives a file's text, or None when the kernel directory
    has no such file (a toolkit header such as <cuda_fp16.h>, which the walk leaves out). The build and the gate's
    change selection both walk with this, from the filesystem and from git, so they agree on what a kernel is made of.
    """
    found: dict[str, None] = {}  # insertion-ordered set: the digests below must come out in a stable order
    pending = [source]
    while pending:
        name = pending.pop(0)
        text = None if name in found else read(name)
        if text is None:
            continue
        found[name] = None
        pending.extend(_resolve(name, quoted, angled, read) for quoted, angled in _INCLUDE.findall(text))
    return list(found)


def _resolve(includer: str, quoted: str, angled: str, read: Callable[[str], str | None]) -> str:
    """The kernel-directory name an include line refers to, searched the way the compiler searches."""
    if quoted:
        beside = posixpath.normpath(posixpath.join(posixpath.dirname(includer), quoted))
        if beside != quoted and read(beside) is not None:
            return beside
    return posixpath.normpath(quoted or angled)


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


def nvrtc_options(kernel_dir: Path) -> tuple[str, ...]:
    """Options common to every compile, on the GPU (CuPy) and off it (resources)."""
    return ("--std=c++17", f"-I{kernel_dir}", *(f"-I{d}" for d in toolkit_include_dirs()))


def kernel_source(kernel: Kernel) -> str:
    """The kernel's source, from its tree, with a digest of each header it includes, directly or through another
    header, appended.

    CuPy caches compiled modules on disk keyed by source text and options only; without the digests an edited
    header would be served from the cache as the old binary.
    """
    kernel_dir = kernel.kernel_dir
    text = (kernel_dir / kernel.source).read_text()
    headers = kernel_files(kernel.source, functools.partial(_read_in, kernel_dir))[1:]
    digests = [f"// {header}: sha256 {hashlib.sha256((kernel_dir / header).read_bytes()).hexdigest()}"
               for header in headers]
    return "\n".join([text, *digests, ""])


def _read_in(kernel_dir: Path, name: str) -> str | None:
    path = kernel_dir / name
    return path.read_text() if path.is_file() else None


def for_this_gpu(kernel: Kernel) -> Kernel:
    """The kernel as built for the current device: its entry tuned for the device's architecture, where the catalogue
    names one (Kernel.on). The device is asked only of a kernel that has tuned entries."""
    if not kernel.tuned_entries:
        return kernel
    import cupy

    return kernel.on(int(cupy.cuda.Device().compute_capability))


def compiled(kernel: Kernel):
    """The kernel's cupy.RawKernel for the current device, built from its entry for the device's architecture (CuPy
    keeps the binary in its cache on disk). Raises BuildError with NVRTC's log."""
    return _compiled(for_this_gpu(kernel))


@functools.cache
def _compiled(kernel: Kernel):
    if kernel.library:
        raise BuildError(f"{kernel.name} is a {kernel.library} call, not a compiled kernel")
    import cupy

    # An architecture-specific target is named here; CuPy adds the plain one of the GPU (e.g. -arch=sm_90) after it,
    # and NVRTC keeps the specific one (the same cubin either way round).
    target = (f"-arch={kernel.target}",) if kernel.target else ()
    try:
        module = cupy.RawModule(code=kernel_source(kernel), options=(*nvrtc_options(kernel.kernel_dir), *target),
                                name_expressions=[kernel.entry])
        return module.get_function(kernel.entry)
    except cupy.cuda.compiler.CompileException as exc:
        raise BuildError(f"{kernel.name}: NVRTC could not compile {kernel.source}:\n{exc.get_message()}") from exc
