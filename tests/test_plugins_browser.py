"""The browser plugins (chrome, consolelog, responses, redirects, singlefile, screenshot, pdf, dom, title,
readability, htmltotext), each hook run as a real subprocess by tests/plugin_harness.py against pages served
from 127.0.0.1. One Chromium per module (the chrome plugin's on_Crawl hook), like one per Crawl.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import shutil
import struct
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
from plugin_harness import BackgroundHook, HookHarness, HookResult, hook_path

SITE = Path(__file__).resolve().parent / "fixtures" / "site"
LAUNCH = hook_path("chrome", "chrome_launch")
CRAWL_END = hook_path("chrome", "chrome_stop")
TAB = hook_path("chrome", "chrome_tab.py")
NAVIGATE = hook_path("chrome", "chrome_navigate")
CLOSE = hook_path("chrome", "chrome_tab_close")
LISTENERS = {name: hook_path(name) for name in ("consolelog", "responses", "redirects")}
STEP5 = {name: hook_path(name) for name in
         ("singlefile", "screenshot", "pdf", "dom", "title", "readability", "htmltotext")}

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")

REDIRECTS = {
    "/redirect/start": (301, "/redirect/middle"),
    "/redirect/middle": (302, "/browser/meta-refresh.html"),  # which then refreshes to article.html
}


class FixtureHandler(http.server.SimpleHTTPRequestHandler):
    """tests/fixtures/site plus HTTP redirects, a slow page, and a header on every response."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def end_headers(self) -> None:
        self.send_header("X-Waybox-Fixture", "browser-tests")
        super().end_headers()

    def do_GET(self) -> None:  # noqa: N802
        self.server.user_agents.append(self.headers.get("User-Agent", ""))
        self.server.cookies.append(self.headers.get("Cookie", ""))
        if self.path in REDIRECTS:
            code, location = REDIRECTS[self.path]
            self.send_response(code)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/slow":
            time.sleep(8)
            body = b"<html><title>slow</title><body>finally</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@pytest.fixture(scope="module")
def site():
    handler = functools.partial(FixtureHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.user_agents = []
    server.cookies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.base = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def chromium_processes(marker: str) -> list[psutil.Process]:
    """Chromium processes whose command line mentions `marker` (our temporary folder)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if "chrom" in (proc.info["name"] or "").lower() and marker in cmdline:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_gone(marker: str, timeout: float = 15) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while (left := chromium_processes(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's temporary folder; no Chromium started under it may outlive the module."""
    path = tmp_path_factory.mktemp("browser_plugins")
    yield path
    left = wait_gone(str(path))
    for proc in left:
        proc.kill()
    assert not left, f"chromium processes left behind: {[p.pid for p in left]}"


def start_browser(harness: HookHarness, env: dict | None = None) -> tuple[BackgroundHook, dict]:
    launch = harness.start(LAUNCH, env=env)
    info_file = harness.crawl_dir / "chrome" / "browser.json"
    deadline = time.monotonic() + 60
    while not info_file.exists():
        if not launch.alive():
            raise AssertionError(f"the launch hook exited {launch.proc.returncode}:\n{launch.stderr_so_far()}")
        if time.monotonic() > deadline:
            launch.stop()
            raise AssertionError(f"no browser.json after 60s:\n{launch.stderr_so_far()}")
        time.sleep(0.05)
    return launch, json.loads(info_file.read_text())


class Crawl:
    def __init__(self, harness: HookHarness, launch: BackgroundHook, info: dict, site):
        self.harness, self.launch, self.info, self.site = harness, launch, info, site

    def targets(self) -> list[dict]:
        with urllib.request.urlopen(self.info["http_url"] + "/json/list", timeout=5) as resp:
            return [t for t in json.load(resp) if t.get("type") == "page"]

    def open_snapshot(self, snapshot_id: str, url: str, listeners: bool = False) -> dict:
        """Steps 1 and 2 of a Snapshot: tab, (listeners), navigation."""
        out: dict = {"id": snapshot_id, "url": url, "dir": self.harness.snap_dir(snapshot_id)}
        out["tab"] = self.harness.run(TAB, url, snapshot_id)
        assert out["tab"].returncode == 0, out["tab"]
        out["listeners"] = {}
        if listeners:
            out["listeners"] = {n: self.harness.start(h, url, snapshot_id) for n, h in LISTENERS.items()}
        out["navigate"] = self.harness.run(NAVIGATE, url, snapshot_id)
        return out

    def close_snapshot(self, snap: dict) -> None:
        snap["close"] = self.harness.run(CLOSE, snap["url"], snap["id"])
        snap["listener_results"] = {n: bg.wait(20) for n, bg in snap["listeners"].items()}


@pytest.fixture(scope="module")
def crawl(root: Path, site) -> Crawl:
    harness = HookHarness(root / "data", "crawl-browser", env={"TIMEOUT": "60"})
    launch, info = start_browser(harness)
    yield Crawl(harness, launch, info, site)
    stopped = launch.stop(grace=15)
    assert stopped.returncode == 0 and not stopped.timed_out, stopped
    assert stopped.status == "succeeded", stopped
    assert not wait_gone(str(root / "data")), "chromium outlived the launch hook's SIGTERM"


@pytest.fixture(scope="module")
def article(crawl: Crawl) -> dict:
    """A whole Snapshot of the article page: tab, listeners, navigation, every step-5 extractor, tab closed."""
    url = crawl.site.base + "/browser/article.html"
    snap = crawl.open_snapshot("snap-article", url, listeners=True)
    snap["step5"] = {name: crawl.harness.run(hook, url, snap["id"]) for name, hook in STEP5.items()}
    crawl.close_snapshot(snap)
    return snap


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_succeeded(res: HookResult) -> dict:
    assert res.returncode == 0, res
    assert res.status == "succeeded", res
    assert not res.non_json, f"non-JSON lines on stdout: {res.non_json}"
    for path in res.result.get("output_files", []):
        assert (res.cwd / path).exists(), f"{res.hook.name} lists {path} but it does not exist"
    return res.result


# ---------------------------------------------------------------------------------------------------------------
# the crawl's browser


def test_launch_publishes_endpoint_and_runs_headless_for_root(crawl: Crawl) -> None:
    chrome_dir = crawl.harness.crawl_dir / "chrome"
    info = crawl.info
    assert (chrome_dir / "cdp_url.txt").read_text().strip() == info["cdp_url"]
    assert info["cdp_url"].startswith("ws://127.0.0.1:")
    assert int((chrome_dir / "chromium.pid").read_text()) == info["pid"]
    cmdline = psutil.Process(info["pid"]).cmdline()
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-quic", "--remote-debugging-port=0"):
        assert flag in cmdline, flag
    assert f"--user-data-dir={chrome_dir / 'profile'}" in cmdline
    with urllib.request.urlopen(info["http_url"] + "/json/version", timeout=5) as resp:
        assert "Chrome" in json.load(resp)["Browser"]
    started = [r for r in crawl.launch.records_so_far() if r["type"] == "Process"]
    assert started and started[0]["pid"] == info["pid"] and "exit_code" not in started[0]


# ---------------------------------------------------------------------------------------------------------------
# one whole Snapshot


def test_tab_and_navigation(article: dict) -> None:
    tab = assert_succeeded(article["tab"])
    target_id = (article["dir"] / "chrome" / "target_id.txt").read_text().strip()
    assert target_id in tab["output_str"]
    nav = article["navigate"]
    assert_succeeded(nav)
    assert nav.of_type("Snapshot") == [{"type": "Snapshot", "title": "The Quokka Almanac"}]
    navigation = json.loads((article["dir"] / "chrome" / "navigation.json").read_text())
    assert navigation["status"] == 200
    assert navigation["final_url"] == article["url"]
    assert navigation["headers"]["x-waybox-fixture"] == "browser-tests"
    assert "load_ms" in navigation


def test_listeners_attached_before_navigation_and_exit_when_tab_closes(article: dict) -> None:
    for name, res in article["listener_results"].items():
        assert not res.timed_out, f"{name} did not exit after the tab closed:\n{res}"
        assert_succeeded(res)
    entries = read_jsonl(article["dir"] / "consolelog" / "console.jsonl")
    texts = {(e["level"], e["text"]) for e in entries}
    # logged by an inline <script> in <head>: only seen if the listener was attached before navigation
    assert ("log", "waybox-early-console-marker") in texts
    assert ("warning", "waybox-console-warning") in texts
    assert ("error", "waybox-console-error") in texts
    assert not (article["dir"] / "consolelog" / "listener.ready").exists()


def test_responses_record_every_response_with_headers(article: dict) -> None:
    responses = read_jsonl(article["dir"] / "responses" / "responses.jsonl")
    by_url = {r["url"].rsplit("/", 1)[-1]: r for r in responses}
    for name in ("article.html", "article.css", "article.js", "pixel.png"):
        assert by_url[name]["status"] == 200, name
        assert by_url[name]["headers"]["x-waybox-fixture"] == "browser-tests"
    assert by_url["article.html"]["main_document"] is True
    assert by_url["pixel.png"]["resource_type"] == "image"
    headers = json.loads((article["dir"] / "responses" / "headers.json").read_text())
    assert headers["url"] == article["url"] and headers["status"] == 200
    assert headers["headers"]["content-type"].startswith("text/html")


def test_singlefile_is_one_self_contained_file(article: dict, crawl: Crawl) -> None:
    res = article["step5"]["singlefile"]
    assert_succeeded(res)
    html = (res.cwd / "singlefile.html").read_text()
    assert "The Quokka Almanac" in html and "wallabyesque" in html
    assert ".byline{color:rgb(120,30,30)" in html.replace(" ", "")  # the stylesheet, inlined
    assert "data:image/png;base64," in html  # the image, inlined
    assert 'href="article.css"' not in html and "href=article.css" not in html
    runs = res.of_type("Process")
    assert runs and runs[-1]["exit_code"] == 0
    assert "--browser-server=" + crawl.info["http_url"] in runs[-1]["cmd"]  # the crawl's browser, not its own


def test_screenshot_is_a_png_of_the_window_width(article: dict) -> None:
    res = article["step5"]["screenshot"]
    assert_succeeded(res)
    width, height = png_size(res.cwd / "screenshot.png")
    assert width == 1440  # CHROME_RESOLUTION's width, scrollbars hidden
    assert height >= 600
    assert f"{width}x{height}" in res.result["output_str"]


def test_pdf_has_the_page_text(article: dict) -> None:
    from pypdf import PdfReader

    res = article["step5"]["pdf"]
    assert_succeeded(res)
    text = " ".join(page.extract_text() for page in PdfReader(io.BytesIO((res.cwd / "output.pdf").read_bytes())).pages)
    assert "Quokka Almanac" in text
    assert "wallabyesque" in text


def test_dom_is_serialized_after_scripts_ran(article: dict) -> None:
    res = article["step5"]["dom"]
    assert_succeeded(res)
    html = (res.cwd / "output.html").read_text()
    assert "Inserted by script: quokka-dom-7731" in html
    assert "quokka-dom-7731" not in (SITE / "browser" / "article.html").read_text()  # only the script writes it


def test_title_is_emitted_first(article: dict) -> None:
    res = article["step5"]["title"]
    assert_succeeded(res)
    assert res.records[0] == {"type": "Snapshot", "title": "The Quokka Almanac"}
    assert (res.cwd / "title.txt").read_text().strip() == "The Quokka Almanac"


def test_readability_extracts_the_article(article: dict) -> None:
    res = article["step5"]["readability"]
    assert_succeeded(res)
    text = (res.cwd / "content.txt").read_text()
    assert "wallabyesque" in text and "Rottnest Island" in text
    assert "Footer boilerplate" not in text and "Tall page" not in text
    assert "<p>" in (res.cwd / "content.html").read_text()
    meta = json.loads((res.cwd / "article.json").read_text())
    assert meta["title"] == "The Quokka Almanac" and meta["byline"] == "By Ada Fixture"


def test_htmltotext_has_the_rendered_text(article: dict) -> None:
    res = article["step5"]["htmltotext"]
    assert_succeeded(res)
    text = (res.cwd / "htmltotext.txt").read_text()
    assert "wallabyesque" in text and "Inserted by script: quokka-dom-7731" in text
    assert "<p>" not in text


def test_step7_closes_the_tab(article: dict, crawl: Crawl) -> None:
    assert_succeeded(article["close"])
    target_id = (article["dir"] / "chrome" / "target_id.txt").read_text().strip()
    assert target_id not in {t["id"] for t in crawl.targets()}


# ---------------------------------------------------------------------------------------------------------------
# redirects, errors, options


def test_redirects_http_and_client_side(crawl: Crawl) -> None:
    url = crawl.site.base + "/redirect/start"
    snap = crawl.open_snapshot("snap-redirect", url, listeners=True)
    crawl.close_snapshot(snap)
    assert_succeeded(snap["navigate"])
    data = json.loads((snap["dir"] / "redirects" / "redirects.json").read_text())
    hops = [(h["type"], h["from"].replace(crawl.site.base, ""), h["to"].replace(crawl.site.base, ""), h["status"])
            for h in data["hops"]]
    assert hops == [
        ("http", "/redirect/start", "/redirect/middle", 301),
        ("http", "/redirect/middle", "/browser/meta-refresh.html", 302),
        ("client", "/browser/meta-refresh.html", "/browser/article.html", None),
    ]
    assert data["final_url"] == crawl.site.base + "/browser/article.html"
    assert "3 redirects" in snap["listener_results"]["redirects"].result["output_str"]
    statuses = {r["url"].replace(crawl.site.base, ""): r["status"]
                for r in read_jsonl(snap["dir"] / "responses" / "responses.jsonl")}
    assert statuses["/redirect/start"] == 301 and statuses["/redirect/middle"] == 302


def test_http_404_is_a_soft_failure(crawl: Crawl) -> None:
    snap = crawl.open_snapshot("snap-404", crawl.site.base + "/browser/missing.html")
    nav = snap["navigate"]
    assert nav.returncode == 0, nav
    assert nav.status == "failed" and "404" in nav.result["output_str"], nav
    assert json.loads((snap["dir"] / "chrome" / "navigation.json").read_text())["status"] == 404
    crawl.close_snapshot(snap)


def test_screenshot_size_options(crawl: Crawl) -> None:
    snap = crawl.open_snapshot("snap-tall", crawl.site.base + "/browser/tall.html")
    assert_succeeded(snap["navigate"])
    full = crawl.harness.run(STEP5["screenshot"], snap["url"], snap["id"], env={"SCREENSHOT_WIDTH": "1000"})
    assert_succeeded(full)
    assert png_size(full.cwd / "screenshot.png") == (1000, 2600)  # the page's size at that width
    capped = crawl.harness.run(STEP5["screenshot"], snap["url"], snap["id"],
                               env={"SCREENSHOT_WIDTH": "800", "SCREENSHOT_MAX_HEIGHT": "1500"})
    assert_succeeded(capped)
    assert png_size(capped.cwd / "screenshot.png") == (800, 1500)
    viewport = crawl.harness.run(STEP5["screenshot"], snap["url"], snap["id"],
                                 env={"SCREENSHOT_FULL_PAGE": "False", "SCREENSHOT_WIDTH": "640",
                                      "SCREENSHOT_HEIGHT": "480"})
    assert_succeeded(viewport)
    assert png_size(viewport.cwd / "screenshot.png") == (640, 480)
    crawl.close_snapshot(snap)


def test_snapshots_side_by_side_each_get_a_painted_tab(crawl: Crawl) -> None:
    """Chromium paints only the front tab of a window: each Snapshot's tab has a window of its own, so the
    older of two open Snapshots can still be captured."""
    first = crawl.open_snapshot("snap-side-1", crawl.site.base + "/browser/tall.html")
    second = crawl.open_snapshot("snap-side-2", crawl.site.base + "/browser/article.html")
    for snap in (first, second):
        assert_succeeded(snap["navigate"])
    for snap in (first, second):
        shot = crawl.harness.run(STEP5["screenshot"], snap["url"], snap["id"], env={"SCREENSHOT_TIMEOUT": "20"})
        assert_succeeded(shot)
    assert png_size(first["dir"] / "screenshot" / "screenshot.png")[1] == 2600
    for snap in (first, second):
        crawl.close_snapshot(snap)


def test_extractor_without_a_tab_loads_the_page_in_a_temporary_tab(crawl: Crawl) -> None:
    before = {t["id"] for t in crawl.targets()}
    res = crawl.harness.run(STEP5["dom"], crawl.site.base + "/browser/article.html", "snap-no-tab")
    assert_succeeded(res)
    assert "quokka-dom-7731" in (res.cwd / "output.html").read_text()
    assert "temporary tab" in res.stderr
    assert {t["id"] for t in crawl.targets()} == before


def test_listener_stops_cleanly_on_sigterm(crawl: Crawl) -> None:
    url = crawl.site.base + "/index.html"
    snap = crawl.open_snapshot("snap-sigterm", url, listeners=False)
    listener = crawl.harness.start(LISTENERS["consolelog"], url, snap["id"])
    deadline = time.monotonic() + 30
    while not (snap["dir"] / "consolelog" / "listener.ready").exists() and time.monotonic() < deadline:
        assert listener.alive(), listener.stderr_so_far()
        time.sleep(0.05)
    res = listener.stop(grace=10)
    assert not res.timed_out, res
    assert_succeeded(res)
    crawl.close_snapshot(snap)


def test_foreground_hook_finishes_hastily_on_sigterm(crawl: Crawl) -> None:
    url = crawl.site.base + "/slow"
    tab = crawl.harness.run(TAB, url, "snap-slow")
    assert_succeeded(tab)
    nav = crawl.harness.start(NAVIGATE, url, "snap-slow")
    time.sleep(3)
    assert nav.alive()
    res = nav.stop(grace=5)
    assert not res.timed_out, res
    assert res.returncode not in (0, 10), res  # a hard failure: the engine may retry
    assert "SIGTERM" in res.stderr
    assert_succeeded(crawl.harness.run(CLOSE, url, "snap-slow"))


# ---------------------------------------------------------------------------------------------------------------
# no browser, disabled plugins, missing binaries


def test_hooks_skip_when_the_crawl_has_no_browser(tmp_path: Path, site) -> None:
    harness = HookHarness(tmp_path / "data", "crawl-without-chrome")
    res = harness.run(STEP5["screenshot"], site.base + "/index.html", "snap1")
    assert res.returncode == 10, res
    assert res.status == "skipped" and "no browser" in res.result["output_str"]
    assert "CHROME_ENABLED" in res.stderr
    res = harness.run(STEP5["pdf"], site.base + "/index.html", "snap1", env={"CHROME_ENABLED": "False"})
    assert res.returncode == 10 and "CHROME_ENABLED is False" in res.stderr, res
    launch = harness.run(LAUNCH, env={"CHROME_ENABLED": "False"})
    assert launch.returncode == 10 and launch.status == "skipped", launch


def test_plugin_enabled_false_skips(tmp_path: Path, site) -> None:
    harness = HookHarness(tmp_path / "data", "crawl1")
    res = harness.run(STEP5["dom"], site.base + "/index.html", "snap1", env={"SAVE_DOM": "False"})  # alias
    assert res.returncode == 10 and "DOM_ENABLED is False" in res.result["output_str"], res


def test_singlefile_without_its_binary_is_skipped_with_a_hint(crawl: Crawl) -> None:
    res = crawl.harness.run(STEP5["singlefile"], crawl.site.base + "/index.html", "snap-nosf",
                            env={"SINGLEFILE_BINARY": "/nonexistent/single-file"})
    assert res.returncode == 10, res
    assert "install-plugin-deps.sh" in res.result["output_str"]


def test_singlefile_is_retried_when_it_exits_0_without_a_file(crawl: Crawl, tmp_path: Path) -> None:
    fake = tmp_path / "single-file"
    fake.write_text("#!/bin/bash\n"  # like SingleFile on a bad day: exit 0, no file, the first two times
                    f"n=$(cat {tmp_path}/count 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/count\n"
                    "[ \"$n\" -lt 2 ] && exit 0\n"
                    'echo "<!doctype html><html><body>saved on try $((n + 1))</body></html>" > "$2"\n')
    fake.chmod(0o755)
    res = crawl.harness.run(STEP5["singlefile"], crawl.site.base + "/index.html", "snap-flaky-sf",
                            env={"SINGLEFILE_BINARY": str(fake)})
    assert_succeeded(res)
    assert "saved on try 3" in (res.cwd / "singlefile.html").read_text()
    assert [p["exit_code"] for p in res.of_type("Process")] == [0, 0, 0]
    assert res.stderr.count("without writing a page") == 2
    assert not list(res.cwd.glob(".*partial"))
    gave_up = crawl.harness.run(STEP5["singlefile"], crawl.site.base + "/index.html", "snap-flaky-sf2",
                                env={"SINGLEFILE_BINARY": "/bin/true", "SINGLEFILE_ATTEMPTS": "2"})
    assert gave_up.returncode == 1 and gave_up.result is None, gave_up  # a hard failure: retried later
    assert len(gave_up.of_type("Process")) == 2


def test_npm_dependencies_are_installed() -> None:
    plugins = Path(__file__).resolve().parent.parent / "waybox" / "plugins"
    missing = [p for p in ("singlefile/node_modules/.bin/single-file",
                           "readability/node_modules/@mozilla/readability/Readability.js")
               if not (plugins / p).exists()]
    assert not missing, f"run scripts/install-plugin-deps.sh: missing {missing}"


# ---------------------------------------------------------------------------------------------------------------
# a second crawl: settings reach the browser, CrawlEnd stops it, a killed launch hook takes Chromium along


def test_browser_settings_and_crawl_end(root: Path, site) -> None:
    cookies = root / "cookies.txt"
    cookies.write_text("# Netscape HTTP Cookie File\n"
                       "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tquokka-cookie-42\n"
                       "#HttpOnly_127.0.0.1\tFALSE\t/\tFALSE\t4102444800\tsecret\thidden-value\n")
    harness = HookHarness(root / "crawl2", "crawl-settings", env={
        "USER_AGENT": "WayboxBrowserTest/1.0", "CHECK_SSL_VALIDITY": "False", "RESOLUTION": "800,600",
        "COOKIES_FILE": str(cookies)})
    launch, info = start_browser(harness)
    try:
        cmdline = psutil.Process(info["pid"]).cmdline()
        assert "--ignore-certificate-errors" in cmdline
        assert "--window-size=800,600" in cmdline
        assert "--user-agent=WayboxBrowserTest/1.0" in cmdline
        url = site.base + "/index.html?ua-check"
        assert_succeeded(harness.run(TAB, url, "s1"))
        site.user_agents.clear()
        site.cookies.clear()
        assert_succeeded(harness.run(NAVIGATE, url, "s1"))
        assert site.user_agents and set(site.user_agents) == {"WayboxBrowserTest/1.0"}
        assert "session=quokka-cookie-42" in site.cookies[0] and "secret=hidden-value" in site.cookies[0]
        shot = harness.run(STEP5["screenshot"], url, "s1")
        assert_succeeded(shot)
        assert png_size(shot.cwd / "screenshot.png")[0] == 800
    finally:
        end = harness.run(CRAWL_END)
    assert_succeeded(end)
    res = launch.wait(15)
    assert res.returncode == 0 and res.status == "succeeded", res
    processes = res.of_type("Process")
    assert processes[-1]["pid"] == info["pid"] and "exit_code" in processes[-1]
    assert not wait_gone(str(root / "crawl2"))
    assert not (harness.crawl_dir / "chrome" / "browser.json").exists()
    assert not (harness.crawl_dir / "chrome" / "profile").exists()
    assert not (harness.crawl_dir / "chrome" / "tmp").exists()
    # a Snapshot hook run now learns at once that the browser is gone
    late = harness.run(STEP5["title"], url, "s2")
    assert late.returncode == 10 and "stopped" in late.result["output_str"], late
    assert late.duration < 10, late


def test_killed_launch_hook_takes_chromium_along(root: Path) -> None:
    harness = HookHarness(root / "crawl3", "crawl-killed")
    launch, info = start_browser(harness)
    assert chromium_processes(str(root / "crawl3"))
    launch.kill_group()  # SIGKILL: no chance to clean up
    launch.proc.wait()
    assert not wait_gone(str(root / "crawl3"), timeout=10), "chromium survived its launch hook"


def test_seal_that_sigterms_the_whole_tree_at_once_stops_without_restart(root: Path) -> None:
    """The engine's seal SIGTERMs a background hook and all its descendants together (Chromium included)."""
    harness = HookHarness(root / "crawl4", "crawl-sealed")
    launch, info = start_browser(harness)
    tree = [psutil.Process(launch.pid), *psutil.Process(launch.pid).children(recursive=True)]
    assert info["pid"] in {p.pid for p in tree}
    for proc in tree:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    res = launch.wait(20)
    assert res.returncode == 0 and res.status == "succeeded", res
    assert "restarting" not in res.stderr, res
    assert not wait_gone(str(root / "crawl4"))
