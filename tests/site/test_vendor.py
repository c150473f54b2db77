"""The site `asv publish` writes, made self-contained: vendoring its CDN libraries on a real publish output, from a
folder of npm tarballs or a registry; idempotence; refusals that leave the site as it was; the navbar link; the
room around the benchmark grid's lines; and the page rendered in headless Chromium with the internet cut off,
vendored (renders) and as asv wrote it (does not), and every tile of the grid, for a history whose figures never
move as for one whose figures do, showing its line inside the tile rather than on its border."""

import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import LAUNCH_METHOD

from sgemm.site import vendor
from sgemm.site.vendor import (CDN_ASSETS, PACKAGES, SUMMARY_MARGINS_SCRIPT, SiteError, add_nav_link,
                               add_summary_margins, vendor_assets)
from tools import site_screenshot as screenshot

REQUIRE_CHROMIUM = os.environ.get("SGEMM_REQUIRE_CHROMIUM") == "1"


SUITE = """
import os

BASE = {base}


class Gemm:
    params = [["naive", "tiled"], [1024, 2048]]
    param_names = ["kernel", "size"]
    unit = "TFLOP/s"

    def track_tflops(self, kernel, size):
        return float(os.environ["SYNTHETIC_GPU_SCALE"]) * (BASE + (2 if kernel == "tiled" else 1) + size / 4096)
"""
MACHINES = {"nvidia-h100-80gb-hbm3": ("NVIDIA H100 80GB HBM3", 1.0), "nvidia-h200": ("NVIDIA H200", 1.4)}
PARAMS = ["('naive', 1024)", "('naive', 2048)", "('tiled', 1024)", "('tiled', 2048)"]


def _unavailable(reason: str):
    """Skip, or fail where the browser test must run (SGEMM_REQUIRE_CHROMIUM=1)."""
    if REQUIRE_CHROMIUM:
        pytest.fail(f"{reason} (SGEMM_REQUIRE_CHROMIUM=1)")
    pytest.skip(reason)


def _asv_history(repo: Path, commits: list[dict[str, str]], machines: dict[str, tuple[str, dict[str, str]]]) -> Path:
    """What `asv publish` wrote for a history of a commit per entry of `commits` (the benchmark files it writes, by
    name), each run on every machine of `machines` (by name: its GPU, and what its runs add to the environment)."""
    (repo / "benchmarks").mkdir()
    (repo / "benchmarks" / "__init__.py").write_text("")
    (repo / "asv.conf.json").write_text(json.dumps({
        "version": 1, "project": "sgemm", "repo": ".", "branches": ["main"], "environment_type": "existing",
        "benchmark_dir": "benchmarks", "results_dir": "results", "html_dir": "html", "launch_method": LAUNCH_METHOD}))
    (repo / ".asv-machine.json").write_text(json.dumps({"version": 1, **{
        machine: {"machine": machine, "gpu": gpu, "os": "Linux", "arch": "x86_64", "cpu": "x", "num_cpu": "1",
                  "ram": "1"} for machine, (gpu, _) in machines.items()}}))
    env = {"HOME": str(repo), "PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def sh(*command, **extra):
        done = subprocess.run(command, cwd=repo, env={**env, **extra}, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip()

    sh("git", "init", "-q", "-b", "main")
    for number, files in enumerate(commits):
        for name, text in files.items():
            (repo / "benchmarks" / name).write_text(text)
        sh("git", "add", "-A")
        sh("git", "commit", "-qm", f"commit {number}")
        commit = sh("git", "rev-parse", "HEAD")
        for machine, (_, extra) in machines.items():
            sh(sys.executable, "-m", "asv", "run", "--python=same", "--machine", machine, "--set-commit-hash",
               commit, **extra)
    sh(sys.executable, "-m", "asv", "publish")
    return repo / "html"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """What `asv publish` wrote for three commits of a one-benchmark suite, each run on two GPU machines."""
    return _asv_history(tmp_path_factory.mktemp("asv-site"),
                        [{"bench_gemm.py": SUITE.format(base=base)} for base in (0, 0.5, 1)],
                        {machine: (gpu, {"SYNTHETIC_GPU_SCALE": str(scale)})
                         for machine, (gpu, scale) in MACHINES.items()})


# As a box without a GPU records the resource suite: three commits that compile alike, so that no figure moves; one
# track positive throughout, and two whose geometric mean over the kernels is 0 (a kernel without shared memory, none
# spilling). The comment is all that changes between the commits.
FLAT_SUITE = """
class Resources:
    params = [["naive", "tiled", "wgmma"], ["sm_80", "sm_90"]]
    param_names = ["kernel", "arch"]
    # commit {number}

    def track_registers(self, kernel, arch):
        return {{"naive": 32, "tiled": 64, "wgmma": 168}}[kernel]

    def track_shared_memory(self, kernel, arch):
        return 0 if kernel == "naive" else 8192

    def track_spill_stores(self, kernel, arch):
        return 0
"""
FLAT_TRACKS = {"track_registers": "positive", "track_shared_memory": "zero", "track_spill_stores": "zero"}


@pytest.fixture(scope="module")
def flat_published(tmp_path_factory):
    """What `asv publish` wrote for FLAT_SUITE's three commits, run on one machine with no GPU."""
    return _asv_history(tmp_path_factory.mktemp("asv-flat-site"),
                        [{"bench_resources.py": FLAT_SUITE.format(number=number)} for number in range(3)],
                        {"cpu-box": ("", {})})


@pytest.fixture
def site_dir(published, tmp_path):
    """A fresh copy of the published site."""
    return Path(shutil.copytree(published, tmp_path / "html"))


@pytest.fixture
def dead_registry():
    """A registry URL on a loopback port nothing listens on: every request is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def loaded(page: Path) -> dict[str, str | None]:
    """What each script and style sheet tag of a page loads, and its integrity attribute."""
    found = {}
    for tag in re.findall(r"<(?:script|link)\b[^>]*>", page.read_text()):
        url = re.search(r'\s(?:src|href)="([^"]*)"', tag)
        if url and (tag.startswith("<script") or 'rel="stylesheet"' in tag):
            integrity = re.search(r'\sintegrity="([^"]*)"', tag)
            found[url.group(1)] = integrity.group(1) if integrity else None
    return found


# --- vendoring ---------------------------------------------------------------------------------------------------


def test_every_cdn_file_of_a_published_site_is_vendored_and_verified(published, site_dir, npm_cache):
    before = loaded(published / "index.html")
    done = vendor_assets(site_dir, npm_cache)

    assert {item.url for item in done} == {asset.url for asset in CDN_ASSETS} == \
        {url for url in before if url.startswith("https://")}  # the table is exactly what asv 0.6.6 loads
    after = loaded(site_dir / "index.html")
    assert not [url for url in after if "//" in url]
    for item in done:
        data = (site_dir / item.path).read_bytes()
        assert vendor.sri_matches(after[item.path], data), item  # what a browser checks
        if item.integrity == "kept":
            assert after[item.path] == before[item.url]
    outcome = {item.package: item.integrity for item in done}
    # Byte for byte what the CDNs serve, so asv's own hashes vouch for them:
    assert {package for package, how in outcome.items() if how == "kept"} == \
        {"jquery", "flot-orderbars", "blueimp-md5", "bootstrap"}
    # Not the CDNs' bytes (flot unminified, stupidtable a later release): hashed anew.
    assert {package for package, how in outcome.items() if how == "replaced"} == {"flot", "stupid-table-plugin"}
    fonts = site_dir / "vendor" / "bootstrap-3.1.1" / "dist" / "fonts"
    css = (site_dir / "vendor" / "bootstrap-3.1.1" / "dist" / "css" / "bootstrap.min.css").read_text()
    for font in re.findall(r"url\(\.\./fonts/([^)?#]+)", css):
        assert (fonts / font).is_file(), font
    assert (site_dir / "vendor" / "jquery-3.3.1" / "LICENSE.txt").is_file()
    assert loaded(site_dir / "error.html") == loaded(published / "error.html")  # asv's other page loads nothing


def test_vendoring_again_changes_nothing_and_needs_no_registry(site_dir, npm_cache, dead_registry):
    vendor_assets(site_dir, npm_cache)
    once = snapshot(site_dir)
    assert vendor_assets(site_dir, npm_cache) == []
    assert vendor_assets(site_dir, registry=dead_registry) == []
    assert snapshot(site_dir) == once


def test_a_damaged_vendored_file_is_written_again(site_dir, npm_cache):
    vendor_assets(site_dir, npm_cache)
    jquery = site_dir / "vendor" / "jquery-3.3.1" / "dist" / "jquery.min.js"
    good = jquery.read_bytes()
    jquery.write_bytes(good[:-100])
    vendor_assets(site_dir, npm_cache)
    assert jquery.read_bytes() == good


def test_offline_with_no_cache_refuses_and_leaves_the_site_as_it_was(site_dir, tmp_path, dead_registry):
    before = snapshot(site_dir)
    with pytest.raises(SiteError) as refused:
        vendor_assets(site_dir, registry=dead_registry)
    message = str(refused.value)
    for package, version in PACKAGES:
        assert f"{package} {version}" in message
    assert "cache_dir" in message and "No page was changed" in message
    assert snapshot(site_dir) == before

    empty = tmp_path / "empty-cache"
    empty.mkdir()
    with pytest.raises(SiteError, match="not in a cache folder"):
        vendor_assets(site_dir, empty, registry=dead_registry)
    assert snapshot(site_dir) == before and not list(empty.iterdir())


def test_a_cache_missing_one_tarball_refuses_before_writing_anything(site_dir, npm_cache, tmp_path, dead_registry):
    partial = Path(shutil.copytree(npm_cache, tmp_path / "partial"))
    (partial / "bootstrap-3.1.1.tgz").unlink()
    before = snapshot(site_dir)
    with pytest.raises(SiteError, match=r"bootstrap 3\.1\.1: https://registry\.npmjs\.org/bootstrap/-/") as refused:
        vendor_assets(site_dir, partial, registry=dead_registry)
    assert "jquery 3.3.1" not in str(refused.value)  # it names what is missing, nothing else
    assert snapshot(site_dir) == before


def test_a_tampered_cached_tarball_is_refused(site_dir, npm_cache, tmp_path):
    cache = Path(shutil.copytree(npm_cache, tmp_path / "cache"))
    tarball = cache / "flot-0.8.3.tgz"
    data = bytearray(tarball.read_bytes())
    data[len(data) // 2] ^= 0xFF
    tarball.write_bytes(bytes(data))
    before = snapshot(site_dir)
    with pytest.raises(SiteError, match="not the npm registry's tarball of flot 0.8.3"):
        vendor_assets(site_dir, cache)
    assert snapshot(site_dir) == before


def _registry(folder: Path, cache: Path, integrity: dict[str, str] | None = None) -> Path:
    """A folder laid out like the npm registry (<package>/<version>, <package>/-/<tarball>), from a cache."""
    for (package, version), pinned in PACKAGES.items():
        (folder / package / "-").mkdir(parents=True)
        (folder / package / version).write_text(json.dumps({
            "name": package, "version": version,
            "dist": {"integrity": (integrity or {}).get(package, pinned),
                     "tarball": vendor.tarball_url(package, version)}}))
        name = vendor.tarball_name(package, version)
        shutil.copyfile(cache / name, folder / package / "-" / name)
    return folder


def test_fetching_from_the_registry_fills_the_cache(site_dir, npm_cache, tmp_path):
    cache = tmp_path / "new-cache"
    with screenshot.serve(_registry(tmp_path / "registry", npm_cache)) as (url, requests):
        vendor_assets(site_dir, cache, registry=url)
    assert sorted(p.name for p in cache.iterdir()) == sorted(vendor.tarball_name(*key) for key in PACKAGES)
    for tarball in cache.iterdir():
        assert tarball.read_bytes() == (npm_cache / tarball.name).read_bytes()
    assert {path for path, status in requests if status == 200} >= {"/jquery/3.3.1", "/jquery/-/jquery-3.3.1.tgz"}


def test_a_registry_publishing_another_integrity_is_refused(site_dir, npm_cache, tmp_path):
    wrong = {"jquery": vendor.sri(b"something else")}
    before = snapshot(site_dir)
    with screenshot.serve(_registry(tmp_path / "registry", npm_cache, wrong)) as (url, _):
        with pytest.raises(SiteError, match="now publishes integrity .* for jquery 3.3.1"):
            vendor_assets(site_dir, tmp_path / "cache", registry=url)
    assert snapshot(site_dir) == before


def test_a_cdn_file_missing_from_the_table_is_refused(site_dir, npm_cache):
    index = site_dir / "index.html"
    index.write_text(index.read_text().replace(
        "</head>", '<script src="https://cdn.example.org/chart.js"></script>\n</head>'))
    before = snapshot(site_dir)
    with pytest.raises(SiteError, match="index.html: https://cdn.example.org/chart.js"):
        vendor_assets(site_dir, npm_cache)
    assert snapshot(site_dir) == before


def test_a_page_in_a_subfolder_loads_the_vendored_files_relative_to_itself(site_dir, npm_cache):
    (site_dir / "gpus").mkdir()
    jquery = next(asset for asset in CDN_ASSETS if asset.package == "jquery")
    (site_dir / "gpus" / "index.html").write_text(f'<html><head><script src="{jquery.url}"></script></head></html>')
    vendor_assets(site_dir, npm_cache)
    assert loaded(site_dir / "gpus" / "index.html") == {"../vendor/jquery-3.3.1/dist/jquery.min.js": None}


def test_no_site_is_a_clear_error(tmp_path):
    with pytest.raises(SiteError, match="run `asv publish` first"):
        vendor_assets(tmp_path / "nothing")


def test_sri_matching_follows_the_strongest_algorithm():
    data = b"flot"
    assert vendor.sri_matches(f"{vendor.sri(data, 'sha256')} {vendor.sri(b'x', 'sha256')}", data)
    assert not vendor.sri_matches(f"{vendor.sri(data, 'sha256')} {vendor.sri(b'x', 'sha512')}", data)
    assert vendor.sri_matches("md5-whatever", data)


# --- pages as an HTML parser reads them ---------------------------------------------------------------------------

JQUERY = next(asset for asset in CDN_ASSETS if asset.package == "jquery")
JQUERY_LOCAL = vendor.vendored_path(JQUERY)
JQUERY_SRI = "sha256-FgpCb/KJQlLNfOu91ta32o/NMZxltwRo8QtmkMRdAu8="  # asv 0.6.6's; the npm file matches it
BOOTSTRAP_CSS = next(asset for asset in CDN_ASSETS if asset.path.endswith(".css"))
# Around the tag: CRLF line ends, a character of two UTF-8 bytes on the tag's own line, entities, odd spacing; all of
# it must come back byte for byte, and the tag's place in it be found from the parser's line and column.
BEFORE = '<!DOCTYPE html>\r\n<html>\r\n<head>\r\n  <title>A &amp; B</title>\r\n  <meta name="x" content="é"> '
AFTER = '\r\n</head>\r\n<body  class=x>\r\n<p>café &lt;ok&gt;</p>\r\n</body>\r\n</html>\r\n'


class _StartTags(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.found = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))

    handle_startendtag = handle_starttag


def _vendor_one_page(root: Path, text: str, cache: Path) -> tuple[str, list[vendor.Vendored]]:
    root.mkdir()
    (root / "index.html").write_bytes(text.encode())
    done = vendor_assets(root, cache)
    return (root / "index.html").read_bytes().decode(), done


@pytest.mark.parametrize("tag, end, attributes", [
    pytest.param(f"<script onerror='js_load_failure()' crossorigin=anonymous integrity='{JQUERY_SRI}' "
                 f"src='{JQUERY.url}'>", "</script>",
                 [("onerror", "js_load_failure()"), ("crossorigin", "anonymous"), ("integrity", JQUERY_SRI),
                  ("src", JQUERY_LOCAL)], id="single-quotes-src-last"),
    pytest.param(f'<SCRIPT SRC="{JQUERY.url}" Async>', "</SCRIPT>", [("src", JQUERY_LOCAL), ("async", None)],
                 id="upper-case"),
    pytest.param(f"<link href='{BOOTSTRAP_CSS.url}' REL=stylesheet />", "",
                 [("href", vendor.vendored_path(BOOTSTRAP_CSS)), ("rel", "stylesheet")], id="self-closing-link"),
    pytest.param(f'<script\r\n    crossorigin="anonymous"\r\n    src = "{JQUERY.url}"\r\n'
                 f'    integrity="{JQUERY_SRI}"\r\n>', "</script>",
                 [("crossorigin", "anonymous"), ("src", JQUERY_LOCAL), ("integrity", JQUERY_SRI)], id="several-lines"),
    # A ">" in a quoted value does not end the tag: the regular expressions stopped there and never saw the src.
    pytest.param(f'<script onerror="window.jQuery > 0 || fail()" src="{JQUERY.url}">', "</script>",
                 [("onerror", "window.jQuery > 0 || fail()"), ("src", JQUERY_LOCAL)], id="greater-than-in-a-value"),
    # " src=" inside another attribute's value is not the src: the regular expressions read it as one, and
    # refused the page for loading https://cdn.example.org/old.js.
    pytest.param(f'<script title="was: src=https://cdn.example.org/old.js" src="{JQUERY.url}">', "</script>",
                 [("title", "was: src=https://cdn.example.org/old.js"), ("src", JQUERY_LOCAL)],
                 id="src-inside-another-value"),
])
def test_a_tag_written_any_way_html_allows_is_vendored_and_nothing_else_changes(tmp_path, npm_cache, tag, end,
                                                                                  attributes):
    text, done = _vendor_one_page(tmp_path / "site", BEFORE + tag + end + AFTER, npm_cache)
    assert [item.path for item in done] == [value for name, value in attributes if name in ("src", "href")]
    assert text.startswith(BEFORE) and text.endswith(end + AFTER), text
    rewritten = text[len(BEFORE):len(text) - len(end + AFTER)]
    assert _StartTags(rewritten).found == [(tag[1:].split()[0].lower(), attributes)]
    assert rewritten.startswith(tag[:len(tag.split()[0])])  # the tag name as written
    assert rewritten.endswith("/>") == tag.endswith("/>")
    assert vendor_assets(tmp_path / "site", npm_cache) == []  # and it reads its own output as vendored


def test_urls_in_comments_and_in_inline_scripts_are_not_tags(tmp_path, npm_cache):
    text = (f'<html><head>\n'
            f'<!-- asv once had <script src="{JQUERY.url}"></script>\n'
            f'     and <script src="https://cdn.example.org/old.js"></script> -->\n'
            f'<script>\n'
            f'  var fallback = \'<script src="{JQUERY.url}"><\\/script>\';\n'
            f'  var sheet = "<link rel=\'stylesheet\' href=\'https://cdn.example.org/x.css\'>";\n'
            f'</script>\n'
            f'<style>/* <link rel="stylesheet" href="https://cdn.example.org/y.css"> */</style>\n'
            f'<script src="{JQUERY.url}"></script>\n'
            f'</head></html>\n')
    tail = f'<script src="{JQUERY.url}"></script>\n</head></html>\n'
    vendored, done = _vendor_one_page(tmp_path / "site", text, npm_cache)
    assert [item.url for item in done] == [JQUERY.url]
    assert vendored == text[:-len(tail)] + f'<script src="{JQUERY_LOCAL}"></script>\n</head></html>\n'


def test_vendoring_asvs_page_changes_nothing_but_urls_and_hashes(published, site_dir, npm_cache):
    """The tags written anew come out as asv writes them, so that all that changes are the values replaced."""
    before = (published / "index.html").read_text()
    integrity = loaded(published / "index.html")
    done = vendor_assets(site_dir, npm_cache)
    expected = before
    for item in done:
        expected = expected.replace(f'="{item.url}"', f'="{item.path}"', 1)
        if item.integrity == "replaced":
            expected = expected.replace(f'integrity="{integrity[item.url]}"',
                                        f'integrity="{vendor.sri((site_dir / item.path).read_bytes())}"', 1)
    assert (site_dir / "index.html").read_text() == expected
    assert expected != before


# --- navbar ------------------------------------------------------------------------------------------------------


def test_a_nav_link_is_added_once_after_asv_pages(site_dir):
    index = site_dir / "index.html"
    assert add_nav_link(site_dir, "gpus/index.html", "GPUs") is True
    once = index.read_bytes()
    assert add_nav_link(site_dir, "gpus/index.html", "GPUs") is False
    assert index.read_bytes() == once
    text = once.decode()
    navbar = text[text.index('<ul class="nav navbar-nav navbar-left">'):text.index("</ul>")]
    assert navbar.count('href="gpus/index.html"') == 1
    assert navbar.index('href="#/regressions"') < navbar.index('href="gpus/index.html"') < \
        navbar.index('id="nav-li-graphdisplay"')

    assert add_nav_link(site_dir, "gpus/index.html", "GPUs & clocks") is True  # relabelled, not repeated
    text = index.read_text()
    assert text.count('href="gpus/index.html"') == 1 and ">GPUs &amp; clocks</a>" in text
    assert add_nav_link(site_dir, "kernels.html", "Kernels") is True
    assert index.read_text().count('class="sgemm-nav-link"') == 2


def test_a_nav_link_needs_asv_navbar(tmp_path):
    (tmp_path / "index.html").write_text("<html><body>no navbar</body></html>")
    with pytest.raises(SiteError, match="no asv navbar"):
        add_nav_link(tmp_path, "gpus/index.html", "GPUs")


GPUS_ITEM = '<li class="sgemm-nav-link"><a href="gpus/index.html">GPUs</a></li>'


def test_a_nav_link_finds_the_navbar_however_its_tag_is_written(tmp_path):
    title = '<li id="nav-li-graphdisplay"><span id="title"></span></li>'
    text = ('<html><body>\n'
            '<!-- <ul class="nav navbar-nav navbar-left"><li>an old navbar</li></ul> -->\n'
            '<nav class="navbar navbar-left">\n'
            "  <UL id=nav class='navbar-left nav\n      navbar-nav'>\n"
            '    <li id="nav-li-summarylist"><a href="#/summarylist">Benchmark list</a></li>\n'
            f'    {title}\n'
            '  </UL>\n'
            '</nav>\n'
            '</body></html>\n')
    (tmp_path / "index.html").write_text(text)
    assert add_nav_link(tmp_path, "gpus/index.html", "GPUs") is True
    assert (tmp_path / "index.html").read_text() == text.replace(title, f"{GPUS_ITEM}\n        {title}")
    assert add_nav_link(tmp_path, "gpus/index.html", "GPUs") is False


def test_a_nav_link_goes_into_the_navbar_not_into_a_menu_nested_in_it(tmp_path):
    text = ('<ul class="nav navbar-nav navbar-left">\n'
            '  <li class="dropdown"><a href="#">More</a>\n'
            '    <ul class="dropdown-menu"><li><a href="#/a">A</a></li></ul>\n'
            '  </li>\n'
            '</ul>\n')
    (tmp_path / "index.html").write_text(text)
    assert add_nav_link(tmp_path, "gpus/index.html", "GPUs") is True
    assert (tmp_path / "index.html").read_text() == \
        text.replace("  </li>\n</ul>", f"  </li>\n        {GPUS_ITEM}\n      </ul>")


def test_an_existing_nav_link_written_otherwise_is_updated_not_repeated(tmp_path):
    old = "<li class='sgemm-nav-link'><a class=x href='gpus/index.html'>GPU list</a></li>"
    text = f'<ul class="nav navbar-nav navbar-left">\n  {old}\n  <li id="nav-li-graphdisplay"></li>\n</ul>\n'
    (tmp_path / "index.html").write_text(text)
    assert add_nav_link(tmp_path, "gpus/index.html", "GPUs") is True
    assert (tmp_path / "index.html").read_text() == text.replace(old, GPUS_ITEM)


def test_a_navbar_only_in_a_comment_is_no_navbar(tmp_path):
    text = '<html><body><!-- <ul class="nav navbar-nav navbar-left"></ul> --></body></html>'
    (tmp_path / "index.html").write_text(text)
    with pytest.raises(SiteError, match="no asv navbar"):
        add_nav_link(tmp_path, "gpus/index.html", "GPUs")
    assert (tmp_path / "index.html").read_text() == text


# --- the benchmark grid's tiles -------------------------------------------------------------------------------------


def scripts_in_head(index: Path) -> list[str]:
    text = index.read_text()
    return re.findall(r'<script\b[^>]*\ssrc="([^"]*)"', text[:text.index("</head>")])


def test_the_grid_margins_are_loaded_once_after_every_other_script(site_dir, npm_cache):
    index = site_dir / "index.html"
    assert add_summary_margins(site_dir) is True
    script = (site_dir / SUMMARY_MARGINS_SCRIPT).read_text()
    assert "plot.hooks.processOffset" in script and 'hasClass("benchmark-plot")' in script
    assert scripts_in_head(index)[-1] == SUMMARY_MARGINS_SCRIPT  # flot and asv's own scripts load first
    assert scripts_in_head(index).count(SUMMARY_MARGINS_SCRIPT) == 1
    assert f'    <script src="{SUMMARY_MARGINS_SCRIPT}"></script>\n  </head>' in index.read_text()

    once = snapshot(site_dir)
    assert add_summary_margins(site_dir) is False
    assert snapshot(site_dir) == once
    vendor_assets(site_dir, npm_cache)  # a local script: left as it is
    assert scripts_in_head(index).count(SUMMARY_MARGINS_SCRIPT) == 1
    assert add_summary_margins(site_dir) is False

    (site_dir / SUMMARY_MARGINS_SCRIPT).write_text("// edited")
    text = index.read_text()
    assert add_summary_margins(site_dir) is True  # the script written again, the tag not added twice
    assert (site_dir / SUMMARY_MARGINS_SCRIPT).read_text() == script and index.read_text() == text


def test_the_grid_margins_need_a_page_with_a_head(tmp_path):
    with pytest.raises(SiteError, match="run `asv publish` first"):
        add_summary_margins(tmp_path)
    (tmp_path / "index.html").write_text("<html><body>no head</body></html>")
    with pytest.raises(SiteError, match="no </head>"):
        add_summary_margins(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["index.html"]


# --- in a browser, with the internet cut off -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def chromium():
    found = screenshot.find_chromium()
    if found is None:
        _unavailable("needs Chromium for the browser test (Debian: apt-get install chromium)")
    return found


def test_the_vendored_site_renders_offline_and_asvs_own_does_not(published, site_dir, npm_cache, chromium,
                                                                  tmp_path):
    add_summary_margins(site_dir)
    vendor_assets(site_dir, npm_cache)
    add_nav_link(site_dir, "gpus/index.html", "GPUs")
    vendored_files = {f"/{path.relative_to(site_dir).as_posix()}" for path in (site_dir / "vendor").rglob("*.js")}
    vendored_files |= {f"/{path.relative_to(site_dir).as_posix()}" for path in (site_dir / "vendor").rglob("*.css")}

    with screenshot.serve(site_dir) as (url, requests):
        listing = screenshot.render(url + "index.html#/summarylist", tmp_path / "vendored-list.png",
                                    chromium=chromium)
        graph = screenshot.render(url + "index.html#bench_gemm.Gemm.track_tflops", tmp_path / "vendored-graph.png",
                                  chromium=chromium)
        regressions = screenshot.render(url + "index.html#/regressions", chromium=chromium)
    print(f"\nscreenshots: {tmp_path / 'vendored-list.png'} {tmp_path / 'vendored-graph.png'}")
    assert "<title>airspeed velocity of an unladen sgemm</title>" in listing  # asv.js read index.json
    for dom in (listing, graph, regressions):
        assert "failed to load" not in dom  # asv's error.html, where a library's script failed
        assert re.search(r'id="error-message">\s*</div>', dom), "asv reported an error"
        assert 'href="gpus/index.html">GPUs</a>' in dom
    shown = re.sub(r"<[^>]+>", "", listing)
    for params in PARAMS:  # the benchmark list, filled in by asv's scripts from the results
        assert f"bench_gemm.Gemm.track_tflops {params}" in shown
    assert "2.25 TFLOP/s" in shown  # the H100's last naive 1024 result: 1.0 * (1 + 1 + 1024 / 4096)
    assert "sorting-asc" in listing  # stupidtable sorted it
    for machine, (gpu, _) in MACHINES.items():  # the graph page's machine and GPU facets
        assert f">{machine}<" in graph and f">{gpu}<" in graph
    assert 'class="flot-base"' in graph  # flot drew the graph
    # Rising TFLOP/s reads as a regression to asv; its table is sorted by factor, descending, through stupidtable
    # and asv's own sort function for the column.
    assert 'class="sorting-desc desc">Factor' in regressions
    factors = [float(f) for f in re.findall(r">(\d+\.\d+)x<", regressions)]
    assert len(factors) == 16 and factors == sorted(factors, reverse=True) and factors != sorted(factors)
    assert all(status == 200 for _, status in requests), [r for r in requests if r[1] != 200]
    assert vendored_files <= {path for path, _ in requests}

    # The same site as asv wrote it, under the same cut-off network: its CDN scripts fail, asv shows its error page.
    with screenshot.serve(published) as (url, _):
        failed = screenshot.render(url + "index.html#/summarylist", tmp_path / "unvendored-list.png",
                                   chromium=chromium)
    print(f"unvendored: {tmp_path / 'unvendored-list.png'}")
    assert "<title>airspeed velocity error</title>" in failed
    assert "dependencies of airspeed velocity failed to load" in failed
    assert "bench_gemm" not in failed

    # The grid's one tile: TFLOP/s that rise with each commit draw a line that climbs across the tile, its top clear
    # of the tile's border.
    rows = drawn_tiles(site_dir, chromium, tmp_path / "vendored-grid.png")["bench_gemm.Gemm.track_tflops"]
    drawn = line_rows(rows)
    assert drawn and max(drawn) - min(drawn) > len(rows) / 4, drawn
    assert [y for y in range(1, PROBE_EDGE) if rows[y]] == [], rows


# Once every tile of asv's grid has drawn, what each tile's canvas holds: the number of drawn pixels in each row,
# leaving out PROBE_EDGE columns at either side (where the tile's border runs down). Written into the page, as JSON,
# for --dump-dom to carry out.
PROBE_EDGE = 4
TILE_PROBE = """
(function () {
    var tries = 0;
    function probe() {
        var tiles = $(".benchmark-plot");
        if (tiles.length === 0 || tiles.find("canvas.flot-base").length < tiles.length) {
            if (++tries < 100) {
                setTimeout(probe, 100);
            }
            return;
        }
        var found = {};
        tiles.each(function () {
            var canvas = $(this).find("canvas.flot-base")[0];
            var pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
            var rows = [];
            for (var y = 0; y < canvas.height; y++) {
                var drawn = 0;
                for (var x = EDGE; x < canvas.width - EDGE; x++) {
                    drawn += pixels[4 * (y * canvas.width + x) + 3] > 0 ? 1 : 0;
                }
                rows.push(drawn);
            }
            found[this.id.replace("summarygrid-", "")] = rows;
        });
        $('<pre id="tile-probe"></pre>').text(JSON.stringify(found)).appendTo("body");
    }
    $(probe);
})();
""".replace("EDGE", str(PROBE_EDGE))


def drawn_tiles(site_dir: Path, chromium: str, png: Path) -> dict[str, list[int]]:
    """The front page of the site rendered: TILE_PROBE's rows of every tile of the grid, by benchmark."""
    (site_dir / "tile-probe.js").write_text(TILE_PROBE)
    index = site_dir / "index.html"
    index.write_text(index.read_text().replace("</head>", '<script src="tile-probe.js"></script></head>', 1))
    with screenshot.serve(site_dir) as (url, _):
        dom = screenshot.render(url + "index.html", png, chromium=chromium)
    print(f"\ngrid: {png}")
    found = re.search(r'<pre id="tile-probe">([^<]*)</pre>', dom)
    assert found, "the grid's tiles did not all draw"
    return json.loads(html.unescape(found.group(1)))


def line_rows(rows: list[int]) -> list[int]:
    """The rows of a tile where a line is drawn away from the tile's border: its first and last PROBE_EDGE rows
    (the border, and a line drawn along it) aside."""
    return [y for y in range(PROBE_EDGE, len(rows) - PROBE_EDGE) if rows[y] > 0]


def test_every_tile_of_a_history_whose_figures_do_not_move_shows_its_line(flat_published, npm_cache, chromium,
                                                                         tmp_path):
    asvs = Path(shutil.copytree(flat_published, tmp_path / "asv"))
    vendor_assets(asvs, npm_cache)
    ours = Path(shutil.copytree(flat_published, tmp_path / "ours"))
    add_summary_margins(ours)
    vendor_assets(ours, npm_cache)
    names = {f"bench_resources.Resources.{track}" for track in FLAT_TRACKS}

    # As asv draws them, each flat line lies on its tile's border, and the tiles look blank.
    tiles = drawn_tiles(asvs, chromium, tmp_path / "asv-grid.png")
    assert set(tiles) == names
    assert {name: line_rows(rows) for name, rows in tiles.items()} == {name: [] for name in names}

    tiles = drawn_tiles(ours, chromium, tmp_path / "grid.png")
    assert set(tiles) == names
    for track, kind in FLAT_TRACKS.items():
        rows = tiles[f"bench_resources.Resources.{track}"]
        drawn = line_rows(rows)
        width = max(rows)  # a row of the border
        assert drawn and max(rows[y] for y in drawn) > width * 0.9, (track, rows)  # a line across the tile
        assert max(drawn) - min(drawn) <= 4, (track, drawn)  # flat: a few rows of one line
        # Room below 0 and above the largest value: a positive flat line runs near the top, a line at 0 near the
        # bottom, both clear of the border.
        if kind == "positive":
            assert min(drawn) > PROBE_EDGE and max(drawn) < len(rows) / 4, (track, drawn)
        else:
            assert min(drawn) > len(rows) * 3 / 4 and max(drawn) < len(rows) - 1 - PROBE_EDGE, (track, drawn)


def test_the_screenshot_script_serves_a_site_folder(site_dir, npm_cache, chromium, tmp_path, capsys):
    vendor_assets(site_dir, npm_cache)
    out, dom = tmp_path / "grid.png", tmp_path / "grid.html"
    assert screenshot.main([str(site_dir), str(out), "--width", "800", "--height", "600", "--dom", str(dom),
                            "--chromium", chromium]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert int.from_bytes(out.read_bytes()[16:20], "big") == 800  # the PNG header's width
    assert "Gemm.track_tflops" in dom.read_text()
    assert capsys.readouterr().out.strip() == str(out)
