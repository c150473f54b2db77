"""Shards of one commit's cases over a box's identical GPUs: the assignment, and the join of the shards' results
into the run one GPU would have recorded (real asv runs of a synthetic suite), or its refusal."""

import json
import math
import random
import shutil
from types import SimpleNamespace

import pytest
from conftest import GpuResultsTree, write_asv_run

from sgemm.history import shards
from sgemm.history.shards import ShardError, assign, identical_gpus, join, recorded_costs, write_joined
from sgemm.results.asvsuite import GEMM, TIME, SuiteCase


def test_a_box_of_one_model_is_sharded_over_all_its_gpus():
    assert identical_gpus(["NVIDIA H200"] * 4) == [0, 1, 2, 3]


def test_a_box_of_mixed_models_is_refused_naming_them():
    with pytest.raises(ShardError, match=r"not one model \(GPU 0: NVIDIA H200, GPU 1: NVIDIA H100 80GB HBM3\)"):
        identical_gpus(["NVIDIA H200", "NVIDIA H100 80GB HBM3"])


CASES = [SuiteCase.square(f"fp32/k{i}", size) for i in range(12) for size in (1024, 4096)]


def costs_of(seed=1):
    rng = random.Random(seed)
    return {case: rng.choice([3.0, 5.0, 9.0]) * (8 if case.shape[0] == 4096 else 1) for case in CASES}


def test_every_case_goes_to_one_gpu_and_the_loads_are_balanced():
    costs = costs_of()
    sharded = assign(costs, [0, 1])
    assert sorted(case for shard in sharded for case in shard.cases) == sorted(CASES)
    loads = [shard.seconds for shard in sharded]
    assert abs(loads[0] - loads[1]) <= max(costs.values())
    assert sum(loads) == pytest.approx(sum(costs.values()))


def test_the_same_cases_and_costs_give_the_same_shards_in_any_order():
    costs = costs_of()
    shuffled = list(costs.items())
    random.Random(7).shuffle(shuffled)
    assert assign(dict(shuffled), [0, 1]) == assign(costs, [0, 1])


def test_noise_in_the_recorded_costs_does_not_move_a_case():
    costs = {case: cost * 1.0 for case, cost in costs_of().items()}
    noisy = {case: cost * (1 + random.Random(hash(case.label)).uniform(-0.003, 0.003)) for case, cost in costs.items()}
    assert [s.cases for s in assign(noisy, [0, 1])] == [s.cases for s in assign(costs, [0, 1])]


def test_the_first_gpu_starts_with_the_work_it_has_beside_its_cases():
    # The GPU's facts and the resource compile run with the first shard: it takes fewer cases, and the loads, that
    # work included, stay balanced. Without the start the first GPU ends last by about that much.
    costs = costs_of()
    start = 200.0  # two significant digits, as the loads are counted
    sharded = assign(costs, [0, 1], first_gpu_start_s=start)
    assert len(sharded[0].cases) < len(sharded[1].cases)
    assert abs(sharded[0].seconds - sharded[1].seconds) <= max(costs.values())
    assert sum(shard.seconds for shard in sharded) == pytest.approx(sum(costs.values()) + start)
    assert sorted(case for shard in sharded for case in shard.cases) == sorted(CASES)


def test_what_the_suites_that_are_no_case_took_is_read_from_the_run():
    durations = {"<setup_cache bench_gemm:51>": 0.8, "bench_gemm.Gemm.track_card": 253.0,
                 "<setup_cache bench_resources:18>": 6.5, "bench_resources.Resources.track_registers": 2.5,
                 "bench_gpu.Gpu.track_sm_count": 0.25}
    run = shards.asvsuite.RunReader(SimpleNamespace(duration=durations))
    assert shards.non_case_seconds(run) == pytest.approx(9.25)
    assert shards.non_case_seconds(None) == shards.NON_CASE_PRIOR_S


def test_the_first_gpu_holds_a_case_however_long_its_other_work():
    few = dict(list(costs_of().items())[:3])
    sharded = assign(few, [0, 1, 2], first_gpu_start_s=10_000.0)
    assert all(shard.cases for shard in sharded)
    [first] = sharded[0].cases  # the longest case, then its other work: no second case
    assert few[first] == max(few.values()) and sharded[0].seconds == 10_000.0 + few[first]


def test_costs_come_from_the_recorded_samples_and_the_median_stands_in_for_the_rest(tmp_path):
    timed, untimed = SuiteCase.square("fp32/naive", 64), SuiteCase.square("fp32/float4", 64)
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [0.5] * 10}})
    [run] = shards.asvsuite.runs(tmp_path, "box")
    costs = recorded_costs(run, [timed, untimed])
    assert costs == {timed: 5.0 + shards.CASE_OVERHEAD_S, untimed: 5.0 + shards.CASE_OVERHEAD_S}
    assert recorded_costs(None, [timed]) == {timed: shards.CASE_OVERHEAD_S}


# --- Joining: real asv runs of one commit, whole and in two shards -------------------------------------------------

H200 = GpuResultsTree.H200
SHARD_A = r"Gemm\.track_.*\('(cublas|naive)', (1024|2048)"
SHARD_B = r"Gemm\.track_.*\('float4'|Gemm\.track_.*, 4096, |bench_gpu"


@pytest.fixture(scope="module")
def sharded(two_gpu_results, tmp_path_factory):
    """The H200's whole run (in two_gpu_results), and the same commit run again as two complementary shards."""
    root = tmp_path_factory.mktemp("shards")
    files = []
    for name, bench in (("a", SHARD_A), ("b", SHARD_B)):
        tree = two_gpu_results.copy(root / name)
        shutil.rmtree(tree.results)
        tree.run(H200, bench)
        [found] = [p for p in (tree.results / H200.machine).glob("*.json") if p.name != "machine.json"]
        files.append(found)
    [whole] = [p for p in (two_gpu_results.results / H200.machine).glob("*.json") if p.name != "machine.json"]
    return whole, files


def figures(data: dict) -> dict:
    """Each benchmark's per-combination columns; what a run measured, without when it ran."""
    out = {}
    for name in data["results"]:
        row = shards._row(data, name)
        out[name] = {column: json.dumps(row[column]) for column in ("result", "params", "version", "samples")}
    return out


def test_complementary_shards_join_into_the_run_one_gpu_records(sharded, tmp_path):
    whole, files = sharded
    single = json.loads(whole.read_text())
    parts = [json.loads(f.read_text()) for f in files]
    assert all(figures(part) != figures(single) for part in parts)  # each shard alone is not the run
    target = tmp_path / H200.machine / whole.name
    write_joined(files, target)
    joined = json.loads(target.read_text())
    assert figures(joined) == figures(single)
    assert {k: v for k, v in joined.items() if k not in ("results", "date", "durations")} == \
        {k: v for k, v in single.items() if k not in ("results", "date", "durations")}


def test_the_join_reads_back_through_asv(sharded, tmp_path):
    from asv.results import Results

    whole, files = sharded
    target = tmp_path / "joined.json"
    write_joined(files, target)
    name = "bench_gemm.Gemm.track_tflops"
    read = [Results.load(str(path)) for path in (target, whole)]
    values = [run.get_result_value(name, run.get_result_params(name)) for run in read]
    assert json.dumps(values[0]) == json.dumps(values[1])
    assert sum(not math.isnan(v) for v in values[0]) == 12  # the H200 ran every fp32 case and fp16 cuBLAS


def test_shards_that_measured_one_case_differently_are_refused_naming_both(tmp_path):
    for name, samples in (("a", [1.0, 1.1]), ("b", [2.0, 2.1])):
        write_asv_run(tmp_path / name, "box", "c" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): samples}})
    files = [next((tmp_path / name / "box").glob("c*.json")) for name in ("a", "b")]
    with pytest.raises(ShardError, match=r"bench_gemm\.Gemm\.track_time combination 0: .*/a/box/.* and "
                                         r".*/b/box/.* both measured it, differently"):
        join(files)


def test_the_same_figures_from_two_shards_are_no_conflict(tmp_path):
    for name in ("a", "b"):
        write_asv_run(tmp_path / name, "box", "c" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}})
    files = [next((tmp_path / name / "box").glob("c*.json")) for name in ("a", "b")]
    assert shards._row(join(files), "bench_gemm.Gemm.track_time")["samples"] == [[1.0]]


def test_runs_of_different_commits_are_no_shards_of_one_run(tmp_path):
    write_asv_run(tmp_path / "a", "box", "c" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}})
    write_asv_run(tmp_path / "b", "box", "d" * 40, 1_000, {(GEMM, TIME): {("float4", 64, "fp32"): [1.0]}})
    files = [next((tmp_path / name / "box").glob("[cd]*.json")) for name in ("a", "b")]
    with pytest.raises(ShardError, match="differ in commit_hash: not shards of one run"):
        join(files)


def test_a_file_that_holds_no_run_is_refused(tmp_path):
    write_asv_run(tmp_path, "box", "c" * 40, 1_000, {(GEMM, TIME): {("naive", 64, "fp32"): [1.0]}})
    with pytest.raises(ShardError, match="machine.json is not an asv result file: it holds no results"):
        join([next((tmp_path / "box").glob("c*.json")), tmp_path / "box" / "machine.json"])
