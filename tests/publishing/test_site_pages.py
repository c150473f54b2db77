"""What the newcomer's site showed that a reader could not read (shared/reviews/newcomer-2026-11-27.md, §1 and
"Ten worst problems" #10): a register history whose y axis read "32.0" on every tick, the benchmark list's empty
cells for kernels at architectures they are not built for, literal backticks on the regressions page, and both
"Regressions" and "Regressions first" in the navbar. Counts are said in the singular where they are one."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "judging"))
from history_tree import MACHINE, make_branch, write_history
from test_notices import COMMITS, hopper_and_quiet

from sgemm.catalogue import load_catalogue
from sgemm.judging.notices import watch
from sgemm.publishing import site
from sgemm.publishing.regressions import write_page
from sgemm.words import counted

# The flot plugin of SUMMARY_MARGINS_SCRIPT run by node against a stand-in of flot: the processOffset hook it adds,
# called on a plot of asv's graph page (#main-graph) or of the grid (.benchmark-plot), with the y axes given. Prints
# each axis's options as JSON.
PLUGIN_HARNESS = """
const fs = require("fs");
const [script, placeholderClass, axesJson] = process.argv.slice(2);
const plugins = [];
const jQuery = { plot: { plugins }, each: (list, f) => list.forEach((item, i) => f(i, item)) };
new Function("window", fs.readFileSync(script, "utf8"))({ jQuery });
const axes = JSON.parse(axesJson);
const hooks = { processOffset: [] };
const plot = { hooks, getPlaceholder: () => ({ hasClass: (name) => name === placeholderClass }),
               getYAxes: () => axes };
plugins.forEach((plugin) => plugin.init(plot));
hooks.processOffset.forEach((hook) => hook(plot));
console.log(JSON.stringify(axes.map((axis) => axis.options)));
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    node = shutil.which("node")
    if node is None:
        pytest.skip("needs node to run the site's flot plugin (Debian: apt-get install nodejs)")
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "harness.js").write_text(PLUGIN_HARNESS)
    (folder / site.SUMMARY_MARGINS_SCRIPT).write_text(site._SUMMARY_MARGINS_JS)

    def run(placeholder: str, axes: list[dict]) -> list[dict]:
        done = subprocess.run([node, str(folder / "harness.js"), str(folder / site.SUMMARY_MARGINS_SCRIPT),
                               placeholder, json.dumps(axes)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run


def test_a_graph_whose_line_does_not_move_gets_an_axis_whose_ticks_differ(plugin):
    # asv's graph page sets min and max to the lowest and highest value shown: 32 and 32 for registers no commit
    # changed, which flot widened by 0.01, every tick then reading 32.0.
    [axis] = plugin("main-graph", [{"options": {"min": 32, "max": 32}, "datamin": 32, "datamax": 32}])
    assert axis == {"min": pytest.approx(28.8), "max": pytest.approx(35.2)}
    [axis] = plugin("main-graph", [{"options": {"min": 0, "max": 0}, "datamin": 0, "datamax": 0}])
    assert axis == {"min": -1, "max": 1}


def test_a_graph_that_moves_or_is_on_a_log_scale_keeps_asvs_axis(plugin):
    moving = {"options": {"min": 30, "max": 34}, "datamin": 30, "datamax": 34}
    log = {"options": {"min": 32, "max": 32, "transform": "log"}, "datamin": 32, "datamax": 32}
    bytes_axis = {"options": {"min": 0, "max": 41.6}, "datamin": 32, "datamax": 32}
    assert plugin("main-graph", [moving, log, bytes_axis]) == [moving["options"], log["options"],
                                                              bytes_axis["options"]]


def test_the_grid_tiles_keep_their_margins(plugin):
    [axis] = plugin("benchmark-plot", [{"options": {}, "datamin": 32, "datamax": 32}])
    assert axis == {"min": pytest.approx(-0.15 * 32), "max": pytest.approx(1.15 * 32)}


def test_the_list_leaves_out_a_combination_never_measured_and_keeps_one_measured_once(tmp_path):
    summary = tmp_path / "graphs" / "branch-main" / "machine-box" / "summary.json"
    summary.parent.mkdir(parents=True)
    rows = [{"name": "bench_resources.Resources.track_registers", "idx": 0, "last_value": 32.0},
            {"name": "bench_resources.Resources.track_registers", "idx": 1, "last_value": None},  # sm_90a at sm_80
            {"name": "bench_gpu.Gpu.track_sm_count", "idx": None, "last_value": None}]
    summary.write_text(json.dumps(rows))
    assert site.drop_unmeasured_list_rows(tmp_path) == 1
    assert json.loads(summary.read_text()) == [rows[0], rows[2]]
    assert site.drop_unmeasured_list_rows(tmp_path) == 0


def test_a_nav_item_of_asv_is_taken_out_and_nothing_else(tmp_path):
    page = ('<ul class="nav navbar-nav navbar-left">\n'
            '\t<li id="nav-li-summarylist"><a href="#/summarylist">Benchmark list</a></li>\n'
            '\t<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>\n'
            '        <li id="nav-li-graphdisplay"></li>\n</ul>\n')
    (tmp_path / "index.html").write_text(page)
    assert site.drop_nav_item(tmp_path, "nav-li-regressions") is True
    assert (tmp_path / "index.html").read_text() == page.replace(
        '\t<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>\n', "")
    assert site.drop_nav_item(tmp_path, "nav-li-regressions") is False


def test_the_regressions_page_shows_code_as_code_not_backticks(tmp_path):
    header = ["Made: 2026-11-27 22:04 UTC from the asv results in `results`", "Command: `sgemm history`"]
    write_page(tmp_path / "page", {}, header)
    page = (tmp_path / "page" / "index.html").read_text()
    assert "<li>Command: <code>sgemm history</code></li>" in page and "<code>results</code>" in page
    assert "`" not in page


def test_one_run_off_the_branch_is_said_in_the_singular(tmp_path):
    commits = make_branch(tmp_path / "repo", COMMITS)
    write_history(tmp_path / "results", commits, hopper_and_quiet())
    run = sorted((tmp_path / "results" / MACHINE).glob(f"{commits[-1][:8]}-*.json"))[0]
    data = json.loads(run.read_text())
    data["commit_hash"] = "f" * 40  # a commit of no branch of the repository
    (run.parent / ("f" * 8 + run.name[8:])).write_text(json.dumps(data))
    notes = watch(tmp_path / "results", tmp_path / "repo", load_catalogue())[MACHINE].notes
    assert f"{MACHINE}: 1 run of commits not on the branch left out, as asv's graphs leave them out" in notes


@pytest.mark.parametrize("number, said", [(0, "0 entries"), (1, "1 entry"), (2, "2 entries")])
def test_a_count_is_singular_for_one_alone(number, said):
    assert counted(number, "entry", "entries") == said
    assert counted(number, "kernel") == said.replace("entries", "kernels").replace("entry", "kernel")
