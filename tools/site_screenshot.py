"""Render a page of the published site in headless Chromium, with every host but this machine's loopback cut off:
save a screenshot, and print (or save) the DOM as the page's scripts left it.

Usage, from the repository root:
    python -m tools.site_screenshot URL_OR_DIR OUT.png [--width 1280 --height 800] [--wait-ms 15000] [--dom OUT.html]
                                    [--online] [--chromium PATH]

URL_OR_DIR is a URL (http://127.0.0.1:8080/index.html#/summarylist) or the folder `asv publish` wrote, which is
then served over HTTP on 127.0.0.1 while Chromium renders it (a fragment may follow the folder: html#/regressions).
Cut off from the internet, a site that still loads its libraries from CDNs shows asv's error page instead of its
graphs. --online lets Chromium reach any host.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tools.parser import ToolParser

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Every host name resolves to nothing, except the loopback addresses (Chromium resolves "localhost" itself).
OFFLINE_RULES = "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"


def find_chromium() -> str | None:
    """A Chromium or Chrome executable on PATH, or None."""
    return next((found for name in CHROMIUM_NAMES if (found := shutil.which(name))), None)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[tuple[str, int]]  # set per server: (path, status) of every request

    def log_message(self, format, *args):  # noqa: A002 - the name http.server uses
        pass

    def log_request(self, code="-", size="-"):
        self.requests.append((self.path, int(code) if isinstance(code, int) else 0))


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a browser leaving a page drops its connections
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(directory: str | os.PathLike):
    """Serve `directory` over HTTP on 127.0.0.1 (a free port) from a thread; yields (base URL, list of the
    (path, status) of each request served so far)."""
    requests: list[tuple[str, int]] = []
    handler = type("Handler", (_QuietHandler,), {"requests": requests})
    server = _Server(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def chromium_command(chromium: str, url: str, profile: str, *, screenshot: str | None = None, dom: bool = True,
                     width: int = 1280, height: int = 800, wait_ms: int = 15000, online: bool = False) -> list[str]:
    """The Chromium command line that renders `url` headless, with a fresh profile and no background traffic."""
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
               "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-extensions", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--window-size={width},{height}", f"--virtual-time-budget={wait_ms}"]
    if not online:
        # No proxy either: through a proxy, the proxy would resolve the names the rules refuse.
        command += ["--no-proxy-server", f"--host-resolver-rules={OFFLINE_RULES}"]
    if screenshot:
        command.append(f"--screenshot={screenshot}")
    if dom:
        command.append("--dump-dom")
    return command + [url]


def render(url: str, screenshot: str | os.PathLike | None = None, *, width: int = 1280, height: int = 800,
           wait_ms: int = 15000, online: bool = False, chromium: str | None = None, timeout: float = 180) -> str:
    """Load `url` in headless Chromium, let the page run for `wait_ms` of virtual time (time that waits for the
    network), save a PNG screenshot if asked, and return the DOM as the scripts left it. RuntimeError when
    Chromium is absent or fails."""
    chromium = chromium or find_chromium()
    if chromium is None:
        raise RuntimeError(f"no Chromium: none of {', '.join(CHROMIUM_NAMES)} is on PATH")
    with tempfile.TemporaryDirectory(prefix="site-screenshot-") as profile:
        target = str(Path(screenshot).resolve()) if screenshot else None
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).unlink(missing_ok=True)
        command = chromium_command(chromium, url, profile, screenshot=target, width=width, height=height,
                                   wait_ms=wait_ms, online=online)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=profile)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"Chromium did not finish rendering {url} in {timeout:.0f} s") from exc
        if done.returncode != 0 or (target and not Path(target).is_file()):
            raise RuntimeError(f"Chromium failed on {url} (exit {done.returncode}):\n{done.stderr[-3000:]}")
        return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", help="a URL, or the folder asv publish wrote (optionally followed by #fragment)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=800)
    parser.add_argument("--wait-ms", type=int, default=15000, help="virtual time the page gets to render")
    parser.add_argument("--dom", type=Path, help="also write the rendered DOM here")
    parser.add_argument("--online", action="store_true", help="let Chromium reach hosts other than this one")
    parser.add_argument("--chromium", help="the Chromium executable (default: found on PATH)")
    args = parser.parse_args(argv)

    folder, _, fragment = args.page.partition("#")
    with contextlib.ExitStack() as stack:
        if Path(folder).is_dir():
            base, _ = stack.enter_context(serve(folder))
            url = base + "index.html" + (f"#{fragment}" if fragment else "")
        else:
            url = args.page
        try:
            dom = render(url, args.out, width=args.width, height=args.height, wait_ms=args.wait_ms,
                         online=args.online, chromium=args.chromium)
        except RuntimeError as exc:
            print(f"site_screenshot: {exc}", file=sys.stderr)
            return 1
    if args.dom:
        args.dom.write_text(dom)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
