"""Helpers for the web and API tests: a real `waybox server` process, a small HTTP client with
cookies and CSRF (standard library only), a local site to archive, and playwright's chromium.
"""

from __future__ import annotations

import contextlib
import functools
import http.cookiejar
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

from tests.conftest import FIXTURES, Waybox, kill_leftovers

WEB_PLUGINS = FIXTURES / "web_plugins"
ADMIN_USER = "admin"
ADMIN_PASSWORD = "correct-horse-battery-9"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SHOT_DIR = Path(os.environ.get("WAYBOX_WEB_SHOTS", "/tmp/waybox-web-shots"))


def wait_for(predicate, timeout: float = 60, what: str = "condition", interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def web_collection(root: Path, *, user: bool = True, plugins: str = "webshot,webcopy", **config: str) -> Waybox:
    """A collection whose plugins are the web fixture plugins, with an admin account."""
    wb = Waybox(root)
    root.mkdir(parents=True)
    wb("init")
    settings = {"PLUGIN_DIRS": str(WEB_PLUGINS), "PLUGINS": plugins, "RETRY_BACKOFF": "0", "TIMEOUT": "30",
                "BG_HOOK_GRACE": "1", **config}
    wb("config", *[arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")])
    if user:
        wb("manage", "createsuperuser", "--noinput", "--username", ADMIN_USER, "--email", "admin@example.com",
           env={"DJANGO_SUPERUSER_PASSWORD": ADMIN_PASSWORD})
    return wb


class Server:
    """`waybox server` as a child of the test, on a free port; stopped (and checked) by stop()."""

    def __init__(self, wb: Waybox, *args: str, env: dict | None = None, port: int | None = None):
        self.wb = wb
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = wb.data_dir / f"server-test-{self.port}.log"
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "waybox", "server", "--bind", f"127.0.0.1:{self.port}", "--workers", "2",
                 *args],
                env={**os.environ, "WAYBOX_DATA_DIR": str(wb.data_dir), **(env or {})},
                stdout=log, stderr=subprocess.STDOUT, cwd=wb.data_dir,
            )
        try:
            wait_for(self._ready, timeout=90, what="waybox server to start")
        except BaseException:
            self.stop(check=False)
            raise

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"waybox server exited {self.proc.returncode}:\n{self.log}")
        return "waybox is serving" in self.log

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def url(self, path: str) -> str:
        return self.base + path

    def stop(self, sig: int = signal.SIGTERM, *, check: bool = True) -> int | None:
        """Signal the server, wait for it, and make sure nothing of the collection still runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(90)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                if check:
                    raise AssertionError(f"waybox server ignored signal {sig}:\n{self.log}") from None
        left = kill_leftovers(self.wb.data_dir)
        if check:
            assert not left, f"processes left running after the server stopped: {left}"
        return self.proc.returncode


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        return None


class Response:
    def __init__(self, status: int, headers, body: bytes, url: str):
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Response {self.status} {self.url} {self.text[:300]!r}>"


class Client:
    """An HTTP client with a cookie jar; follows no redirects unless asked."""

    def __init__(self, base: str, token: str = ""):
        self.base = base
        self.token = token
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar), NoRedirect)
        self.follow = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def request(self, method: str, path: str, *, data: bytes | None = None, json_body=None, headers: dict | None = None,
                follow: bool = False, form: dict | None = None) -> Response:
        headers = dict(headers or {})
        if json_body is not None:
            data = json.dumps(json_body).encode()
            headers.setdefault("Content-Type", "application/json")
        if form is not None:
            data = urllib.parse.urlencode(form, doseq=True).encode()
            headers.setdefault("Content-Type", "application/x-www-form-urlencoded")
        if self.token:
            headers.setdefault("Authorization", f"Bearer {self.token}")
        url = path if path.startswith("http") else self.base + path
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        opener = self.follow if follow else self.opener
        try:
            with opener.open(req, timeout=60) as resp:
                return Response(resp.status, resp.headers, resp.read(), resp.url)
        except urllib.error.HTTPError as err:
            return Response(err.code, err.headers, err.read(), url)

    def get(self, path: str, **kw) -> Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw) -> Response:
        return self.request("POST", path, **kw)

    def cookie(self, name: str) -> str:
        return next((c.value for c in self.jar if c.name == name), "")

    def csrf_form(self, path: str) -> str:
        """The CSRF token of the form on `path`."""
        page = self.get(path, follow=True)
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert match, f"no CSRF token on {path}: {page!r}"
        return match.group(1)

    def login(self, username: str = ADMIN_USER, password: str = ADMIN_PASSWORD) -> Response:
        token = self.csrf_form("/login/")
        response = self.post("/login/", form={"csrfmiddlewaretoken": token, "username": username,
                                              "password": password, "next": "/"},
                             headers={"Referer": self.base + "/login/"})
        assert response.status == 302, response
        return response


def api_token(wb: Waybox, name: str = "tests") -> str:
    return wb("token", "create", "--user", ADMIN_USER, "--name", name).stdout.strip()


def wait_sealed(client: Client, crawl_id: str, timeout: float = 120) -> list[dict]:
    """The Crawl's Snapshots once all are sealed (polling the API)."""

    def sealed():
        items = client.get(f"/api/v1/snapshots?crawl_id={crawl_id}").json()["items"]
        return items if items and all(s["status"] == "sealed" for s in items) else None

    return wait_for(sealed, timeout=timeout, what=f"crawl {crawl_id} to seal", interval=0.3)


# -- a site to archive --------------------------------------------------------------------------

SITE_PAGES = {
    "index.html": """<!doctype html><html><head><title>Web fixture page</title></head>
<body><h1>Hello from the fixture site</h1><p>The quick archive jumps over the lazy web.</p>
<a href="second.html">second</a></body></html>""",
    "second.html": "<!doctype html><html><head><title>Second page</title></head><body>second</body></html>",
    # An archived page that tries to reach the UI's session and API from inside the archive.
    "hostile.html": """<!doctype html><html><head><title>Hostile page</title></head><body>
<pre id="report">running</pre>
<script>
(async function () {
  const out = {};
  try { out.cookie = document.cookie; } catch (e) { out.cookie = "error: " + e.name; }
  try { out.storage = String(window.localStorage.length); } catch (e) { out.storage = "error: " + e.name; }
  try {
    const r = await fetch("/api/v1/snapshots", {credentials: "include"});
    out.api = "status " + r.status + " " + (await r.text()).slice(0, 200);
  } catch (e) { out.api = "error: " + e.name; }
  try {
    const r = await fetch("/api/v1/crawls", {credentials: "include"});
    out.crawls = "status " + r.status;
  } catch (e) { out.crawls = "error: " + e.name; }
  try {
    await fetch("/api/v1/add", {method: "POST", credentials: "include", mode: "no-cors",
      headers: {"Content-Type": "text/plain"}, body: JSON.stringify({urls: ["http://evil.invalid/planted"]})});
    out.add = "sent";
  } catch (e) { out.add = "error: " + e.name; }
  try {
    const w = window.parent !== window ? window.parent.document.cookie : "no parent";
    out.parent = w;
  } catch (e) { out.parent = "error: " + e.name; }
  document.getElementById("report").textContent = JSON.stringify(out);
  document.body.setAttribute("data-done", "1");
})();
</script></body></html>""",
}


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def serve_site(root: Path):
    """SITE_PAGES written to `root` and served on 127.0.0.1 (random port); yields the base URL."""
    root.mkdir(parents=True, exist_ok=True)
    for name, body in SITE_PAGES.items():
        (root / name).write_text(body)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# -- chromium -----------------------------------------------------------------------------------


@contextlib.contextmanager
def chromium():
    """Debian's chromium driven by playwright; closed (and checked gone) afterwards."""
    from playwright.sync_api import sync_playwright

    before = {p.pid for p in psutil.process_iter()}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
    leftover = [p for p in psutil.process_iter(["name", "cmdline"])
                if p.pid not in before and "chrom" in " ".join(p.info["cmdline"] or []) and p.status() != "zombie"
                and "--user-data-dir=/tmp/playwright" in " ".join(p.info["cmdline"] or [])]
    for p in leftover:
        with contextlib.suppress(psutil.Error):
            p.kill()
    assert not leftover, f"chromium left running: {[p.pid for p in leftover]}"


def shot(page, name: str) -> Path:
    """A full-page screenshot kept for a person to look at."""
    SHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
