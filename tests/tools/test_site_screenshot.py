"""tools/site_screenshot.py without a browser: the folder it serves and the requests it records, the Chromium command
line cut off from every host but the loopback, and its command line's answer where no Chromium is found (the pages
rendered in Chromium are tests/site/test_vendor.py's)."""

import urllib.error
import urllib.request

from tools import site_screenshot

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a proxy of the environment would not see it


def test_a_folder_is_served_on_the_loopback_and_each_request_recorded(tmp_path):
    (tmp_path / "index.html").write_text("<p>the site</p>")
    with site_screenshot.serve(tmp_path) as (base, requests):
        assert base.startswith("http://127.0.0.1:")
        with DIRECT.open(base + "index.html") as page:
            assert page.read() == b"<p>the site</p>"
        try:
            DIRECT.open(base + "missing.js")
        except urllib.error.HTTPError as exc:
            assert exc.code == 404
        else:
            raise AssertionError("a missing file was served")
    assert requests == [("/index.html", 200), ("/missing.js", 404)]


def test_chromium_is_cut_off_from_other_hosts_unless_asked_online():
    offline = site_screenshot.chromium_command("chromium", "http://127.0.0.1:1/", "/tmp/profile", screenshot="a.png")
    assert f"--host-resolver-rules={site_screenshot.OFFLINE_RULES}" in offline and "--no-proxy-server" in offline
    assert offline[-1] == "http://127.0.0.1:1/" and "--screenshot=a.png" in offline
    online = site_screenshot.chromium_command("chromium", "http://127.0.0.1:1/", "/tmp/profile", online=True)
    assert not any(word.startswith("--host-resolver-rules") for word in online)


def test_without_chromium_the_command_line_says_so_and_fails(tmp_path, monkeypatch, capsys):
    (tmp_path / "html").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path))  # no browser on it
    assert site_screenshot.main([str(tmp_path / "html"), str(tmp_path / "shot.png")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("site_screenshot: no Chromium: none of chromium") and err.count("\n") == 1
    assert not (tmp_path / "shot.png").exists()
