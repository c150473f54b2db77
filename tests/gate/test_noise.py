"""Between-round noise learned from asv results: the pooled spread of round medians within runs (a known answer on
results written through asv's API), the file's round trip, and files that must not be trusted."""

import json
import math
import subprocess
import sys

import pytest
from conftest import write_asv_run

from sgemm.gate import noise
from sgemm.results.asvsuite import GEMM, ROUND_TIME, SHAPES, TIME
from sgemm.rounds.evidence import Noise

NAIVE, FLOAT4, SWEEP = ("naive", 64, "fp32"), ("float4", 64, "fp32"), ("fp32/naive", "64x32x16")


@pytest.fixture
def history(tmp_path):
    """Two runs of one machine: round medians whose logs are known exactly."""
    e = math.exp
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {
        (GEMM, ROUND_TIME): {NAIVE: [e(0.0), e(0.01), e(-0.01)], FLOAT4: [1.0]},  # float4: one round, no spread
        (GEMM, TIME): {NAIVE: [1.0] * 50},  # the samples of every round: not the between-round noise
        (SHAPES, ROUND_TIME): {SWEEP: [e(0.0), e(0.04)]},
    })
    write_asv_run(tmp_path, "box", "b" * 40, 2_000, {(GEMM, ROUND_TIME): {NAIVE: [e(0.02), e(0.0)], FLOAT4: None}})
    return tmp_path


def test_the_noise_is_the_spread_of_round_medians_pooled_over_runs(history):
    learned, runs = noise.learn(history, "box")
    assert runs == 2
    assert set(learned) == {"fp32/naive 64x64x64", "fp32/naive 64x32x16 (shape sweep)"}
    # squares about each run's own mean: 0.0002 (three rounds) + 0.0002 (two rounds), on 2 + 1 degrees of freedom
    naive = learned["fp32/naive 64x64x64"]
    assert naive.df == 3 and naive.sd == pytest.approx(math.sqrt(0.0004 / 3))
    sweep = learned["fp32/naive 64x32x16 (shape sweep)"]
    assert sweep.df == 1 and sweep.sd == pytest.approx(math.sqrt(2 * 0.02 ** 2))


def test_a_run_that_moved_as_a_whole_adds_no_noise(tmp_path):
    """The level of each run is its own: a step between runs (a new commit, another card) is no round-to-round
    noise."""
    e = math.exp
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {(GEMM, ROUND_TIME): {NAIVE: [e(0.0), e(0.01)]}})
    write_asv_run(tmp_path, "box", "b" * 40, 2_000, {(GEMM, ROUND_TIME): {NAIVE: [e(0.1), e(0.11)]}})
    learned, _ = noise.learn(tmp_path, "box")
    assert learned["fp32/naive 64x64x64"].df == 2
    assert learned["fp32/naive 64x64x64"].sd == pytest.approx(math.sqrt(2 * 0.01 ** 2 / 2 / 2))


def test_the_file_round_trips_for_its_machine(tmp_path, history):
    learned, runs = noise.learn(history, "box")
    path = noise.default_path(tmp_path / "repo", "box")
    noise.write(path, "box", learned, runs)
    data = json.loads(path.read_text())
    assert data["machine"] == "box" and data["runs"] == 2
    assert noise.read(path, "box") == ({"unpaired": {label: Noise(round(n.sd, 6), n.df)
                                                     for label, n in learned.items()}, "paired": {}}, None)


def test_another_machines_noise_is_refused(tmp_path):
    path = tmp_path / "noise.json"
    noise.write(path, "nvidia-h200", {"fp32/naive 64x64x64": Noise(0.001, 4)}, 1)
    with pytest.raises(noise.NoiseFileError, match="noise of machine 'nvidia-h200', not of 'nvidia-h100'"):
        noise.read(path, "nvidia-h100")


@pytest.mark.parametrize("content", ["not json", "[]", '{"machine": "box", "cases": []}'])
def test_a_malformed_file_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "noise.json"
    path.write_text(content)
    with pytest.raises(noise.NoiseFileError, match="noise.json is not a noise file"):
        noise.read(path, "box")


@pytest.mark.parametrize("entry, message", [
    ({"sd": 0.0, "df": 6}, "'x': a noise entry's sd must be a positive number, not 0.0"),  # every change certain
    ({"sd": -0.001, "df": 6}, "sd must be a positive number, not -0.001"),
    ({"sd": "wide", "df": 6}, "'x': could not convert string to float"),
    ({"sd": 0.001, "df": 0}, "degrees of freedom must be a whole number of at least 1, not 0"),
    ({"sd": 0.001, "df": 2.5}, "degrees of freedom must be a whole number of at least 1, not 2.5"),
    ({"df": 3}, "paired entry 'x' lacks its sd or df"),
    ({"sd": 0.001}, "paired entry 'x' lacks its sd or df"),
])
def test_an_entry_of_no_spread_or_no_degrees_of_freedom_is_refused_naming_it(tmp_path, entry, message):
    path = tmp_path / "noise.json"
    path.write_text(json.dumps({"machine": "box", "paired": {"x": entry, "y": {"sd": 0.001, "df": 4}}}))
    with pytest.raises(noise.NoiseFileError, match=f"{path}: paired entry .*" if "entry 'x'" not in message else
                       "noise.json: "):
        noise.read(path, "box")
    with pytest.raises(noise.NoiseFileError) as refused:
        noise.read(path, "box")
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_rounds_that_all_read_the_same_teach_no_entry(tmp_path):
    """A case whose rounds agree exactly has no spread to learn: an entry of sd 0 would be refused by every gate."""
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {(GEMM, ROUND_TIME): {NAIVE: [1.0, 1.0], FLOAT4: [1.0, 1.1]}})
    learned, _ = noise.learn(tmp_path, "box")
    assert set(learned) == {"fp32/float4 64x64x64"}


def sgemm(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sgemm", "noise", *args], cwd=cwd, capture_output=True, text=True)


def test_the_command_writes_the_machines_file_and_says_what_it_learned(tmp_path, history):
    done = sgemm("--results", str(history), "--machine", "box", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'noise' / 'box.json'}: unpaired, 2 cases from 2 runs" in done.stdout
    assert noise.read(tmp_path / "noise" / "box.json", "box")


def test_the_command_refuses_results_it_cannot_learn_from(tmp_path):
    missing = sgemm("--results", str(tmp_path), "--machine", "box", cwd=tmp_path)
    assert missing.returncode == 2 and "has no results of machine 'box'" in missing.stderr
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {(GEMM, ROUND_TIME): {NAIVE: [1.0]}})
    one_round = sgemm("--results", str(tmp_path), "--machine", "box", cwd=tmp_path)
    assert one_round.returncode == 2 and "two rounds or more" in one_round.stderr
    nothing = sgemm("--machine", "box", cwd=tmp_path)
    assert nothing.returncode == 2 and "give asv results (--results) or paired gates' work folders" in nothing.stderr
    assert not (tmp_path / "noise").exists()


ROUND = {"max_s": 12.0, "target_half_width": 0.002}


def write_paired_gate(folder, ratios_by_round, settings=ROUND):
    rounds = folder / "paired" / "rounds"
    rounds.mkdir(parents=True)
    for number, ratios in enumerate(ratios_by_round, 1):
        (rounds / f"round-{number}.plan.json").write_text(json.dumps({"settings": settings, "cases": []}))
        (rounds / f"round-{number}.jsonl").write_text("".join(
            json.dumps({"label": label, "ratio": ratio}) + "\n" for label, ratio in ratios.items())
            + json.dumps({"label": "fp32/x 64x64x64", "failed": {"side": "head", "kind": "wrong result"}}) + "\n")


def test_paired_noise_is_the_spread_of_a_gates_round_ratios_about_their_own_mean(tmp_path):
    e = math.exp
    label = "fp16/k 8192x8192x8192"
    write_paired_gate(tmp_path / "a", [{label: e(0.005)}, {label: e(0.006)}, {label: e(0.004)}])  # a real change
    write_paired_gate(tmp_path / "b", [{label: e(0.0)}, {label: e(0.002)}])  # an A/A gate
    learned, gates, settings = noise.learn_paired([tmp_path / "a", tmp_path / "b"])
    assert gates == 2 and settings == ROUND
    # squares about each gate's own mean: 2e-6 + 2e-6, on 2 + 1 degrees of freedom; the failed case adds nothing
    assert list(learned) == [label]
    assert (learned[label].sd, learned[label].df) == (pytest.approx(math.sqrt(4e-6 / 3)), 3)


def test_a_gate_cut_off_mid_line_teaches_its_complete_lines(tmp_path):
    e = math.exp
    label = "fp16/k 8192x8192x8192"
    write_paired_gate(tmp_path / "cut", [{label: e(0.0)}, {label: e(0.002)}])
    with open(tmp_path / "cut" / "paired" / "rounds" / "round-2.jsonl", "a") as out:
        out.write('{"label": "fp16/k 8192x8192x8192", "rat')  # the gate was killed while writing it
    learned, gates, _ = noise.learn_paired([tmp_path / "cut"])
    assert gates == 1 and list(learned) == [label]
    assert (learned[label].sd, learned[label].df) == (pytest.approx(math.sqrt(2e-6)), 1)


@pytest.mark.parametrize("line", ['[1, 2]', '{"label": "fp16/k 8192x8192x8192", "ratio": Infinity}',
                                  '{"label": "fp16/k 8192x8192x8192", "ratio": -1.0}'])
def test_rounds_that_are_not_ratios_are_refused_in_a_line_and_no_file_written(tmp_path, line):
    write_paired_gate(tmp_path / "g", [{"fp16/k 8192x8192x8192": 1.0}, {"fp16/k 8192x8192x8192": 1.001}])
    with open(tmp_path / "g" / "paired" / "rounds" / "round-2.jsonl", "a") as out:
        out.write(line + "\n")
    done = sgemm("--rounds", str(tmp_path / "g"), "--machine", "box", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "round-2.jsonl, line" in done.stderr, done.stderr
    assert not (tmp_path / "noise").exists()


def test_gates_whose_rounds_were_timed_otherwise_are_not_pooled(tmp_path):
    label = "fp32/k 4096x4096x4096"
    write_paired_gate(tmp_path / "short", [{label: 1.0}, {label: 1.01}], {"max_s": 0.8, "target_half_width": 0.001})
    write_paired_gate(tmp_path / "long", [{label: 1.0}, {label: 1.001}])
    with pytest.raises(noise.NoiseFileError, match="timed their rounds in different ways"):
        noise.learn_paired([tmp_path / "short", tmp_path / "long"])


def test_paired_noise_learned_from_rounds_timed_otherwise_is_set_aside_saying_so(tmp_path):
    """A round's length sets its spread: noise from 0.8-s rounds would make the gate's 12-s rounds look noisier
    than they are (a case not powered for no reason), or the other way round, quieter."""
    path = tmp_path / "box.json"
    paired = {"fp32/k 4096x4096x4096": Noise(0.005, 8)}
    noise.write(path, "box", {"fp32/k 64x64x64": Noise(0.01, 4)}, 1, paired, 1, {"max_s": 0.8})
    kept, note = noise.read(path, "box", {"max_s": 0.8})
    assert kept["paired"] == paired and note is None
    left, note = noise.read(path, "box", ROUND)
    assert "paired" not in left and left["unpaired"] == {"fp32/k 64x64x64": Noise(0.01, 4)}
    assert "its paired noise was set aside" in note and '"max_s": 12.0' in note and '"max_s": 0.8' in note
    noise.write(path, "box", {}, 0, paired, 1)  # a file from before the rounds' settings were kept
    assert "settings it does not record" in noise.read(path, "box", ROUND)[1]


def test_the_command_learns_paired_noise_from_gates_work_folders(tmp_path):
    write_paired_gate(tmp_path / "gate", [{"fp16/k 64x64x64": 1.0}, {"fp16/k 64x64x64": 1.001}])
    done = sgemm("--rounds", str(tmp_path / "gate"), "--machine", "box", "--repo", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paired, 1 cases from 1 gates" in done.stdout
    assert set(noise.read(tmp_path / "noise" / "box.json", "box", ROUND)[0]["paired"]) == {"fp16/k 64x64x64"}
    missing = sgemm("--rounds", str(tmp_path / "nowhere"), "--machine", "box", cwd=tmp_path)
    assert missing.returncode == 2 and "no such folder" in missing.stderr


@pytest.mark.parametrize("args, message", [
    (["--machine", ".."], "a machine name is 1 to 64 letters"),
    (["--machine", "../GEMM/x"], "a machine name is 1 to 64 letters"),
    (["--machine", "box", "--out", "{tmp}/no/such/dir/n.json"], "does not exist"),
    (["--machine", "box", "--out", "{tmp}"], "is a directory: name a file"),
])
def test_a_name_or_a_place_that_would_write_elsewhere_is_refused_before_reading(tmp_path, args, message):
    write_paired_gate(tmp_path / "gate", [{"fp16/k 64x64x64": 1.0}, {"fp16/k 64x64x64": 1.001}])
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    done = sgemm("--rounds", str(tmp_path / "gate"), "--repo", str(tmp_path),
                 *[a.replace("{tmp}", str(tmp_path)) for a in args], cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_a_disturbed_round_is_not_learned_into_the_paired_noise(tmp_path):
    # three A/A gates of nine rounds spreading by about 0.1%, one round of them 0.8% off: kept, it would double the
    # entry, and the gate, pooling it with its rounds, would see 0.5% as noise
    e = math.exp
    label = "fp32/k 4096x4096x4096"
    base = [0.001, -0.001, 0.0005, -0.0005, 0.0, 0.0015, -0.0015, 0.0002, -0.0002]
    for name, disturbed in (("a", None), ("b", 3), ("c", None)):
        logs = [0.008 if i == disturbed else value for i, value in enumerate(base)]
        write_paired_gate(tmp_path / name, [{label: e(value)} for value in logs])
    learned, gates, _ = noise.learn_paired([tmp_path / name for name in "abc"])
    assert gates == 3 and learned[label].df == 23
    assert learned[label].sd == pytest.approx(noise.paired_entry([base, base[:3] + base[4:], base]).sd)
    assert learned[label].sd < 0.0011


def test_paired_rounds_that_all_read_the_same_teach_no_entry(tmp_path):
    # the outlier passes pool the rounds they keep: a spread of 0 is no entry, not a refused one
    write_paired_gate(tmp_path / "a", [{"fp16/k 8192x8192x8192": 1.0}] * 3)
    learned, gates, _ = noise.learn_paired([tmp_path / "a"])
    assert gates == 1 and learned == {}
