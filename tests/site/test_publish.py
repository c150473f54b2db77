"""The whole published site of a results tree: asv's pages for real asv results of two GPU boxes (the
`two_gpu_results` tree of conftest.py), the cross-GPU page linked from asv's navbar, every library vendored; a
tree without Gemm results, and a directory that is no results tree; and the same through `sgemm publish`."""

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sgemm.catalogue import load_catalogue
from sgemm.results import resultstree
from sgemm.site.ladders import GENERATED_NOTE
from sgemm.site.publish import (CROSS_GPU_DIR, CROSS_GPU_LABEL, RESOURCE_DIR, SITE_MARKER, PublishError, check_places,
                                check_site_places, measured_benchmarks, publish_site, results_view)
from sgemm.site.vendor import CDN_ASSETS, PACKAGES, SUMMARY_MARGINS_SCRIPT
from sgemm.watch.page import WatchPages

KERNELS = load_catalogue()
GPUS = ["NVIDIA H100 80GB HBM3", "NVIDIA H200"]
NAV_LINK = f'<li class="sgemm-nav-link"><a href="gpus/index.html">{CROSS_GPU_LABEL}</a></li>'


@pytest.fixture(scope="module")
def two_gpu_site(two_gpu_results, npm_cache, tmp_path_factory):
    """publish_site of the two-GPU tree with the watch's pages, as `sgemm publish` makes it, once for the module:
    (the Site, its HTML directory)."""
    html_dir = tmp_path_factory.mktemp("two-gpu-site") / "html"
    watched = WatchPages(two_gpu_results.results, two_gpu_results.repo, KERNELS, ["Made: in a test"])
    site = publish_site(two_gpu_results.repo, two_gpu_results.results, html_dir, KERNELS, ["Made: in a test"],
                        npm_cache=npm_cache, parts=[watched])
    return site, html_dir


@pytest.fixture(scope="module")
def no_gemm_results(two_gpu_results, tmp_path_factory):
    """A results tree of the same repository in which the one machine ran the Gpu class alone: no Gemm results."""
    tree = two_gpu_results.copy(tmp_path_factory.mktemp("no-gemm") / "tree")
    shutil.rmtree(tree.results)
    tree.run(tree.H100, bench="bench_gpu")
    return tree


def navbar(index: Path) -> str:
    text = index.read_text()
    start = text.index('<ul class="nav navbar-nav navbar-left">')
    return text[start:text.index("</ul>", start)]


def external_loads(page: Path) -> list[str]:
    """The URLs on the internet that a page's script and link tags load (a plain <a> link loads nothing)."""
    return [url for url in re.findall(r'<(?:script|link)\b[^>]*\s(?:src|href)="([^"]*)"', page.read_text())
            if re.match(r"(?:https?:)?//", url)]


def sgemm(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sgemm", *args], cwd=cwd, capture_output=True, text=True)


def test_the_site_holds_asvs_history_of_both_gpus(two_gpu_site, two_gpu_results):
    site, html_dir = two_gpu_site
    assert site.html_dir == html_dir and site.cross_gpu_skipped == ""
    index = json.loads((html_dir / "index.json").read_text())
    assert index["params"]["gpu"] == GPUS  # a facet per GPU, from the machine entries
    assert index["params"]["machine"] == ["nvidia-h100-80gb-hbm3", "nvidia-h200"]
    assert index["params"]["compute_capability"] == ["9.0"]
    assert list(index["revision_to_hash"].values()) == [two_gpu_results.commit]
    assert {"bench_gemm.Gemm.track_tflops", "bench_gemm.Gemm.track_sm_clock", "bench_gpu.Gpu.track_sm_count",
            "bench_gpu.Gpu.track_max_sm_clock"} <= set(index["benchmarks"])
    assert (html_dir / "graphs" / "summary" / "bench_gemm.Gemm.track_tflops.json").is_file()


def test_the_cross_gpu_page_is_in_the_site_and_linked_from_its_navbar(two_gpu_site):
    site, html_dir = two_gpu_site
    page_dir = html_dir / CROSS_GPU_DIR
    assert site.cross_gpu == [page_dir / "README.md", page_dir / "index.html", page_dir / "points.json",
                              page_dir / "fp32.png", page_dir / "fp16.png"]
    assert all(path.is_file() for path in site.cross_gpu)
    links = navbar(html_dir / "index.html")
    assert links.count(NAV_LINK) == 1
    assert links.index('href="#/summarylist"') < links.index(NAV_LINK) < links.index('id="nav-li-graphdisplay"')
    # One item of each name: asv's own regressions page (its route still answers) leaves the navbar to the site's.
    assert 'href="#/regressions"' not in links and re.findall(r">(Regressions[^<]*)</a>", links) == ["Regressions"]

    page = (page_dir / "index.html").read_text()
    assert "<title>GEMM kernels across GPUs, 2048x2048x2048</title>" in page  # the size both GPUs measured
    assert '<a href="../index.html">' in page and "<li>Made: in a test</li>" in page
    assert '<th colspan="5">NVIDIA H100 80GB HBM3</th><th colspan="5">NVIDIA H200</th>' in page
    assert ("<tr><td><code>fp32/naive</code></td><td>2.50</td><td>-</td><td>10.0</td><td>3.7</td><td>1757</td>"
            "<td>3.75</td><td>-</td><td>10.0</td><td>5.6</td><td>1832</td></tr>") in page


def test_the_benchmark_list_has_no_row_of_a_combination_no_gpu_measured(two_gpu_site):
    # The newcomer's list had empty Value cells for the sm_90a kernels at sm_80 to sm_90: rows that read as failures.
    _, html_dir = two_gpu_site
    lists = sorted(html_dir.glob("graphs/**/summary.json"))
    rows = [row for path in lists for row in json.loads(path.read_text())]
    assert lists and rows and [row for row in rows if row["idx"] is not None and row["last_value"] is None] == []


def test_every_cdn_file_of_the_site_is_vendored(two_gpu_site):
    site, html_dir = two_gpu_site
    index = html_dir / "index.html"
    assert external_loads(index) == []
    # The one address on the internet left is asv's "about" link, which loads nothing.
    assert re.findall(r'(?:src|href)="(https?://[^"]*)"', index.read_text()) == \
        ["https://github.com/airspeed-velocity/asv/"]
    assert {(item.package, item.version) for item in site.vendored} == set(PACKAGES)
    assert {item.url for item in site.vendored} == {asset.url for asset in CDN_ASSETS}
    assert {item.page for item in site.vendored} == {"index.html"}
    for item in site.vendored:
        assert (html_dir / item.path).is_file(), item
        assert f'"{item.path}"' in index.read_text()
    for page in html_dir.rglob("*.html"):
        assert external_loads(page) == [], page


def test_a_size_can_be_chosen_for_the_cross_gpu_page(two_gpu_results, npm_cache, tmp_path):
    site = publish_site(two_gpu_results.repo, two_gpu_results.results, tmp_path / "html", KERNELS, [], size=4096,
                        npm_cache=npm_cache)
    readme = (tmp_path / "html" / CROSS_GPU_DIR / "README.md").read_text()
    assert site.cross_gpu and readme.startswith(f"{GENERATED_NOTE}\n\n# GEMM kernels across GPUs, 4096x4096x4096\n")
    assert "| `fp32/float4` | - | - | - | - | - | 52.50 | - | 70.0 | 78.5 | 1834 |" in readme  # the H100 ran no 4096


def test_a_directory_that_is_no_results_tree_is_refused_before_the_site_is_touched(two_gpu_results, tmp_path):
    html_dir = tmp_path / "html"
    html_dir.mkdir()
    (html_dir / "index.html").write_text("the site as it was")
    for results in (tmp_path / "empty", tmp_path / "missing", two_gpu_results.results / "nvidia-h200"):
        if results.name == "empty":
            results.mkdir()
        with pytest.raises(PublishError, match=f"{re.escape(str(results))}: not an asv results tree "
                                                r"\(no benchmarks.json\)"):
            publish_site(two_gpu_results.repo, results, html_dir, KERNELS, [])
    assert [path.name for path in html_dir.iterdir()] == ["index.html"]
    assert (html_dir / "index.html").read_text() == "the site as it was"


def test_the_grid_loads_the_room_around_its_lines_and_the_manifest_names_it(two_gpu_site):
    _, html_dir = two_gpu_site
    text = (html_dir / "index.html").read_text()
    head = text[:text.index("</head>")]
    assert re.findall(r'<script\b[^>]*\ssrc="([^"]*)"', head)[-1] == SUMMARY_MARGINS_SCRIPT
    assert "plot.hooks.processOffset" in (html_dir / SUMMARY_MARGINS_SCRIPT).read_text()
    assert SUMMARY_MARGINS_SCRIPT in (html_dir / SITE_MARKER).read_text().splitlines()


def test_a_tree_without_gemm_results_says_so_on_the_cross_gpu_page_and_shows_no_blank_benchmark(
        no_gemm_results, npm_cache, tmp_path):
    html_dir = tmp_path / "html"
    site = publish_site(no_gemm_results.repo, no_gemm_results.results, html_dir, KERNELS, [], npm_cache=npm_cache)
    assert site.cross_gpu == []
    assert site.cross_gpu_skipped == f"no Gemm results for any machine in {no_gemm_results.results}"
    page = (html_dir / CROSS_GPU_DIR / "index.html").read_text()
    assert "<h1>No GPU results yet</h1>" in page and "<code>scripts/history.sh</code>" in page
    assert "<code>sgemm merge results &lt;its results&gt; --into merged</code>" in page
    assert str(no_gemm_results.root) not in page  # no path of the box that built it
    assert NAV_LINK in navbar(html_dir / "index.html")  # the link stays, and leads to the explanation
    index = json.loads((html_dir / "index.json").read_text())
    assert index["params"]["gpu"] == ["NVIDIA H100 80GB HBM3"]
    # The Gemm benchmarks asv discovered but no box measured would be blank tiles and "No data" pages: left out.
    assert set(index["benchmarks"]) == {"bench_gpu.Gpu.track_sm_count", "bench_gpu.Gpu.track_max_sm_clock",
                                        "bench_gpu.Gpu.track_driver_version"}
    assert site.left_out == ["bench_gemm.Gemm.track_sm_clock", "bench_gemm.Gemm.track_tflops"]
    assert json.loads((no_gemm_results.results / "benchmarks.json").read_text()).keys() >= set(site.left_out)
    assert not (html_dir / "graphs" / "summary" / "bench_gemm.Gemm.track_tflops.json").exists()
    assert site.resources == [] and not (html_dir / RESOURCE_DIR).exists()  # no resource figures in this tree
    assert {(item.package, item.version) for item in site.vendored} == set(PACKAGES)  # still vendored
    assert external_loads(html_dir / "index.html") == []


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_a_benchmark_list_asv_cannot_read_is_refused_in_one_line(no_gemm_results, tmp_path, text):
    tree = no_gemm_results.copy(tmp_path / "tree")
    (tree.results / "benchmarks.json").write_text(text)
    with pytest.raises(PublishError, match=r"benchmarks.json: (cannot be read as|not) asv's list of benchmarks"):
        results_view(tree.results, tmp_path / "view")


def test_the_results_view_links_every_file_and_leaves_out_benchmarks_without_a_figure(no_gemm_results, tmp_path):
    view = tmp_path / "view"
    left_out = results_view(no_gemm_results.results, view)
    assert left_out == ["bench_gemm.Gemm.track_sm_clock", "bench_gemm.Gemm.track_tflops"]
    originals = sorted(path.relative_to(no_gemm_results.results) for path in no_gemm_results.results.rglob("*.json"))
    assert sorted(path.relative_to(view) for path in view.rglob("*.json")) == originals
    linked = [path for path in view.rglob("*.json") if path.name != "benchmarks.json" or path.parent != view]
    assert linked and all(path.is_symlink() for path in linked)
    assert "bench_gemm.Gemm.track_tflops" not in json.loads((view / "benchmarks.json").read_text())
    assert measured_benchmarks(no_gemm_results.results) == {"bench_gpu.Gpu.track_sm_count",
                                                            "bench_gpu.Gpu.track_max_sm_clock",
                                                            "bench_gpu.Gpu.track_driver_version"}


def test_asv_reads_its_own_files_alone_not_the_watch_s_or_a_bisect_s_beside_them(no_gemm_results, tmp_path, capfd,
                                                                                   caplog):
    # The watch's memory at the tree's root, a machine's confirmations and a bisect's result: asv, walking the tree,
    # said "Skipping results: could not load .../machine.json" for each folder of them at every publish.
    tree = no_gemm_results.copy(tmp_path / "tree")
    machine = tree.results / tree.H100.machine
    (tree.results / "notices.json").write_text('{"notices": []}')
    (machine / "confirmations.json").write_text("[]")
    (machine / "bisect").mkdir()
    (machine / "bisect" / "abc.json").write_text("{}")
    view = tmp_path / "view"
    results_view(tree.results, view)
    linked = sorted(str(path.relative_to(view)) for path in view.rglob("*") if path.is_file())
    runs = sorted(f"{machine.name}/{path.name}" for path in machine.glob("*.json")
                  if path.name not in ("machine.json", "confirmations.json"))
    assert runs and linked == sorted(["benchmarks.json", f"{machine.name}/machine.json", *runs])
    caplog.set_level(logging.DEBUG)
    assert measured_benchmarks(tree.results) == measured_benchmarks(no_gemm_results.results)
    # asv says it through logging, which pytest captures before it reaches stderr.
    assert "Skipping results" not in caplog.text and "Skipping results" not in capfd.readouterr().err


def test_a_machine_is_read_under_the_name_its_machine_json_gives_not_its_folders(two_gpu_results, tmp_path):
    # asv knows a machine by machine.json's `machine` field: a folder renamed (by hand, or a copy) still holds its runs.
    tree = two_gpu_results.copy(tmp_path / "tree")
    for machine in resultstree.machines(tree.results):
        (tree.results / machine).rename(tree.results / f"copy-of-{machine}")
    assert measured_benchmarks(tree.results) == measured_benchmarks(two_gpu_results.results) != set()


# --- sgemm publish -----------------------------------------------------------------------------------------------


def test_sgemm_publish_builds_the_site_and_names_the_cross_gpu_page(two_gpu_results, npm_cache, tmp_path):
    html_dir = tmp_path / "site"
    done = sgemm("publish", "--results", str(two_gpu_results.results), "--html", str(html_dir), "--repo",
                 str(two_gpu_results.repo), "--npm-cache", str(npm_cache), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"cross-GPU page: {html_dir / 'gpus' / 'index.html'}"
    assert lines[1].startswith(f"site: {html_dir} (vendored files now loaded by {len(CDN_ASSETS)} library tags;")
    assert "warning" not in done.stderr and "Traceback" not in done.stderr
    assert (html_dir / "gpus" / "index.html").is_file() and NAV_LINK in navbar(html_dir / "index.html")
    assert external_loads(html_dir / "index.html") == []
    readme = (html_dir / "gpus" / "README.md").read_text()
    # Paths outside the directory the command ran in show as their last part: no scratch path of this box.
    assert f"- Command: `sgemm publish --results {two_gpu_results.results.name} --html {html_dir.name}" in readme
    assert f"from the asv results in `{two_gpu_results.results.name}`" in readme
    assert str(tmp_path) not in readme and str(two_gpu_results.root) not in readme


def test_sgemm_publish_says_when_there_are_no_gpu_results(no_gemm_results, npm_cache, tmp_path):
    html_dir = tmp_path / "site"
    done = sgemm("publish", "--results", str(no_gemm_results.results), "--html", str(html_dir), "--repo",
                 str(no_gemm_results.repo), "--npm-cache", str(npm_cache), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"sgemm publish: no GPU results (no Gemm results for any machine in {no_gemm_results.results}): the "
        "site's Across GPUs page says how to get them",
        "sgemm publish: left out of the site, with no figure in the results: 2 benchmarks (bench_gemm)"]
    assert "cross-GPU page:" not in done.stdout and done.stdout.startswith(f"site: {html_dir} (")
    assert (html_dir / "index.html").is_file()


def test_sgemm_publish_of_a_directory_that_is_no_results_tree_exits_2_with_one_line(two_gpu_results, tmp_path):
    (tmp_path / "not-results").mkdir()
    done = sgemm("publish", "--results", str(tmp_path / "not-results"), "--html", str(tmp_path / "site"), "--repo",
                 str(two_gpu_results.repo), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"sgemm publish: {tmp_path / 'not-results'}: not an asv results tree")
    assert not (tmp_path / "site").exists()


def damaged_copy(results: Path, into: Path, machine: str, value) -> Path:
    """A copy of the tree whose machine's first run holds `value` where its first TFLOP/s figure was."""
    shutil.copytree(results, into)
    run = next(path for path in sorted((into / machine).glob("*.json")) if path.name != "machine.json")
    content = json.loads(run.read_text())
    figures = content["results"]["bench_gemm.Gemm.track_tflops"][0]
    figures[next(i for i, figure in enumerate(figures) if figure is not None)] = value
    run.write_text(json.dumps(content))
    return into


@pytest.mark.parametrize("value", ["fast", float("inf")])
@pytest.mark.parametrize("command", ["publish", "report"])
def test_a_run_file_with_a_figure_that_is_no_number_is_refused_in_one_line(two_gpu_results, tmp_path, value,
                                                                          command):
    damaged = damaged_copy(two_gpu_results.results, tmp_path / "results", "nvidia-h200", value)
    where = (["--html", str(tmp_path / "site"), "--repo", str(two_gpu_results.repo)] if command == "publish"
             else ["--machine", "nvidia-h200", "--out", str(tmp_path / "report")])
    done = sgemm(command, "--results", str(damaged), *where, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "which is no figure: the run file is damaged" in done.stderr
    assert not (tmp_path / "site").exists() and not (tmp_path / "report").exists()


def test_sgemm_publish_with_a_repo_that_is_no_asv_project_exits_2_with_one_line(two_gpu_results, tmp_path):
    done = sgemm("publish", "--results", str(two_gpu_results.results), "--html", str(tmp_path / "site"), "--repo",
                 str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("sgemm publish: ")


def test_a_repository_without_the_results_commits_is_refused_rather_than_an_empty_history(two_gpu_results, tmp_path):
    # The same project, but a history that never held the commit the results were measured at.
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(two_gpu_results.repo / "asv.conf.json", other / "asv.conf.json")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "another history"]):
        subprocess.run(["git", "-C", str(other), *command], check=True, env={**env, "PATH": "/usr/bin:/bin"})
    with pytest.raises(PublishError, match=r"none of the commits in .* is on the branches \['main'\] of .*other"):
        publish_site(other, two_gpu_results.results, tmp_path / "html", KERNELS, [])


# --- nothing but a site it made is ever replaced ------------------------------------------------------------------


def files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def other_history(two_gpu_results, root: Path) -> Path:
    """The same project in a repository that never held the commit the results were measured at."""
    other = root / "other"
    other.mkdir()
    shutil.copy(two_gpu_results.repo / "asv.conf.json", other / "asv.conf.json")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "another history"]):
        subprocess.run(["git", "-C", str(other), *command], check=True, env=env)
    return other


def test_a_refused_publish_leaves_the_site_that_was_there_whole(two_gpu_site, two_gpu_results, tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    before = files(html_dir)
    assert SITE_MARKER in before
    with pytest.raises(PublishError, match="none of the commits"):
        publish_site(other_history(two_gpu_results, tmp_path), two_gpu_results.results, html_dir, KERNELS, [])
    assert files(html_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["html", "other"]  # no half-built site


def test_a_site_it_made_is_replaced_whole(two_gpu_site, two_gpu_results, npm_cache, tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    (html_dir / "stale.html").write_text("from an earlier publish")
    with (html_dir / SITE_MARKER).open("a") as marker:
        marker.write("stale.html\n")  # as that earlier publish would have listed it
    site = publish_site(two_gpu_results.repo, two_gpu_results.results, html_dir, KERNELS, [], npm_cache=npm_cache)
    assert site.html_dir == html_dir and site.cross_gpu[0] == html_dir / CROSS_GPU_DIR / "README.md"
    assert not (html_dir / "stale.html").exists() and (html_dir / SITE_MARKER).is_file()
    assert site.kept == []
    assert external_loads(html_dir / "index.html") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["html"]


@pytest.mark.parametrize("html, message", [
    (lambda repo, results, tmp: repo, "is the repository"),
    (lambda repo, results, tmp: repo.parent, "holds the repository"),
    (lambda repo, results, tmp: results, "is the results"),
    (lambda repo, results, tmp: results / "nvidia-h200", "lies inside the results"),
    (lambda repo, results, tmp: repo / ".git" / "site", "lies inside the repository's .git"),
    (lambda repo, results, tmp: tmp / "notes", "is not empty and is not a site `sgemm publish` made"),
    (lambda repo, results, tmp: tmp / "notes" / "a.txt", "not a directory"),
    (lambda repo, results, tmp: tmp / "no" / "such" / "html", "does not exist"),
])
def test_an_html_directory_that_would_lose_data_is_refused(two_gpu_results, tmp_path, html, message):
    tree = two_gpu_results.copy(tmp_path / "tree")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("mine")
    before = files(tmp_path)
    with pytest.raises(PublishError, match=re.escape(message)):
        publish_site(tree.repo, tree.results, html(tree.repo, tree.results, tmp_path), KERNELS, [])
    assert files(tmp_path).items() >= before.items()
    assert set(files(tmp_path)) == set(before)


def test_the_npm_cache_inside_the_site_is_refused(two_gpu_results, tmp_path):
    with pytest.raises(PublishError, match="holds the npm cache"):
        publish_site(two_gpu_results.repo, two_gpu_results.results, tmp_path / "html", KERNELS, [],
                     npm_cache=tmp_path / "html" / "cache")


def test_a_site_that_could_not_be_published_where_asked_is_said_before_the_history_measures(two_gpu_results,
                                                                                          tmp_path):
    def check(npm_cache):
        check_site_places(two_gpu_results.repo, two_gpu_results.results, tmp_path / "html", npm_cache)

    with pytest.raises(PublishError, match="--npm-cache .*missing/cache: no such folder"):
        check(str(tmp_path / "missing" / "cache"))
    with pytest.raises(PublishError, match="--npm-cache .*notes.txt: not a directory"):
        (tmp_path / "notes.txt").write_text("mine")
        check(str(tmp_path / "notes.txt"))
    # A cache folder not there is refused, not made: a mistyped one would be found only offline, after the build.
    with pytest.raises(PublishError, match="--npm-cache .*new-cache: no such folder"):
        check(str(tmp_path / "new-cache"))
    with pytest.raises(PublishError, match="--npm-cache .*new-cache: no such folder"):
        check_places(two_gpu_results.repo, two_gpu_results.results, tmp_path / "html", tmp_path / "new-cache")
    assert not (tmp_path / "new-cache").exists()
    (tmp_path / "new-cache").mkdir()
    check(str(tmp_path / "new-cache"))
    with pytest.raises(PublishError, match="holds the npm cache"):
        check(str(tmp_path / "html" / "cache"))
    check(None)


def test_a_size_no_gpu_measured_is_refused_before_anything_is_built(two_gpu_results, tmp_path):
    with pytest.raises(PublishError, match=r"--size 12345: no GPU in .* measured that size \(measured: 1024, 2048, "
                                           r"4096\)"):
        publish_site(two_gpu_results.repo, two_gpu_results.results, tmp_path / "html", KERNELS, [], size=12345)
    assert list(tmp_path.iterdir()) == []


def test_a_publish_waits_for_the_lock_of_its_site(two_gpu_results, npm_cache, tmp_path):
    import threading

    from sgemm.site.merge import lock_folder, lock_path, locked

    html_dir = tmp_path / "html"
    finished = threading.Event()

    def publish():
        publish_site(two_gpu_results.repo, two_gpu_results.results, html_dir, KERNELS, [], npm_cache=npm_cache)
        finished.set()

    with locked(exclusive=[html_dir]):
        worker = threading.Thread(target=publish)
        worker.start()
        assert not finished.wait(1.0), "the publish ran while another held the site's lock"
        assert list(tmp_path.iterdir()) == []  # the lock lies in the user's cache, not beside the site
        assert lock_path(html_dir).parent == lock_folder() and lock_path(html_dir).is_file()
    worker.join(120)
    assert finished.is_set() and (html_dir / SITE_MARKER).is_file()


# --- what a publish did not make survives it ----------------------------------------------------------------------

LEGACY_MARKER_TEXT = "made by `sgemm publish`; the next publish into this directory replaces it whole\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}


def tree(root: Path) -> dict[str, object]:
    """Everything under `root` without following a symlink: a file's bytes, a link's target, "dir" for a directory."""
    found: dict[str, object] = {}
    for entry in sorted(os.scandir(root), key=lambda entry: entry.name):
        name = Path(entry.path).relative_to(root).as_posix()
        if entry.is_symlink():
            found[name] = ("link", os.readlink(entry.path))
        elif entry.is_dir():
            found[name] = "dir"
            found.update({f"{name}/{inner}": what for inner, what in tree(Path(entry.path)).items()})
        else:
            found[name] = Path(entry.path).read_bytes()
    return found


# The files into which asv writes the time of the publish: equal in name only from one publish to the next.
ASV_STAMPED = {"info.json", "regressions.xml"}


def unstamped(found: dict[str, object]) -> dict[str, object]:
    return {name: "stamped" if name in ASV_STAMPED else what for name, what in found.items()}


def git_checkout(site: Path) -> None:
    """Make `site` a git checkout, as `git clone -b gh-pages` would leave it: a .git of many files, nested dirs."""
    for command in (["init", "-q", "-b", "gh-pages"], ["add", "-A"], ["commit", "-qm", "the site"]):
        subprocess.run(["git", "-C", str(site), *command], check=True, env=GIT_ENV, capture_output=True)


def republish(two_gpu_results, npm_cache, html_dir: Path):
    """Another publish of the two-GPU tree, as `sgemm publish` makes it (two_gpu_site)."""
    return publish_site(two_gpu_results.repo, two_gpu_results.results, html_dir, KERNELS, [], npm_cache=npm_cache,
                        parts=[WatchPages(two_gpu_results.results, two_gpu_results.repo, KERNELS, [])])


@pytest.fixture(scope="module")
def no_gemm_site(no_gemm_results, npm_cache, tmp_path_factory) -> Path:
    """A site published from a tree without Gemm results: it has no gpus/ page, which the two-GPU tree's has."""
    html_dir = tmp_path_factory.mktemp("no-gemm-site") / "html"
    publish_site(no_gemm_results.repo, no_gemm_results.results, html_dir, KERNELS, [], npm_cache=npm_cache)
    return html_dir


def test_a_site_that_became_a_git_checkout_keeps_all_it_did_not_make(two_gpu_site, two_gpu_results, npm_cache,
                                                                       tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    made = tree(html_dir)
    git_checkout(html_dir)
    (html_dir / "CNAME").write_text("gemm.example.org\n")
    (html_dir / "NOTES.md").write_text("# what we changed by hand\n")
    (html_dir / "graphs" / "mine.txt").write_bytes(b"\x00\xffbeside asv's graphs")
    (html_dir / CROSS_GPU_DIR / "drafts" / "old").mkdir(parents=True)
    (html_dir / CROSS_GPU_DIR / "drafts" / "old" / "h100.md").write_text("a draft")
    (html_dir / "index.json").write_text("edited by hand, and the tool's to replace")
    before = tree(html_dir)
    foreign = {name: what for name, what in before.items() if name not in made}
    assert len([name for name in foreign if name.startswith(".git/")]) > 20
    assert any(name.count("/") >= 3 for name in foreign if name.startswith(".git/"))

    site = republish(two_gpu_results, npm_cache, html_dir)
    after = tree(html_dir)
    assert {name: after.get(name) for name in foreign} == foreign  # every byte of it, every link, every folder
    assert site.kept == [".git", "CNAME", "NOTES.md", f"{CROSS_GPU_DIR}/drafts", "graphs/mine.txt"]
    # The new site is in place: the tool's files are its own again, and nothing else of the old one is left.
    assert after["index.json"] == made["index.json"]
    assert set(after) - set(foreign) == set(made)  # asv stamps the time into some, so names only
    assert NAV_LINK in navbar(html_dir / "index.html")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["html"]
    log = subprocess.run(["git", "-C", str(html_dir), "log", "--format=%s"], check=False, env=GIT_ENV,
                         capture_output=True, text=True)
    assert log.returncode == 0 and log.stdout == "the site\n", log.stderr  # still a working checkout

    # What was kept is not in the new manifest either: the publish after this one keeps it again.
    site = republish(two_gpu_results, npm_cache, html_dir)
    assert site.kept == [".git", "CNAME", "NOTES.md", f"{CROSS_GPU_DIR}/drafts", "graphs/mine.txt"]
    assert unstamped(tree(html_dir)) == unstamped(after)


def test_a_site_published_again_with_nothing_foreign_keeps_nothing(two_gpu_site, two_gpu_results, npm_cache,
                                                                     tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    before = tree(html_dir)
    assert republish(two_gpu_results, npm_cache, html_dir).kept == []
    assert set(tree(html_dir)) == set(before)  # its pages differ: that site was made with another header


def _gpus_page_of_the_users(site: Path, outside: Path) -> None:
    (site / CROSS_GPU_DIR).mkdir()
    (site / CROSS_GPU_DIR / "index.html").write_text("<p>our own comparison</p>")
    (site / CROSS_GPU_DIR / "notes.md").write_text("beside it")


def _a_file_where_the_new_site_has_a_directory(site: Path, outside: Path) -> None:
    (site / CROSS_GPU_DIR).write_text("a file named like the page's folder")


def _a_directory_where_the_new_site_has_a_file(site: Path, outside: Path) -> None:
    (site / CROSS_GPU_DIR / "index.html").mkdir(parents=True)
    (site / CROSS_GPU_DIR / "index.html" / "a.txt").write_text("mine")


def _a_symlink_where_the_new_site_has_a_directory(site: Path, outside: Path) -> None:
    (outside / "page").mkdir()
    (outside / "page" / "index.html").write_text("kept elsewhere")
    (site / CROSS_GPU_DIR).symlink_to(outside / "page")


def _the_users_file_in_a_folder_the_new_site_makes_a_file(site: Path, outside: Path) -> None:
    # As if an earlier publish had made a folder where this one writes a file, and the user put a file in it.
    (site / "index.json").unlink()
    (site / "index.json").mkdir()
    (site / "index.json" / "made").write_text("an earlier publish's")
    (site / "index.json" / "mine").write_text("the user's")
    with (site / SITE_MARKER).open("a") as marker:
        marker.write("index.json/made\n")


COLLISIONS = [
    (_gpus_page_of_the_users, f"{CROSS_GPU_DIR}/index.html"),
    (_a_file_where_the_new_site_has_a_directory, CROSS_GPU_DIR),
    (_a_directory_where_the_new_site_has_a_file, f"{CROSS_GPU_DIR}/index.html"),
    (_a_symlink_where_the_new_site_has_a_directory, CROSS_GPU_DIR),
    (_the_users_file_in_a_folder_the_new_site_makes_a_file, "index.json/mine (the new site has a file at index.json)"),
]


@pytest.mark.parametrize("make, named", COLLISIONS, ids=[make.__name__.strip("_") for make, _ in COLLISIONS])
def test_what_the_user_made_where_the_new_site_writes_is_refused_and_nothing_changes(
        no_gemm_site, two_gpu_results, npm_cache, tmp_path, make, named):
    html_dir = tmp_path / "html"
    shutil.copytree(no_gemm_site, html_dir)
    # Its page saying there are no GPU results goes, and out of its manifest: the user's things go there below.
    shutil.rmtree(html_dir / CROSS_GPU_DIR)
    manifest = (html_dir / SITE_MARKER).read_text().splitlines()
    (html_dir / SITE_MARKER).write_text("".join(f"{line}\n" for line in manifest
                                                if not line.startswith(f"{CROSS_GPU_DIR}/")))
    (tmp_path / "outside").mkdir()
    git_checkout(html_dir)
    (html_dir / "CNAME").write_text("gemm.example.org\n")
    make(html_dir, tmp_path / "outside")
    before = tree(tmp_path)
    with pytest.raises(PublishError, match=re.escape(named)) as refused:
        republish(two_gpu_results, npm_cache, html_dir)
    assert ".git" not in str(refused.value) and "CNAME" not in str(refused.value)  # only what is in the way
    after = tree(tmp_path)
    assert after == before


def test_a_marker_from_before_manifests_keeps_the_git_checkout(two_gpu_site, two_gpu_results, npm_cache, tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    (html_dir / SITE_MARKER).write_text(LEGACY_MARKER_TEXT)
    git_checkout(html_dir)
    (html_dir / "stale.html").write_text("from an earlier publish, or the user's: that marker cannot tell")
    git = {name: what for name, what in tree(html_dir).items() if name.startswith(".git/")}
    site = republish(two_gpu_results, npm_cache, html_dir)
    assert site.kept == [".git"]
    after = tree(html_dir)
    assert {name: what for name, what in after.items() if name.startswith(".git/")} == git
    assert not (html_dir / "stale.html").exists()  # replaced with the rest, as before markers were manifests
    assert (html_dir / SITE_MARKER).read_text() != LEGACY_MARKER_TEXT
    assert republish(two_gpu_results, npm_cache, html_dir).kept == [".git"]  # now by the manifest


def test_a_symlink_the_user_made_is_kept_as_a_link_and_its_target_is_untouched(two_gpu_site, two_gpu_results,
                                                                                npm_cache, tmp_path):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "deep").mkdir(parents=True)
    (elsewhere / "index.html").write_text("named like a file the site makes")
    (elsewhere / "deep" / "data.bin").write_bytes(bytes(range(256)))
    (html_dir / "latest").symlink_to("../elsewhere")  # relative: it means the same once the site is swapped in
    (html_dir / "graphs" / "outside").symlink_to(elsewhere)
    (html_dir / "vendor" / "gone").symlink_to(tmp_path / "no-such-thing")
    outside = tree(elsewhere)
    site = republish(two_gpu_results, npm_cache, html_dir)
    assert site.kept == ["graphs/outside", "latest", "vendor/gone"]
    assert os.readlink(html_dir / "latest") == "../elsewhere"
    assert os.readlink(html_dir / "graphs" / "outside") == str(elsewhere)
    assert os.readlink(html_dir / "vendor" / "gone") == str(tmp_path / "no-such-thing")
    assert (html_dir / "latest" / "deep" / "data.bin").read_bytes() == bytes(range(256))
    assert tree(elsewhere) == outside
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "html"]


def test_a_symlink_where_the_sites_own_folder_was_is_not_followed(two_gpu_site, two_gpu_results, npm_cache,
                                                                   tmp_path):
    # Followed, the link would make files outside the site look like the site's own, to be moved or replaced.
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    shutil.move(html_dir / CROSS_GPU_DIR, tmp_path / "page")
    (tmp_path / "page" / "mine.md").write_text("written where the link points")
    (html_dir / CROSS_GPU_DIR).symlink_to(tmp_path / "page")
    before = tree(tmp_path)
    with pytest.raises(PublishError, match=f"where the new site puts its own: {CROSS_GPU_DIR};"):
        republish(two_gpu_results, npm_cache, html_dir)
    assert tree(tmp_path) == before


def test_a_foreign_entry_that_cannot_be_moved_puts_back_the_ones_that_were(two_gpu_site, two_gpu_results, npm_cache,
                                                                            tmp_path, monkeypatch):
    html_dir = tmp_path / "html"
    shutil.copytree(two_gpu_site[1], html_dir)
    git_checkout(html_dir)
    (html_dir / "CNAME").write_text("gemm.example.org\n")
    (html_dir / "NOTES.md").write_text("cannot be moved, as a folder without write permission cannot")
    before = tree(tmp_path)
    rename = os.rename

    def refusing(source, destination):
        if Path(source) == html_dir / "NOTES.md":
            raise PermissionError(13, "Permission denied", str(source))
        rename(source, destination)

    monkeypatch.setattr(os, "rename", refusing)
    with pytest.raises(PublishError, match="could not move NOTES.md.*Permission denied.*nothing was changed"):
        republish(two_gpu_results, npm_cache, html_dir)
    assert tree(tmp_path) == before
