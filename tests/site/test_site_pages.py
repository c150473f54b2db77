"""What the newcomer's site showed that a reader could not read (the 2026-11-27 review, §1 and "Ten worst problems"
#10): a register history whose y axis read "32.0" on every tick, the benchmark list's empty cells for kernels at
architectures they are not built for, and two regressions pages in the navbar (asv's item goes; the watch's page
keeps the name: tests/watch/test_page.py)."""

import json
import shutil
import subprocess

import pytest

from sgemm.site import vendor

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
    (folder / vendor.SUMMARY_MARGINS_SCRIPT).write_text(vendor._SUMMARY_MARGINS_JS)

    def run(placeholder: str, axes: list[dict]) -> list[dict]:
        done = subprocess.run([node, str(folder / "harness.js"), str(folder / vendor.SUMMARY_MARGINS_SCRIPT),
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
    assert vendor.drop_unmeasured_list_rows(tmp_path) == 1
    assert json.loads(summary.read_text()) == [rows[0], rows[2]]
    assert vendor.drop_unmeasured_list_rows(tmp_path) == 0


def test_a_nav_item_of_asv_is_taken_out_and_nothing_else(tmp_path):
    page = ('<ul class="nav navbar-nav navbar-left">\n'
            '\t<li id="nav-li-summarylist"><a href="#/summarylist">Benchmark list</a></li>\n'
            '\t<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>\n'
            '        <li id="nav-li-graphdisplay"></li>\n</ul>\n')
    (tmp_path / "index.html").write_text(page)
    assert vendor.drop_nav_item(tmp_path, "nav-li-regressions") is True
    assert (tmp_path / "index.html").read_text() == page.replace(
        '\t<li id="nav-li-regressions"><a href="#/regressions">Regressions</a></li>\n', "")
    assert vendor.drop_nav_item(tmp_path, "nav-li-regressions") is False
