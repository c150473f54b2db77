"""What each case's launch hands the driver, as one tree's own code makes it: a program of its own, run with that
tree's package first on the path (`python launch_probe.py PLAN OUT`), so that the code that builds and launches is
the tree's and not the gate's.

For each case it builds the problem with the tree's `sgemm.measuring.problem.make_problem` and calls the launch
once, with the driver's launch replaced by a recorder: nothing runs on the GPU. It records
- the program: what NVRTC was given through cupy.RawModule (source, options, name expressions), the tree's path
  written as <tree>, so that two trees holding the same text describe the same program;
- the launch: grid, block, dynamic shared memory, launch attributes (the cluster), every attribute the function
  holds when it is launched (however it was set), and every setting made on the context (cuCtxSet*) while the case
  was prepared;
- each argument: a value as its bytes; a pointer as the buffer it points into (its size, the offset, and a digest
  of its content at the launch: the inputs, their padding and the poisoned output); a TMA descriptor as the request
  it was encoded from, its address a pointer as above;
- a cuBLAS call (gemmEx) with its arguments read the same way.
Two trees whose descriptions of a case are equal launch the same program the same way on the same inputs: a change
of the measuring code cannot have moved that case's time. Anything this probe cannot read (a launch outside
cuLaunchKernelEx and cuBLAS, an unknown launch attribute, a program it did not see compiled) makes the case
unreadable, which the gate treats as changed.

This file imports nothing of the package it lives in: it must describe the tree it is pointed at (run it with
`python -P`, so that its own folder does not come first on the path).

PLAN: {"code": folder holding the sgemm package to use, "tree": folder holding
sgemm/catalogue.toml and kernels/, "device": 0, "cases": [{"label", "kernel", "shape": [m, n, k]}]}.
OUT: {"sgemm": where the package came from, "cases": {label: {"launches": [...]} | {"refused": why} |
{"missing": why} | {"unreadable": why}}}, or {"failed": why} when the tree's code cannot be used at all.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import sys
from pathlib import Path

TREE_MARK = "<tree>"
TENSOR_MAP_BYTES = 128
POINTER_BYTES = 8
# Two keys of the content digest: each a sum over the buffer's 8-byte words of a mix of the word and its place, so
# that a change of any word, or a move of one, changes the sum (a GPU reduction: the inputs at 8192 are 768 MB).
CONTENT_KEYS = (0x243F6A8885A308D3, 0x13198A2E03707344)
# cuBLAS compute types (cublas_api.h) -> bytes of the host scalars alpha and beta they read.
_CUBLAS_SCALAR_BYTES = {64: 2, 65: 2, 68: 4, 69: 4, 70: 8, 71: 8, 72: 4, 73: 4, 74: 4, 75: 4, 76: 4, 77: 4}
_GEMM_EX_POINTERS = {7: "A", 10: "B", 14: "C"}  # argument index -> operand, in cublas.gemmEx's order
_GEMM_EX_SCALARS = (6, 13)  # alpha, beta
_GEMM_EX_COMPUTE = 17


class Unreadable(Exception):
    """The case's launch cannot be described; the message says what could not be read."""


def _plain(value):
    """A driver argument as JSON: numbers, enum members by name, lists element by element."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    name = getattr(value, "name", None)
    if isinstance(name, str) and hasattr(value, "value"):
        return name
    try:
        return int(value)
    except (TypeError, ValueError):
        raise Unreadable(f"an argument of type {type(value).__name__} this probe cannot read") from None


class Recorder:
    """The driver and library calls of one case, and what was allocated while it was prepared."""

    def __init__(self, tree: str):
        self.tree = tree
        self.programs: dict[int, dict] = {}  # CUfunction address -> its program, as described
        self.tensor_maps: dict[bytes, dict] = {}  # a descriptor's 128 bytes -> the request it was encoded from
        self.start_case()

    def start_case(self) -> None:
        self.allocations: list[tuple[int, int]] = []  # (address, bytes asked for), in order
        self.context_settings: list[dict] = []
        self.launches: list[dict] = []
        self.unreadable: str | None = None

    def normal(self, text: str) -> str:
        return text.replace(self.tree, TREE_MARK)

    # Programs

    def program(self, arguments: tuple, keywords: dict, name: str) -> dict:
        code = keywords.get("code", arguments[0] if arguments else None)
        if code is None:
            path = keywords.get("path")
            code = f"binary sha256 {hashlib.sha256(Path(path).read_bytes()).hexdigest()}" if path else ""
        settings = {key: _plain(value) for key, value in sorted(keywords.items()) if key not in ("code", "path")}
        settings["options"] = [self.normal(option) for option in keywords.get("options", ())]
        return {"source_sha256": hashlib.sha256(self.normal(code).encode()).hexdigest(), "function": name,
                **settings}

    # Buffers

    def allocation_of(self, address: int) -> tuple[int, int] | None:
        for start, size in reversed(self.allocations):  # the latest: an address freed and handed out again
            if start <= address < start + max(size, 1):
                return start, size
        return None

    def pointer(self, address: int, buffers: dict[int, int], position: int) -> dict | None:
        """A device address as the buffer it points into, or None when it points into none this case allocated."""
        found = self.allocation_of(address)
        if found is None:
            return None
        start, size = found
        if start in buffers:
            return {"buffer_of_argument": buffers[start], "offset": address - start}
        buffers[start] = position
        return {"offset": address - start, "bytes": size, "content": content_digest(start, size)}

    # Launch arguments

    def arguments(self, function, parameters: int) -> list[dict]:
        from cuda.bindings import driver

        sizes = []
        while True:
            status, _, size = driver.cuFuncGetParamInfo(function, len(sizes))
            if status != driver.CUresult.CUDA_SUCCESS:
                break
            sizes.append(size)
        if not sizes:
            return []
        slots = (ctypes.c_void_p * len(sizes)).from_address(parameters)
        buffers: dict[int, int] = {}
        described = []
        for position, size in enumerate(sizes):
            raw = ctypes.string_at(slots[position], size)
            described.append(self.argument(raw, buffers, position))
        return described

    def argument(self, raw: bytes, buffers: dict[int, int], position: int) -> dict:
        if len(raw) == POINTER_BYTES and (pointer := self.pointer(int.from_bytes(raw, "little"), buffers, position)):
            return {"pointer": pointer}
        if len(raw) == TENSOR_MAP_BYTES and raw in self.tensor_maps:
            request = dict(self.tensor_maps[raw])
            address = request.pop("address")
            request["address"] = self.pointer(address, buffers, position) or {"unallocated": True}
            return {"tensor_map": request}
        return {"bytes": raw.hex()}

    def launch(self, config, function, parameters: int) -> None:
        address = int(function)
        if address not in self.programs:
            raise Unreadable("a function this probe did not see compiled through cupy.RawModule was launched")
        self.launches.append({
            "api": "cuLaunchKernelEx", "program": self.programs[address],
            "grid": [config.gridDimX, config.gridDimY, config.gridDimZ],
            "block": [config.blockDimX, config.blockDimY, config.blockDimZ],
            "shared_memory": config.sharedMemBytes,
            "attributes": [launch_attribute(attribute) for attribute in list(config.attrs or [])[:config.numAttrs]],
            "function_attributes": function_attributes(function),
            "context_settings": list(self.context_settings),
            "arguments": self.arguments(function, parameters)})

    def library_call(self, name: str, arguments: tuple) -> None:
        if name != "gemmEx":
            self.context_settings.append({"cublas": name, "arguments": [_plain(a) for a in arguments[1:]]})
            return
        buffers: dict[int, int] = {}
        scalar_bytes = _CUBLAS_SCALAR_BYTES.get(int(arguments[_GEMM_EX_COMPUTE]))
        if scalar_bytes is None:
            raise Unreadable(f"cuBLAS compute type {arguments[_GEMM_EX_COMPUTE]} is not one this probe reads")
        described = []
        for position, value in enumerate(arguments[1:], 1):  # the handle differs from process to process
            if position in _GEMM_EX_POINTERS:
                pointer = self.pointer(int(value), buffers, position)
                if pointer is None:
                    raise Unreadable(f"cuBLAS's operand {_GEMM_EX_POINTERS[position]} is no buffer of the case")
                described.append({"pointer": pointer})
            elif position in _GEMM_EX_SCALARS:
                described.append({"bytes": ctypes.string_at(int(value), scalar_bytes).hex()})
            else:
                described.append({"value": _plain(value)})
        self.launches.append({"api": "cublas.gemmEx", "context_settings": list(self.context_settings),
                              "arguments": described})


def function_attributes(function) -> dict[str, int]:
    """Every attribute the function holds now: what the code set on it (shared memory, carveout, cluster policy),
    by whatever path, and what its program fixes."""
    from cuda.bindings import driver

    held = {}
    for attribute in driver.CUfunction_attribute:
        if attribute.name == "CU_FUNC_ATTRIBUTE_MAX":
            continue
        status, value = driver.cuFuncGetAttribute(attribute, function)
        if status == driver.CUresult.CUDA_SUCCESS:
            held[attribute.name] = value
    return held


def launch_attribute(attribute) -> dict:
    from cuda.bindings import driver

    kind = driver.CUlaunchAttributeID
    if attribute.id == kind.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        cluster = attribute.value.clusterDim
        return {"cluster": [cluster.x, cluster.y, cluster.z]}
    raise Unreadable(f"launch attribute {_plain(attribute.id)} is not one this probe reads")


_MIX = None


def content_digest(address: int, size: int) -> str:
    """A digest of `size` bytes of device memory at `address`, as they are now."""
    import cupy

    global _MIX
    if _MIX is None:
        _MIX = cupy.ElementwiseKernel(
            "uint64 word, uint64 key", "uint64 mixed",
            # A word mixed with its place: equal words at other places mix to unrelated values.
            """unsigned long long z = word ^ (key + (unsigned long long)i * 0x9E3779B97F4A7C15ull);
               z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
               z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
               mixed = z ^ (z >> 31);""", "sgemm_launch_probe_mix")
    cupy.cuda.Device().synchronize()  # what the case wrote before its launch, all of it
    memory = cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(address, size, None), 0)
    words = size // POINTER_BYTES
    digest = hashlib.sha256(str(size).encode())
    if words:
        view = cupy.ndarray((words,), dtype=cupy.uint64, memptr=memory)
        for key in CONTENT_KEYS:
            digest.update(int(_MIX(view, cupy.uint64(key)).sum()).to_bytes(8, "little"))
    if size % POINTER_BYTES:
        tail = cupy.ndarray((size % POINTER_BYTES,), dtype=cupy.uint8, memptr=memory + words * POINTER_BYTES)
        digest.update(tail.get().tobytes())
    return digest.hexdigest()[:32]


# Interception: the calls the tree's code makes, seen before they reach CuPy, the driver or cuBLAS.


class _SeenModule:
    """A cupy.RawModule whose functions are remembered with the program they come from."""

    def __init__(self, module, recorder: Recorder, arguments: tuple, keywords: dict):
        self._module, self._recorder, self._arguments, self._keywords = module, recorder, arguments, keywords

    def get_function(self, name: str):
        function = self._module.get_function(name)
        self._recorder.programs[int(function.kernel.ptr)] = self._recorder.program(self._arguments, self._keywords,
                                                                                   name)
        return function

    def __getattr__(self, name: str):
        return getattr(self._module, name)


def intercept(recorder: Recorder) -> None:
    """Route the tree's compiles, launches, function and context settings and cuBLAS calls through `recorder`.
    Only attribute lookups at call time are seen, which is how the package calls them."""
    import cupy
    from cuda.bindings import driver
    from cupy_backends.cuda.libs import cublas

    raw_module = cupy.RawModule

    def seen_module(*arguments, **keywords):
        return _SeenModule(raw_module(*arguments, **keywords), recorder, arguments, keywords)

    cupy.RawModule = seen_module

    def launch(config, function, parameters, extra):
        recorder.launch(config, function, int(parameters))
        return (driver.CUresult.CUDA_SUCCESS,)  # recorded, not run

    driver.cuLaunchKernelEx = launch
    for name in ("cuLaunchKernel", "cuLaunchCooperativeKernel"):
        setattr(driver, name, _refused(f"{name} (not cuLaunchKernelEx)"))

    encode = driver.cuTensorMapEncodeTiled

    def encode_tiled(data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, promotion,
                     fill):
        result = encode(data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle,
                        promotion, fill)
        if result[0] == driver.CUresult.CUDA_SUCCESS:
            recorder.tensor_maps[ctypes.string_at(result[1].getPtr(), TENSOR_MAP_BYTES)] = {
                "data_type": _plain(data_type), "rank": _plain(rank), "address": int(address), "dims": _plain(dims),
                "strides": _plain(strides), "box": _plain(box), "element_strides": _plain(element_strides),
                "interleave": _plain(interleave), "swizzle": _plain(swizzle), "promotion": _plain(promotion),
                "fill": _plain(fill)}
        return result

    driver.cuTensorMapEncodeTiled = encode_tiled
    for name in [name for name in dir(driver) if name.startswith("cuCtxSet")]:
        setattr(driver, name, _context_setting(recorder, name, getattr(driver, name)))
    for name in [name for name in dir(cublas) if name == "gemmEx" or (name.startswith("set") and name != "setStream")]:
        setattr(cublas, name, _library(recorder, name))


def _refused(what: str):
    def refused(*arguments):
        raise Unreadable(f"a launch through {what}")

    return refused


def _context_setting(recorder: Recorder, name: str, call):
    def setting(*arguments):
        recorder.context_settings.append({"call": name, "arguments": [_plain(a) for a in arguments]})
        return call(*arguments)

    return setting


def _library(recorder: Recorder, name: str):
    def library_call(*arguments):
        recorder.library_call(name, arguments)

    return library_call


def allocation_hook(recorder: Recorder):
    """A cupy.cuda.MemoryHook that hands `recorder` every allocation from CuPy's memory pool."""
    import cupy

    class AllocationHook(cupy.cuda.MemoryHook):
        name = "sgemm-launch-probe"

        def malloc_postprocess(self, **facts):
            recorder.allocations.append((int(facts["mem_ptr"]), int(facts["size"])))

    return AllocationHook()


# The probe


def describe(case: dict, kernels: dict, make_problem, refused_by: tuple, recorder: Recorder) -> dict:
    name, (m, n, k) = case["kernel"], case["shape"]
    if name not in kernels:
        return {"missing": f"the tree has no kernel {name}"}
    recorder.start_case()
    with allocation_hook(recorder):
        try:
            problem = make_problem(kernels[name], m, n, k)
        except refused_by as exc:
            return {"refused": str(exc)}
        problem.launch()
    if not recorder.launches:
        raise Unreadable("no launch reached cuLaunchKernelEx or cuBLAS")
    return {"launches": recorder.launches}


def compile_ahead(kernels: list, device: int) -> None:
    """The tree's own compile of every kernel at once, where it has one: the cases then find them built."""
    try:
        from sgemm.measuring.ab import compile_ahead as tree_compile_ahead

        tree_compile_ahead(kernels, device)
    except Exception:  # noqa: BLE001 - only a head start: each case builds what it needs and says what failed
        pass


def probe(plan: dict) -> dict:
    code, tree = Path(plan["code"]).resolve(), Path(plan["tree"]).resolve()
    sys.path.insert(0, str(code))
    try:
        import cupy

        import sgemm
        from sgemm import catalogue
        from sgemm.measuring import problem
    except ImportError as exc:
        return {"failed": f"the tree's code cannot be imported: {exc}"}
    where = Path(sgemm.__file__).resolve().parent
    if not where.is_relative_to(code):
        return {"failed": f"sgemm came from {where}, not from {code}"}
    recorder = Recorder(str(tree))
    device = plan.get("device", 0)
    cupy.cuda.Device(device).use()
    intercept(recorder)
    try:
        kernels = catalogue.load_catalogue(tree / "sgemm" / "catalogue.toml", tree / "kernels")
    except Exception as exc:  # noqa: BLE001 - any failure of the tree's loader is its answer
        return {"failed": f"the tree's catalogue cannot be loaded: {type(exc).__name__}: {exc}"}
    compile_ahead([kernels[case["kernel"]] for case in plan["cases"] if case["kernel"] in kernels
                   and not kernels[case["kernel"]].library], device)
    refused_by = tuple(getattr(problem, name) for name in ("UnsupportedShape",) if hasattr(problem, name))
    cases = {}
    for case in plan["cases"]:
        try:
            cases[case["label"]] = describe(case, kernels, problem.make_problem, refused_by, recorder)
        except Unreadable as exc:
            cases[case["label"]] = {"unreadable": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a case the tree's code cannot prepare is one this probe cannot read
            text = (str(exc).strip().splitlines() or [""])[0]
            cases[case["label"]] = {"unreadable": f"{type(exc).__name__}: {text}"[:300]}
        cupy.get_default_memory_pool().free_all_blocks()
    return {"sgemm": str(where), "cases": cases}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python launch_probe.py PLAN.json OUT.json", file=sys.stderr)
        return 2
    found = probe(json.loads(Path(argv[0]).read_text()))
    Path(argv[1]).write_text(json.dumps(found))
    return 0 if "cases" in found else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
