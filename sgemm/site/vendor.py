"""Post-process the static site that `asv publish` writes: make it self-contained, and link other pages from it.

asv 0.6.6's index.html loads jQuery, flot and its plugins, stupidtable, blueimp-md5 and bootstrap (script, style
sheet, and through the style sheet bootstrap's glyphicon fonts) from three CDNs; when any of them fails to load, the
page sends the reader to error.html. `vendor_assets` fetches the same libraries from the npm registry (or from a
folder of their tarballs, for machines without internet), checks each tarball against the integrity the registry
publishes for it, copies the files the page needs to `vendor/<package>-<version>/` beside the HTML, and points the
HTML there. The site then needs nothing but the HTTP server that serves it.

Pages are read with the standard library's HTML parser (`add_nav_link` finds asv's navbar through it too): as for a
browser, a URL in a comment or in an inline script's text is no tag, and a tag's attributes may come in any order and
quoting. Only the tags rewritten change, each written anew from its attributes (double-quoted, in their order); the
rest of a page stays byte for byte as it was.

`add_summary_margins` gives the tiles of asv's benchmark grid room above and below their lines, so that a line that
does not move, or a line at 0, is drawn inside its tile rather than on the tile's border.

`asv publish` deletes and rewrites its output directory, so run this after every publish.
"""

from __future__ import annotations

import base64
import hashlib
import html
import http.client
import io
import json
import os
import posixpath
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ..atomic import write_atomically

__all__ = ["CDN_ASSETS", "NPM_REGISTRY", "PACKAGES", "SUMMARY_MARGINS_SCRIPT", "Asset", "SiteError", "Vendored",
           "add_nav_link", "add_summary_margins", "drop_nav_item", "drop_unmeasured_list_rows", "fill_cache", "sri",
           "sri_matches", "tarball_name", "tarball_url", "vendor_assets", "vendored_path"]

NPM_REGISTRY = "https://registry.npmjs.org"
VENDOR_DIR = "vendor"


@dataclass(frozen=True)
class Asset:
    """One file a page loads from a CDN, and where the same file lives in an npm package's tarball."""

    url: str  # as it appears in the HTML
    package: str  # npm package name
    version: str
    path: str  # inside the tarball, below its top folder ("package/")
    also: tuple[str, ...] = ()  # files of the same package that `path` loads by relative URL
    note: str = ""  # why the vendored file is not the CDN's, where it is not


# The registry's dist.integrity of each tarball (https://registry.npmjs.org/<package>/<version>), pinned: a tarball
# from the network must match both this and what the registry says today, one from a cache folder must match this.
PACKAGES: dict[tuple[str, str], str] = {
    ("jquery", "3.3.1"):
        "sha512-Ubldcmxp5np52/ENotGxlLe6aGMvmF4R8S6tZjsP6Knsaxd/xp3Zrh50cG93lR6nPXyUFwzN3ZSOQI0wRJNdGg==",
    ("flot", "0.8.3"):
        "sha512-xg2otcTJDvS+ERK+my4wxG/ASq90QURXtoM4LhacCq0jQW2jbyjdttbRNqU2cPykrpMvJ6b2uSp6SAgYAzj9tQ==",
    ("flot-orderbars", "1.0.0"):
        "sha512-Jv51fvzevUjNXEeozpwEKfPjhiZhfiJddv0WHjduUTCmSF+7T5K7C9c9Y1wIVmUhDBv5fLMjgbwKecT0GIKPZA==",
    ("stupid-table-plugin", "1.1.3"):
        "sha512-2Vk7XouQPxUQPRe9w0Fu7ZZ8kHLK7rDoLMsCgtKxRNJ7f4dSOGvW9CkHsq5wD6QsaEnWoyLBYH3xOEsrK3yWBg==",
    ("blueimp-md5", "2.19.0"):
        "sha512-DRQrD6gJyy8FbiE4s+bDoXS9hiW3Vbx5uCdwvcCf3zLHL+Iv7LtGHLpr+GZV8rHG8tK766FGYBwRbu8pELTt+w==",
    ("bootstrap", "3.1.1"):
        "sha512-TAzqS8E/ISpVHP29gYhy+1NSV+FJwApDVQhDfgLYsIuUDJiqJzH2DfORN5tiu+Ie2iBLrzEG34t4Rf465cigqg==",
}

_CDNJS = "https://cdnjs.cloudflare.com/ajax/libs"
_FLOT_MINIFIED = "cdnjs minified flot itself; the npm package has only the readable source of the same release"
_GLYPHICONS = tuple(f"dist/fonts/glyphicons-halflings-regular.{ext}" for ext in ("eot", "svg", "ttf", "woff"))

# Every CDN file asv 0.6.6's pages load. A page that loads a CDN file missing here is refused, never half-vendored.
CDN_ASSETS: tuple[Asset, ...] = (
    Asset("https://code.jquery.com/jquery-3.3.1.min.js", "jquery", "3.3.1", "dist/jquery.min.js"),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.min.js", "flot", "0.8.3", "jquery.flot.js", note=_FLOT_MINIFIED),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.time.min.js", "flot", "0.8.3", "jquery.flot.time.js",
          note=_FLOT_MINIFIED),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.selection.min.js", "flot", "0.8.3", "jquery.flot.selection.js",
          note=_FLOT_MINIFIED),
    Asset(f"{_CDNJS}/flot/0.8.3/jquery.flot.categories.min.js", "flot", "0.8.3", "jquery.flot.categories.js",
          note=_FLOT_MINIFIED),
    Asset("https://cdn.jsdelivr.net/npm/flot-orderbars@1.0.0/js/jquery.flot.orderBars.js", "flot-orderbars", "1.0.0",
          "js/jquery.flot.orderBars.js"),
    Asset(f"{_CDNJS}/stupidtable/1.0.1/stupidtable.min.js", "stupid-table-plugin", "1.1.3", "stupidtable.min.js",
          note="the npm registry has no 1.0.1 of this plugin, only 1.1.3, which keeps everything asv calls: "
               "$.fn.stupidtable(sortFns), $th.stupidsort(direction) and the aftertablesort event"),
    Asset(f"{_CDNJS}/blueimp-md5/2.19.0/js/md5.min.js", "blueimp-md5", "2.19.0", "js/md5.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/js/bootstrap.min.js", "bootstrap", "3.1.1",
          "dist/js/bootstrap.min.js"),
    Asset("https://cdn.jsdelivr.net/npm/bootstrap@3.1.1/dist/css/bootstrap.min.css", "bootstrap", "3.1.1",
          "dist/css/bootstrap.min.css", also=_GLYPHICONS),
)

_LICENSE_FILE = re.compile(r"(?i)(licen[cs]e|copying)(\.[a-z]+)?")


class SiteError(RuntimeError):
    """The site cannot be processed as asked; the message says why and what to do. No HTML was changed."""


@dataclass(frozen=True)
class Vendored:
    """A tag that now loads a vendored file instead of a CDN's."""

    page: str  # the HTML file, relative to the site's root
    url: str  # what it loaded before
    path: str  # what it loads now, relative to the site's root
    package: str
    version: str
    # "kept": the CDN's hash verifies the vendored file; "replaced": it now holds the vendored file's own hash;
    # "none": the tag had no integrity attribute.
    integrity: str


def vendored_path(asset: Asset, path: str | None = None) -> str:
    """Where `path` (by default the asset's own file) of the asset's package lies, relative to the site's root."""
    return posixpath.join(VENDOR_DIR, f"{asset.package}-{asset.version}", path or asset.path)


def tarball_name(package: str, version: str) -> str:
    """The file name npm gives a package's tarball (a scoped package's name loses its scope)."""
    return f"{package.rsplit('/', 1)[-1]}-{version}.tgz"


def tarball_url(package: str, version: str, registry: str = NPM_REGISTRY) -> str:
    return f"{registry.rstrip('/')}/{package}/-/{tarball_name(package, version)}"


# --- Subresource integrity -------------------------------------------------------------------------------------

_SRI_ALGORITHMS = {"sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


def sri(data: bytes, algorithm: str = "sha512") -> str:
    """The subresource-integrity string of `data` (also npm's dist.integrity format)."""
    return f"{algorithm}-{base64.b64encode(_SRI_ALGORITHMS[algorithm](data).digest()).decode()}"


def sri_matches(integrity: str, data: bytes) -> bool:
    """Whether a browser would accept `data` under this integrity attribute: among the hashes in the strongest
    algorithm the attribute names, one must match. An attribute with no hash it knows accepts anything."""
    hashes: dict[str, set[str]] = {}
    for token in integrity.split():
        algorithm, _, digest = token.partition("-")
        if algorithm in _SRI_ALGORITHMS and digest:
            hashes.setdefault(algorithm, set()).add(digest.split("?", 1)[0])
    if not hashes:
        return True
    strongest = max(hashes, key=list(_SRI_ALGORITHMS).index)
    return sri(data, strongest).partition("-")[2] in hashes[strongest]


# --- Reading and editing tags ----------------------------------------------------------------------------------

# Link relations through which a page loads what the link points at (a feed or a canonical link loads nothing).
_LOADING_RELS = {"stylesheet", "icon", "preload", "modulepreload", "prefetch", "manifest"}


@dataclass(frozen=True)
class _Tag:
    """A start or end tag, where the page's text has it: `text[start:end]` is the tag as written."""

    name: str  # lower case
    start: int
    end: int
    attributes: tuple[tuple[str, str | None], ...] = ()  # names in lower case, values unescaped, in page order
    closing: bool = False  # an end tag
    self_closing: bool = False

    def get(self, name: str) -> str | None:
        # A browser keeps the first of repeated attributes and drops the rest.
        return next((value for key, value in self.attributes if key == name), None)

    def classes(self) -> set[str]:
        return set((self.get("class") or "").split())


class _TagReader(HTMLParser):
    """Every tag of a page, with where it lies. The parser reads comments as comments and a script's or a style
    sheet's content as text, so that nothing there is taken for a tag."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.text = text
        # The parser tells where a tag starts as a line and a column; these turn that into an index into the text.
        # It counts lines by "\n" alone, so these must too (str.splitlines would also split at "\r" and others).
        self.line_starts = [0]
        while (newline := text.find("\n", self.line_starts[-1])) >= 0:
            self.line_starts.append(newline + 1)
        self.tags: list[_Tag] = []
        self.feed(text)
        self.close()

    def _here(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def _start_tag(self, name: str, attributes: list[tuple[str, str | None]], self_closing: bool) -> None:
        start = self._here()
        end = start + len(self.get_starttag_text())
        assert self.text[start:end] == self.get_starttag_text(), (start, self.get_starttag_text())
        self.tags.append(_Tag(name, start, end, tuple(attributes), self_closing=self_closing))

    def handle_starttag(self, tag, attrs):
        self._start_tag(tag, attrs, False)

    def handle_startendtag(self, tag, attrs):
        self._start_tag(tag, attrs, True)

    def handle_endtag(self, tag):
        start = self._here()
        # The parser ends an end tag at its first ">", and reports one only once it has that ">".
        self.tags.append(_Tag(tag, start, self.text.index(">", start) + 1, closing=True))


def _tags(text: str) -> list[_Tag]:
    return _TagReader(text).tags


def _quoted(value: str) -> str:
    # Inside double quotes only "&" and '"' can end or change a value; escaping no more leaves the rest as it reads.
    return '"' + value.replace("&", "&amp;").replace('"', "&quot;") + '"'


def _rewritten(tag: _Tag, text: str, values: dict[str, str]) -> str:
    """The start tag `tag` of `text`, written anew with `values` for those attributes: the others keep their values
    and their order, the tag name keeps its case, and a self-closing tag stays self-closing."""
    parts = [text[tag.start + 1:tag.start + 1 + len(tag.name)]]
    pending = dict(values)
    for name, value in tag.attributes:
        value = pending.pop(name, value)
        parts.append(name if value is None else f"{name}={_quoted(value)}")
    assert not pending, f"{tag} has no {', '.join(pending)} to set"
    return "<" + " ".join(parts) + ("/>" if tag.self_closing else ">")


@dataclass(frozen=True)
class _Resource:
    """A script or link tag through which a page loads a file."""

    tag: _Tag
    attribute: str  # the one holding the URL: "src" or "href"
    url: str


def _resources(text: str) -> list[_Resource]:
    found = []
    for tag in _tags(text):
        if tag.closing:
            continue
        if tag.name == "script":
            attribute = "src"
        elif tag.name == "link" and set((tag.get("rel") or "").lower().split()) & _LOADING_RELS:
            attribute = "href"
        else:
            continue
        url = tag.get(attribute)
        if url:
            found.append(_Resource(tag, attribute, url))
    return found


def _is_external(url: str) -> bool:
    return url.startswith("//") or urllib.parse.urlsplit(url).scheme.lower() in {"http", "https"}


# --- Tarballs --------------------------------------------------------------------------------------------------


class _Offline(Exception):
    pass


def _download(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise SiteError(f"{url}: the registry answered {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise _Offline(f"{url}: {getattr(exc, 'reason', exc)}") from exc


def _fetch(package: str, version: str, cache_dir: Path | None, registry: str, timeout: float) -> bytes:
    """The package's tarball, from the cache folder when it holds it, else from the registry (then cached)."""
    pinned = PACKAGES[(package, version)]
    name = tarball_name(package, version)
    if cache_dir is not None and (cache_dir / name).is_file():
        data = (cache_dir / name).read_bytes()
        if not sri_matches(pinned, data):
            raise SiteError(f"{cache_dir / name}: not the npm registry's tarball of {package} {version} (its "
                            f"integrity is {sri(data)}, the registry's is {pinned}); delete the file, then fetch it "
                            f"again from {tarball_url(package, version)}")
        return data
    metadata_url = f"{registry.rstrip('/')}/{package}/{version}"
    try:
        published = json.loads(_download(metadata_url, timeout))["dist"]["integrity"]
    except (ValueError, KeyError, TypeError) as exc:
        raise SiteError(f"{metadata_url}: not the registry's description of {package} {version} ({exc})") from exc
    if published != pinned:
        raise SiteError(f"{metadata_url}: the registry now publishes integrity {published} for {package} {version}, "
                        f"not the {pinned} pinned in sgemm/site/vendor.py; find out why before trusting either")
    data = _download(tarball_url(package, version, registry), timeout)
    if not sri_matches(pinned, data):
        raise SiteError(f"{tarball_url(package, version, registry)}: the download does not match the registry's "
                        f"integrity {pinned} for {package} {version}")
    if cache_dir is not None:
        write_atomically(cache_dir / name, data)
    return data


def _fetch_all(needed: list[tuple[str, str]], cache_dir: Path | None, registry: str,
               timeout: float) -> dict[tuple[str, str], bytes]:
    """Every tarball in `needed`, or a SiteError naming each package that could not be had and what to do."""
    tarballs, missing, reason = {}, [], None
    for package, version in needed:
        if reason is not None and not (cache_dir and (cache_dir / tarball_name(package, version)).is_file()):
            missing.append((package, version))  # the registry is out of reach: do not wait for it again
            continue
        try:
            tarballs[(package, version)] = _fetch(package, version, cache_dir, registry, timeout)
        except _Offline as exc:
            reason = str(exc)
            missing.append((package, version))
    if missing:
        lines = "\n".join(f"  {package} {version}: {tarball_url(package, version)}" for package, version in missing)
        where = f"the cache folder {cache_dir}" if cache_dir is not None else "a folder passed as cache_dir"
        raise SiteError(f"cannot reach the npm registry ({reason}), and these packages are not in a cache folder:\n"
                        f"{lines}\nRun where {registry} can be reached, or download those tarballs where it can "
                        f"(sgemm.site.vendor.fill_cache does) and put them into {where}. No page was changed.")
    return tarballs


def _package_files(package: str, version: str, data: bytes) -> dict[str, bytes]:
    """The regular files of an npm tarball by their path below its top folder."""
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            if member.isfile() and "/" in member.name:
                files[member.name.split("/", 1)[1]] = archive.extractfile(member).read()
    if not files:
        raise SiteError(f"the tarball of {package} {version} holds no files")
    return files


def fill_cache(cache_dir: str | os.PathLike, registry: str = NPM_REGISTRY, timeout: float = 60) -> list[Path]:
    """Download every tarball the site needs into `cache_dir` (those already there are checked, not downloaded):
    run it where the registry can be reached, and copy the folder to where it cannot. Returns their paths."""
    cache = Path(cache_dir)
    _fetch_all(sorted(PACKAGES), cache, registry, timeout)
    return [cache / tarball_name(package, version) for package, version in sorted(PACKAGES)]


# --- The site ---------------------------------------------------------------------------------------------------


def _key_asset(key: tuple[str, str]) -> Asset:
    return next(asset for asset in CDN_ASSETS if (asset.package, asset.version) == key)


def _pages(html_dir: Path) -> list[Path]:
    return sorted(page for page in html_dir.rglob("*.html")
                  if VENDOR_DIR not in page.relative_to(html_dir).parts[:1])


def _relative_url(target: str, page: Path, html_dir: Path) -> str:
    """`target` (a path relative to the site's root) as a URL relative to `page`."""
    start = page.parent.relative_to(html_dir).as_posix()
    return posixpath.relpath(target, start)


def vendor_assets(html_dir: str | os.PathLike, cache_dir: str | os.PathLike | None = None, *,
                  registry: str = NPM_REGISTRY, timeout: float = 60) -> list[Vendored]:
    """Make the site in `html_dir` (what `asv publish` wrote) load every library from `html_dir/vendor/`.

    Tarballs come from `cache_dir` where it holds them, else from `registry` (and are then saved into `cache_dir`).
    Every tarball is had and checked, and every vendored file written, before any page is changed; anything
    missing raises SiteError with the pages untouched. A second run changes nothing. Returns the tags rewritten.
    """
    root = Path(html_dir)
    pages = _pages(root) if root.is_dir() else []
    if not pages:
        raise SiteError(f"{root}: no HTML pages here; run `asv publish` first")
    cache = Path(cache_dir) if cache_dir is not None else None
    by_url = {asset.url: asset for asset in CDN_ASSETS}
    by_path = {vendored_path(asset): asset for asset in CDN_ASSETS}

    texts: dict[Path, str] = {}
    to_rewrite: list[tuple[Path, _Resource, Asset]] = []
    in_use: dict[str, Asset] = {}  # vendored files the pages load, by path: CDN tags to rewrite, and local ones
    damaged: set[str] = set()
    unknown = []
    for page in pages:
        texts[page] = text = page.read_bytes().decode("utf-8")
        for resource in _resources(text):
            if resource.url in by_url:
                to_rewrite.append((page, resource, by_url[resource.url]))
                in_use[vendored_path(by_url[resource.url])] = by_url[resource.url]
            elif _is_external(resource.url):
                unknown.append(f"  {page.relative_to(root)}: {resource.url}")
            else:
                local = posixpath.normpath(posixpath.join(page.parent.relative_to(root).as_posix(),
                                                          urllib.parse.urlsplit(resource.url).path))
                if local in by_path:
                    asset = by_path[local]
                    integrity = resource.tag.get("integrity")
                    if integrity and (root / local).is_file() and \
                            not sri_matches(integrity, (root / local).read_bytes()):
                        damaged.add(local)  # written again below, from its tarball
                    in_use[local] = asset
    if unknown:
        raise SiteError("these pages load files from the internet that sgemm.site.vendor does not know how to "
                        "vendor (add them to CDN_ASSETS):\n" + "\n".join(unknown))

    wanted: dict[tuple[str, str], set[str]] = {}
    for asset in in_use.values():
        wanted.setdefault((asset.package, asset.version), set()).update((asset.path, *asset.also))
    needed = sorted(key for key, paths in wanted.items()
                    if any(vendored_path(_key_asset(key), path) in damaged
                           or not (root / vendored_path(_key_asset(key), path)).is_file() for path in paths))
    tarballs = _fetch_all(needed, cache, registry, timeout)

    # Every file read and checked, then every file written, then the pages.
    writes: dict[Path, bytes] = {}
    for (package, version), data in tarballs.items():
        files = _package_files(package, version, data)
        absent = sorted(path for path in wanted[(package, version)] if path not in files)
        if absent:
            raise SiteError(f"the npm tarball of {package} {version} has no {', '.join(absent)}; fix its entry in "
                            f"CDN_ASSETS. No page was changed.")
        licenses = [path for path in files if "/" not in path and _LICENSE_FILE.fullmatch(path)]
        for path in sorted(wanted[(package, version)]) + licenses:
            writes[root / vendored_path(_key_asset((package, version)), path)] = files[path]
    for target, data in writes.items():
        if not target.is_file() or target.read_bytes() != data:
            write_atomically(target, data)

    done = []
    for page in pages:
        text = texts[page]
        edits = [(resource, asset) for where, resource, asset in to_rewrite if where == page]
        for resource, asset in reversed(edits):  # from the end, so that earlier offsets stay right
            path = vendored_path(asset)
            values = {resource.attribute: _relative_url(path, page, root)}
            integrity = resource.tag.get("integrity")
            if integrity is None:
                outcome = "none"
            elif sri_matches(integrity, (root / path).read_bytes()):
                # The registry's file is byte for byte what the CDN served: the CDN's hash still vouches for it.
                outcome = "kept"
            else:
                # A legitimately different file (see the asset's note): keep an integrity check, of the vendored
                # file itself, rather than drop the attribute, so that a vendored file edited later fails loudly.
                values["integrity"] = sri((root / path).read_bytes())
                outcome = "replaced"
            tag = resource.tag
            text = text[:tag.start] + _rewritten(tag, texts[page], values) + text[tag.end:]
            done.append(Vendored(page.relative_to(root).as_posix(), resource.url, path, asset.package,
                                 asset.version, outcome))
        if text != texts[page]:
            write_atomically(page, text)
    return sorted(done, key=lambda item: (item.page, item.url))


# --- Navigation -------------------------------------------------------------------------------------------------

_NAVBAR_CLASSES = {"nav", "navbar-nav", "navbar-left"}  # of asv's <ul class="nav navbar-nav navbar-left">
_NAV_LINK_CLASS = "sgemm-nav-link"


def _closing(tags: list[_Tag], at: int) -> int | None:
    """Where in `tags` the element that `tags[at]` opens ends: its end tag, past those of nested elements of its
    name. (A "/>" does not close an element that is not void: browsers read <ul/> as <ul>.)"""
    depth = 0
    for index in range(at, len(tags)):
        if tags[index].name == tags[at].name:
            depth += -1 if tags[index].closing else 1
            if depth == 0:
                return index
    return None


def _index_page(html_dir: str | os.PathLike) -> tuple[Path, str]:
    """The site's index.html and its text; SiteError where there is none to read."""
    index = Path(html_dir) / "index.html"
    try:
        return index, index.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SiteError(f"{index}: cannot read the site's index page ({exc}); run `asv publish` first") from exc


def add_nav_link(html_dir: str | os.PathLike, href: str, label: str) -> bool:
    """Add a link to `href` (relative to the site's root, e.g. "gpus/index.html"), shown as `label`, to the navbar
    of the site's index.html, after asv's own pages. A link to the same href is updated, not added twice. Returns
    whether the page changed."""
    index, text = _index_page(html_dir)
    tags = _tags(text)
    navbar = next((at for at, tag in enumerate(tags)
                   if tag.name == "ul" and not tag.closing and _NAVBAR_CLASSES <= tag.classes()), None)
    end = _closing(tags, navbar) if navbar is not None else None
    if end is None:
        raise SiteError(f"{index}: no asv navbar (<ul class=\"nav navbar-nav navbar-left\">) to add a link to")
    items, depth = [], 0  # the navbar's own items, not those of a menu nested in it
    for at in range(navbar + 1, end):
        if tags[at].name == "ul":
            depth += -1 if tags[at].closing else 1
        elif tags[at].name == "li" and not tags[at].closing and depth == 0:
            items.append(at)

    item = f'<li class="{_NAV_LINK_CLASS}"><a href="{html.escape(href)}">{html.escape(label)}</a></li>'
    for at in items:
        item_end = _closing(tags, at) if _NAV_LINK_CLASS in tags[at].classes() else None
        if item_end is None or item_end > end:
            continue
        link = next((tag for tag in tags[at + 1:item_end] if tag.name == "a" and not tag.closing), None)
        if link is not None and link.get("href") == href:
            start, stop = tags[at].start, tags[item_end].end
            if text[start:stop] == item:
                return False
            write_atomically(index, text[:start] + item + text[stop:])
            return True

    title = next((tags[at] for at in items if tags[at].get("id") == "nav-li-graphdisplay"), None)
    if title is not None:  # asv's graph title: keep it last
        updated = text[:title.start] + item + "\n        " + text[title.start:]
    else:
        content_end = tags[navbar].end + len(text[tags[navbar].end:tags[end].start].rstrip())
        updated = text[:content_end] + "\n        " + item + "\n      " + text[tags[end].start:]
    write_atomically(index, updated)
    return True


def drop_nav_item(html_dir: str | os.PathLike, item_id: str) -> bool:
    """Take the navbar item `<li id="ITEM_ID">` out of the site's index.html (the page it leads to stays where it is).
    Returns whether the page changed: False where there is no such item."""
    index, text = _index_page(html_dir)
    tags = _tags(text)
    at = next((at for at, tag in enumerate(tags) if tag.name == "li" and not tag.closing and tag.get("id") == item_id),
              None)
    end = _closing(tags, at) if at is not None else None
    if end is None:
        return False
    start, stop = tags[at].start, tags[end].end
    start = text.rfind("\n", 0, start) + 1 if not text[text.rfind("\n", 0, start) + 1:start].strip() else start
    stop = stop + 1 if text[stop:stop + 1] == "\n" else stop
    write_atomically(index, text[:start] + text[stop:])
    return True


# --- The benchmark list: the parameter combinations that were never measured ------------------------------------


def drop_unmeasured_list_rows(html_dir: str | os.PathLike) -> int:
    """Take out of asv's benchmark list (its `graphs/**/summary.json` files, one per machine and environment) each
    row of a parameter combination that has no figure at any commit: a kernel at an architecture it is not built for,
    a size it does not run at. asv shows them as rows with an empty value, which read as a failure. A combination
    measured once keeps its row. Returns how many rows went."""
    dropped = 0
    for path in sorted(Path(html_dir).glob("graphs/**/summary.json")):
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SiteError(f"{path}: not asv's benchmark list ({exc})") from exc
        if not isinstance(rows, list):
            raise SiteError(f"{path}: not asv's benchmark list (a JSON list)")
        kept = [row for row in rows if not (isinstance(row, dict) and row.get("idx") is not None
                                            and row.get("last_value") is None)]
        if len(kept) != len(rows):
            write_atomically(path, json.dumps(kept))
            dropped += len(rows) - len(kept)
    return dropped


# --- The benchmark grid's tiles ---------------------------------------------------------------------------------

SUMMARY_MARGINS_SCRIPT = "summary-margins.js"

# asv 0.6.6's benchmark grid (summarygrid.js) draws each tile with flot: a y axis from 0 (its option min: 0) to 2 %
# above the largest value (flot's autoscaleMargin), no tick, no margin between the plot and the tile's border, and a
# 1-pixel border. A line that does not move, as every resource track's does where commits compile alike, then lies on
# that border: a positive value 2 % below the top, and a value of 0 (asv's geometric mean over the kernels is 0 as soon
# as one kernel has no spills, no stack or no static shared memory) on the bottom; the tile looks blank. This flot
# plugin widens the axis of the grid's tiles alone by 15 % of the span from 0 to the data on either side, once
# flot knows the data's extent and before it sets the axis from it (processOffset is that moment): 0 and the largest
# value both lie inside the tile, and a varying line keeps asv's shape, measured from 0. All 0 spans 0 to 1, as flot
# itself widens a flat axis at 0. Negative values, which asv's min: 0 would cut off, are kept inside too.
# The same script mends asv's graph page (graphdisplay.js): for a unit other than time or bytes it sets the y axis from
# the lowest to the highest value shown, and where those are one value (a register count that no commit changed)
# flot widens the axis by 0.01, so every tick reads that value ("32.0" eleven times). Such an axis is widened by
# FLAT_SPAN of the value on either side (1 for a value of 0): ticks that differ, the line in the middle.
_SUMMARY_MARGINS_JS = """\
/* Written by sgemm publish: room above and below the lines of the benchmark grid's tiles, so that a flat line or a
   line at 0 is drawn inside its tile, not on the tile's border; and a y axis with ticks that differ on a graph whose
   line does not move (sgemm/site/vendor.py says more). */
(function ($) {
    "use strict";
    if (!$ || !$.plot) {
        return;  // a library failed to load, and asv's page says so
    }
    var MARGIN = 0.15;  // of the span from 0 to the data, below it and above it
    var FLAT_SPAN = 0.1;  // of a flat line's value, below it and above it, on asv's graph page
    $.plot.plugins.push({
        name: "summary-margins",
        version: "1.1",
        options: {},
        init: function (plot) {
            plot.hooks.processOffset.push(function (plot) {
                if (!plot.getPlaceholder().hasClass("benchmark-plot")) {
                    // asv's graph page: its ticks are its own, but an axis it gave no span gets one.
                    $.each(plot.getYAxes(), function (_, axis) {
                        var options = axis.options;
                        if (options.transform || options.min == null || options.min !== options.max) {
                            return;  // a log scale, flot's own range, or a range that spans something
                        }
                        var pad = Math.abs(options.min) * FLAT_SPAN || 1;
                        options.min -= pad;
                        options.max += pad;
                    });
                    return;
                }
                $.each(plot.getYAxes(), function (_, axis) {
                    // With no point, datamin is +Infinity and datamax -Infinity: the span is then 0 to 1 too.
                    var low = Math.min(0, axis.datamin), high = Math.max(0, axis.datamax);
                    if (high === low) {
                        high = low + 1;
                    }
                    axis.options.min = low - MARGIN * (high - low);
                    axis.options.max = high + MARGIN * (high - low);
                });
            });
        }
    });
})(window.jQuery);
"""


def add_summary_margins(html_dir: str | os.PathLike) -> bool:
    """Write SUMMARY_MARGINS_SCRIPT beside the site's index.html and load it at the end of the page's head, after the
    libraries and asv's scripts (the grid draws once the page is ready). The script is written anew where it differs,
    the tag added once. Returns whether anything changed."""
    root = Path(html_dir)
    index = root / "index.html"
    try:
        text = index.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SiteError(f"{index}: cannot read the site's index page ({exc}); run `asv publish` first") from exc
    tags = _tags(text)
    head_end = next((tag for tag in tags if tag.name == "head" and tag.closing), None)
    if head_end is None:
        raise SiteError(f"{index}: no </head> to load {SUMMARY_MARGINS_SCRIPT} before")
    changed = False
    script = root / SUMMARY_MARGINS_SCRIPT
    if not script.is_file() or script.read_bytes() != _SUMMARY_MARGINS_JS.encode("utf-8"):
        write_atomically(script, _SUMMARY_MARGINS_JS.encode("utf-8"))
        changed = True
    if not any(resource.url == SUMMARY_MARGINS_SCRIPT for resource in _resources(text)):
        tag = f'  <script src="{SUMMARY_MARGINS_SCRIPT}"></script>\n  '
        write_atomically(index, text[:head_end.start] + tag + text[head_end.start:])
        changed = True
    return changed
