"""The site's resource page: the newest resource figures of any machine, a bar per kernel from zero, a table."""

import urllib.parse

import pytest
from conftest import write_asv_run

from sgemm.results.asvsuite import RESOURCES
from sgemm.site.ladders import ReportError
from sgemm.site.resources import TRACKS, history_fragment, newest_run, resource_figure, write_resource_page

KERNELS = ("fp32/naive", "fp32/warptile", "fp16/wgmma_tma")
# registers, shared bytes, stack bytes, spill stores, spill loads of each built (kernel, arch)
USAGE = {("fp32/naive", "sm_80"): (30, 0, 0, 0, 0), ("fp32/naive", "sm_90"): (32, 0, 0, 0, 0),
         ("fp32/warptile", "sm_80"): (190, 16640, 8, 8, 8), ("fp32/warptile", "sm_90"): (201, 16640, 0, 0, 0),
         ("fp16/wgmma_tma", "sm_90a"): (154, 0, 0, 0, 0)}
METHODS = ("track_registers", "track_shared_memory", "track_local_memory", "track_spill_stores", "track_spill_loads")


def write_resources(results, machine, commit, date_ms, scale=1):
    figures = {("Resources", method): {key: [values[index] * scale] for key, values in USAGE.items()}
               for index, method in enumerate(METHODS)}
    # Every other combination is a skip (NaN), as a kernel not built for an architecture is.
    write_asv_run(results, machine, commit, date_ms, figures, module="bench_resources")


def test_the_newest_run_of_any_machine_is_shown(tmp_path):
    write_resources(tmp_path, "vm", "a" * 40, 2_000)
    write_resources(tmp_path, "nvidia-h100", "b" * 40, 1_000, scale=2)
    run = newest_run(tmp_path)
    assert (run.machine, run.commit) == ("vm", "a" * 40)
    assert run.figures["track_registers"][("fp32/warptile", "sm_90")] == 201
    assert run.shown_arch("fp32/warptile") == "sm_90" and run.shown_arch("fp16/wgmma_tma") == "sm_90a"
    assert ("fp16/wgmma_tma", "sm_80") not in run.figures["track_registers"]  # a skip is no figure


def test_a_tree_without_resource_figures_has_no_page(tmp_path):
    write_asv_run(tmp_path, "box", "a" * 40, 1_000, {("Gemm", "track_tflops"): {("naive", 64, "fp32"): [7.0]}})
    with pytest.raises(ReportError, match="no resource figures"):
        newest_run(tmp_path)


def test_the_chart_has_a_panel_per_track_a_bar_per_kernel_each_from_zero(tmp_path):
    pytest.importorskip("matplotlib")
    write_resources(tmp_path, "vm", "a" * 40, 1_000)
    run = newest_run(tmp_path)
    figure = resource_figure(run)
    panels = figure.axes
    assert [axes.get_title() for axes in panels] == [title for _, title, _, _ in TRACKS]
    labels = [label.get_text() for label in panels[0].get_yticklabels()]
    assert sorted(labels) == sorted(f"{kernel} ({run.shown_arch(kernel)})" for kernel in KERNELS)  # each once
    for axes in panels:
        assert axes.get_xlim()[0] == 0
        assert len(axes.patches) == len(KERNELS)
    registers = {label: bar.get_width() for label, bar in zip(labels, panels[0].patches)}
    assert registers["fp32/warptile (sm_90)"] == 201
    shared = {label: bar.get_width() for label, bar in zip(labels, panels[1].patches)}
    assert shared["fp32/warptile (sm_90)"] == pytest.approx(16640 / 1024)  # KiB
    # The newest architecture's figures: warptile spills on sm_80 alone, so that panel says every kernel is at 0.
    assert "0 for every kernel" in [text.get_text() for text in panels[3].texts]
    assert "0 for every kernel" not in [text.get_text() for text in panels[0].texts]


def test_the_page_shows_the_chart_a_table_per_architecture_and_links_asvs_histories(tmp_path):
    pytest.importorskip("matplotlib")
    write_resources(tmp_path / "results", "vm", "c" * 40, 1_000)
    written = write_resource_page(tmp_path / "site" / "resources", newest_run(tmp_path / "results"))
    assert [path.name for path in written] == ["index.html", "resources.png"]
    page = written[0].read_text()
    assert '<img src="resources.png"' in page and "commit <code>cccccccccccc</code>" in page
    assert f'href="../index.html#{RESOURCES}.track_spill_stores">' in page  # all 0: asv's own default view
    assert f'href="../index.html#{RESOURCES}.track_registers?p-kernel=%27fp32%2Fwarptile%27' in page
    assert "<tr><td><code>fp16/wgmma_tma</code></td><td>-</td><td>-</td><td>154</td></tr>" in page
    assert "<tr><td><code>fp32/warptile</code></td><td>190</td><td>201</td><td>-</td></tr>" in page
    assert written[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_asvs_history_is_linked_with_the_kernels_of_the_largest_figures(tmp_path):
    write_resources(tmp_path, "vm", "c" * 40, 1_000)
    fragment = history_fragment(newest_run(tmp_path), "track_registers")
    name, _, query = fragment.partition("?")
    assert name == f"{RESOURCES}.track_registers"
    pairs = [tuple(urllib.parse.unquote(part).split("=")) for part in query.split("&")]
    # Largest first, on the architecture of the largest: wgmma_tma's bar stands for sm_90a, and is left out.
    assert pairs == [("p-kernel", "'fp32/warptile'"), ("p-kernel", "'fp32/naive'"), ("p-arch", "'sm_90'")]
