"""The launch probe (sgemm.gate.launch_probe): its reading of arguments, programs and buffers on the CPU, and on
a GPU the whole probe over this project's trees: one tree described twice alike, a changed launch found where it
changed and nowhere else."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.gate import launch_probe

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def recorder(monkeypatch):
    monkeypatch.setattr(launch_probe, "content_digest", lambda address, size: f"content@{address}+{size}")
    recorder = launch_probe.Recorder("/x/tree")
    recorder.allocations = [(0x7F0000000000, 4096), (0x7F0000002000, 1024)]
    return recorder


def test_a_pointer_is_its_buffer_and_offset_and_a_second_pointer_into_it_says_so(recorder):
    buffers = {}
    first = recorder.argument((0x7F0000000010).to_bytes(8, "little"), buffers, 4)
    again = recorder.argument((0x7F0000000020).to_bytes(8, "little"), buffers, 6)
    value = recorder.argument((3).to_bytes(8, "little"), buffers, 7)
    assert first == {"pointer": {"offset": 16, "bytes": 4096, "content": f"content@{0x7F0000000000}+4096"}}
    assert again == {"pointer": {"buffer_of_argument": 4, "offset": 32}}
    assert value == {"bytes": "0300000000000000"}


def test_a_tensor_map_is_the_request_it_was_encoded_from_its_address_a_buffer(recorder):
    raw = bytes(range(128))
    recorder.tensor_maps[raw] = {"data_type": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "address": 0x7F0000002000,
                                 "box": [64, 128]}
    described = recorder.argument(raw, {}, 11)
    assert described == {"tensor_map": {"data_type": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "box": [64, 128],
                                        "address": {"offset": 0, "bytes": 1024,
                                                    "content": f"content@{0x7F0000002000}+1024"}}}


def test_the_latest_allocation_holding_an_address_is_its_buffer(recorder):
    recorder.allocations.append((0x7F0000000000, 64))  # freed and handed out again, smaller
    assert recorder.allocation_of(0x7F0000000010) == (0x7F0000000000, 64)
    assert recorder.allocation_of(0x7F0000000100) == (0x7F0000000000, 4096)
    assert recorder.allocation_of(0x10) is None


def test_a_program_is_its_text_and_options_with_the_trees_path_written_alike():
    one, other = launch_probe.Recorder("/a/base"), launch_probe.Recorder("/b/head")
    source = "// kernels/common.cuh: sha256 00\n__global__ void k() {}\n"
    made = [recorder.program((), {"code": source, "options": ("--std=c++17", f"-I{recorder.tree}/kernels"),
                                  "name_expressions": ["k"]}, "k") for recorder in (one, other)]
    assert made[0] == made[1] and made[0]["options"] == ["--std=c++17", "-I<tree>/kernels"]
    edited = one.program((), {"code": source + "// x\n", "options": ()}, "k")
    assert edited["source_sha256"] != made[0]["source_sha256"]


def test_an_argument_the_probe_cannot_read_makes_the_case_unreadable():
    with pytest.raises(launch_probe.Unreadable, match="of type object"):
        launch_probe._plain(object())
    assert launch_probe._plain([1, 2.5, "x"]) == [1, 2.5, "x"]


def test_the_probe_imports_nothing_of_the_package_it_lives_in():
    import ast

    tree = ast.parse((ROOT / "sgemm" / "gate" / "launch_probe.py").read_text())
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    at_import = [alias.name for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                 for alias in node.names] + [node.module for node in tree.body if isinstance(node, ast.ImportFrom)]
    assert not [name for name in at_import if name and name.split(".")[0] == "sgemm"]


# --- On the GPU: the real probe over this project's code ---------------------------------------------------------

CASES = [{"label": f"{name} {size}", "kernel": name, "shape": [size, size, size]}
         for name in ("fp32/naive", "fp32/warptile", "fp16/mma_buffered", "fp16/cublas")
         for size in (1000, 1024)]
HOPPER = [{"label": "fp16/wgmma_grouped_tma_store 1024", "kernel": "fp16/wgmma_grouped_tma_store",
           "shape": [1024, 1024, 1024]}]


def code_copy(where: Path, edit=None) -> Path:
    for folder in ("sgemm", "kernels"):
        shutil.copytree(ROOT / folder, where / folder, ignore=shutil.ignore_patterns("__pycache__"))
    if edit:
        path, old, new = edit
        text = (where / path).read_text()
        assert text.count(old) == 1
        (where / path).write_text(text.replace(old, new))
    return where


def probe(code: Path, tmp_path: Path, name: str, cases: list[dict]) -> dict:
    plan, out = tmp_path / f"{name}.plan.json", tmp_path / f"{name}.json"
    plan.write_text(json.dumps({"code": str(code), "tree": str(code), "device": 0, "cases": cases}))
    done = subprocess.run([sys.executable, "-P", str(ROOT / "sgemm" / "gate" / "launch_probe.py"), str(plan),
                           str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(out.read_text())
    assert Path(found["sgemm"]) == code / "sgemm"
    return found["cases"]


@pytest.mark.gpu
def test_one_tree_probed_twice_describes_every_launch_alike(tmp_path):
    import cupy

    cases = CASES + (HOPPER if cupy.cuda.Device().compute_capability == "90" else [])
    first = probe(code_copy(tmp_path / "one"), tmp_path, "one", cases)
    second = probe(code_copy(tmp_path / "two"), tmp_path, "two", cases)
    assert all("launches" in first[case["label"]] for case in cases), first
    assert first == second
    naive = first["fp32/naive 1024"]["launches"][0]
    assert naive["grid"][2] == 1 and naive["program"]["options"][1] == "-I<tree>/kernels"
    pointers = [argument["pointer"] for argument in naive["arguments"] if "pointer" in argument]
    assert len(pointers) == 3 and pointers[2]["bytes"] == 1024 * 1024 * 4  # A, B, C; C is M x N floats
    assert first["fp16/cublas 1024"]["launches"][0]["api"] == "cublas.gemmEx"
    assert first["fp32/naive 1000"] != first["fp32/naive 1024"]


@pytest.mark.gpu
def test_a_grid_changed_for_one_kernel_changes_its_launches_alone(tmp_path):
    base = probe(code_copy(tmp_path / "base"), tmp_path, "base", CASES)
    halved = ("sgemm/measuring/launch.py", "    config = _config(geometry, kernel.grid(geometry, m, n, resident))\n",
              "    config = _config(geometry, kernel.grid(geometry, m, n, resident))\n"
              "    if kernel.name == 'fp32/warptile':\n"
              "        config.gridDimX = (config.gridDimX + 1) // 2\n")
    head = probe(code_copy(tmp_path / "head", halved), tmp_path, "head", CASES)
    changed = {label for label in base if base[label] != head[label]}
    assert changed == {"fp32/warptile 1000", "fp32/warptile 1024"}


@pytest.mark.gpu
def test_other_inputs_change_every_launch(tmp_path):
    base = probe(code_copy(tmp_path / "base"), tmp_path, "base", CASES)
    seeded = ("sgemm/measuring/problem.py", "DEFAULT_SEED = 2024", "DEFAULT_SEED = 2025")
    head = probe(code_copy(tmp_path / "head", seeded), tmp_path, "head", CASES)
    assert all(base[label] != head[label] for label in base)
