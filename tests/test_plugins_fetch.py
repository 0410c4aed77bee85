"""The non-browser built-in plugins (wget, git, ytdlp, favicon, headers) and the step-7 link
parsers, run as real hook subprocesses exactly as the engine runs them (BRIEF section 2):
CWD = <data>/archive/<snapshot_id>/<plugin>/, the five arguments, the resolved config in the
environment plus DATA_DIR/SNAP_DIR/CRAWL_DIR, their own process group; stdout must be JSONL.
Everything is served from 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from plugin_harness import BackgroundHook, HookHarness, HookResult, hook_path

from waybox import plugin_registry
from waybox.config import load_config

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SITE = FIXTURES / "site"
PLUGINS_DIR = Path(__file__).resolve().parent.parent / "waybox" / "plugins"
HOOKS = {
    "headers": ("on_Snapshot__60_headers.py", 6, False),
    "wget": ("on_Snapshot__61_wget.py", 6, False),
    "git": ("on_Snapshot__62_git.py", 6, False),
    "ytdlp": ("on_Snapshot__63_ytdlp.bg.py", 6, True),
    "favicon": ("on_Snapshot__64_favicon.py", 6, False),
    "parse_html_urls": ("on_Snapshot__70_parse_html_urls.py", 7, False),
    "parse_txt_urls": ("on_Snapshot__71_parse_txt_urls.py", 7, False),
    "parse_rss_urls": ("on_Snapshot__72_parse_rss_urls.py", 7, False),
    "parse_netscape_urls": ("on_Snapshot__73_parse_netscape_urls.py", 7, False),
    "parse_jsonl_urls": ("on_Snapshot__74_parse_jsonl_urls.py", 7, False),
    "parse_dom_outlinks": ("on_Snapshot__75_parse_dom_outlinks.py", 7, False),
}


# -- harness: tests/plugin_harness.py runs the hooks; this adapter adds strict checks ----------


@dataclass
class HookRun:
    exit_code: int
    records: list[dict]
    stderr: str
    cwd: Path
    seconds: float

    @classmethod
    def of_result(cls, done: HookResult) -> HookRun:
        assert not done.non_json, f"stdout must be JSONL records only, got {done.non_json}\n{done}"
        assert not done.timed_out, f"the hook had to be killed\n{done}"
        for record in done.records:
            assert "type" in record, record
        return cls(done.returncode, done.records, done.stderr, done.cwd, done.duration)

    def of(self, kind: str) -> list[dict]:
        return [r for r in self.records if r.get("type") == kind]

    @property
    def result(self) -> dict:
        results = self.of("ArchiveResult")
        assert results, f"no ArchiveResult record (exit {self.exit_code})\nstderr:\n{self.stderr}"
        return results[-1]

    @property
    def links(self) -> list[str]:
        return [r["url"] for r in self.of("Snapshot")]


@dataclass
class Snap:
    """One Snapshot folder in a throwaway data directory."""

    harness: HookHarness
    snapshot_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def dir(self) -> Path:
        return self.harness.snap_dir(self.snapshot_id)

    def _env(self, plugin: str, env: dict | None, timeout: int) -> dict[str, str]:
        full = {f"{plugin.upper()}_TIMEOUT": str(timeout), **(env or {})}
        if "CHROME_ENABLED" not in full:
            full["CHROME_ENABLED"] = ""  # whatever the developer's shell says: no browser here
        return full

    def start(self, plugin: str, url: str, env: dict | None = None, timeout: int = 60) -> BackgroundHook:
        return self.harness.start(hook_path(plugin, HOOKS[plugin][0]), url, self.snapshot_id,
                                  env=self._env(plugin, env, timeout))

    def run(self, plugin: str, url: str, env: dict | None = None, timeout: int = 60) -> HookRun:
        done = self.harness.run(hook_path(plugin, HOOKS[plugin][0]), url, self.snapshot_id,
                                env=self._env(plugin, env, timeout))
        return HookRun.of_result(done)


@pytest.fixture
def snap(tmp_path: Path) -> Snap:
    return Snap(HookHarness(tmp_path / "data", crawl_id=str(uuid.uuid4())))


# -- a recording server with a git repository, redirects and slow pages -----------------------


class Recorder(http.server.SimpleHTTPRequestHandler):
    requests: list[dict]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.requests.append({"path": self.path, "headers": dict(self.headers.items())})
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/index.html")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path.startswith("/slow"):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            for _ in range(60):
                time.sleep(0.5)
                try:
                    self.wfile.write(b"<p>still here</p>\n")
                    self.wfile.flush()
                except OSError:
                    return
            return
        super().do_GET()


@dataclass
class Served:
    url: str
    root: Path
    requests: list[dict]
    head: str = ""


def make_repo(root: Path, name: str) -> str:
    """A bare repository `root/name` with one commit, served over dumb HTTP; returns the commit."""
    work = root.parent / f"work-{name}"
    git = ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / "README.md").write_text("fixture repository: ocelot\n")
    subprocess.run([*git, "-C", str(work), "add", "README.md"], check=True)
    subprocess.run([*git, "-C", str(work), "commit", "-q", "-m", "first commit"], check=True)
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(root / name)], check=True)
    subprocess.run(["git", "-C", str(root / name), "update-server-info"], check=True)
    return subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """The fixture site copied to a temp folder, plus git repositories and an icon page."""
    base = tmp_path_factory.mktemp("served")
    root = base / "www"
    shutil.copytree(SITE, root)
    head = make_repo(root, "repo.git")
    make_repo(root, "project")  # a repository at a URL without .git: found by the ls-remote probe
    (root / "img").mkdir()
    (root / "img" / "icon.png").write_bytes((SITE / "favicon.ico").read_bytes()[22:])  # the PNG inside the ICO
    (root / "iconpage.html").write_text('<html><head><link rel="shortcut icon" href="/img/icon.png"></head>'
                                        "<body>icon</body></html>")
    requests: list[dict] = []
    handler = functools.partial(type("H", (Recorder,), {"requests": requests}), directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Served(f"http://127.0.0.1:{server.server_address[1]}", root, requests, head)
    server.shutdown()
    server.server_close()


def closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- plugin folders --------------------------------------------------------------------------


@pytest.mark.parametrize("plugin", sorted(HOOKS))
def test_plugin_folder_is_well_formed(plugin: str) -> None:
    loaded = plugin_registry.load_plugin(PLUGINS_DIR / plugin)
    name, step, background = HOOKS[plugin]
    hooks = loaded.hooks_for("Snapshot")
    assert [h.name for h in hooks] == [name]
    assert hooks[0].step == step and hooks[0].background is background
    props = loaded.schema["properties"]
    prefix = plugin.upper() + "_"
    assert f"{prefix}ENABLED" in props and f"{prefix}TIMEOUT" in props
    for key, schema in props.items():
        assert key.startswith(prefix), key
        assert schema.get("type") and schema.get("description"), key
        assert "default" in schema or "x-fallback" in schema, key
    assert (PLUGINS_DIR / plugin / "binaries.jsonl").exists()


def test_config_keys_resolve_with_aliases_and_fallbacks() -> None:
    config = load_config(None, env={"SAVE_WARC": "false", "TIMEOUT": "17", "MEDIA_MAX_SIZE": "10m",
                                    "CHECK_SSL_VALIDITY": "false", "USER_AGENT": "ua-test"})
    assert config["WGET_WARC"] is False
    assert config["WGET_TIMEOUT"] == 17 and config["GIT_TIMEOUT"] == 17
    assert config["YTDLP_TIMEOUT"] == 3600  # media is slow: not the global timeout
    assert config["YTDLP_MAX_SIZE"] == "10m"
    assert config["WGET_CHECK_SSL_VALIDITY"] is False and config["WGET_USER_AGENT"] == "ua-test"
    assert config.hook_env("wget")["WGET_ARGS"].startswith("[")


# -- wget ------------------------------------------------------------------------------------


def warcio_check(path: Path) -> subprocess.CompletedProcess:
    warcio = shutil.which("warcio") or str(Path(sys.executable).parent / "warcio")
    return subprocess.run([warcio, "check", "-v", str(path)], capture_output=True, text=True, timeout=60)


def test_wget_saves_page_requisites_and_a_valid_warc(snap: Snap, http_server: str) -> None:
    from warcio.archiveiterator import ArchiveIterator

    run = snap.run("wget", http_server + "/")
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["status"] == "succeeded"
    host = http_server.removeprefix("http://").replace(":", "+")
    assert result["output_str"] == f"{host}/index.html"
    page = run.cwd / result["output_str"]
    assert "zanzibar marmoset" in page.read_text()
    assert (run.cwd / host / "style.css").read_text() == (SITE / "style.css").read_text()
    assert (run.cwd / host / "index.html.orig").read_text() == (SITE / "index.html").read_text()
    for path in result["output_files"]:
        assert (run.cwd / path).is_file(), path

    warc = run.cwd / result["output_json"]["warc"]
    cdx = run.cwd / result["output_json"]["cdx"]
    check = warcio_check(warc)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest pass" in check.stdout and "fail" not in check.stdout.lower()
    responses = {}
    with warc.open("rb") as f:
        for record in ArchiveIterator(f):
            if record.rec_type == "response":
                responses[record.rec_headers.get_header("WARC-Target-URI")] = record.content_stream().read()
    assert b"zanzibar marmoset" in responses[http_server + "/"]
    assert responses[http_server + "/style.css"] == (SITE / "style.css").read_bytes()
    index = cdx.read_text()
    assert f"{http_server}/ " in index and f"{http_server}/style.css " in index

    [process] = run.of("Process")
    assert Path(process["cmd"][0]).name == "wget" and process["exit_code"] == 0
    assert process["cmd"][-1] == http_server + "/" and process["pid"] > 0
    assert process["started_at"] <= process["ended_at"]


def test_wget_passes_user_agent_cookies_ssl_and_extra_args(snap: Snap, served: Served, tmp_path: Path) -> None:
    cookies = tmp_path / "cookies.txt"
    host = "127.0.0.1"
    cookies.write_text(f"# Netscape HTTP Cookie File\n{host}\tFALSE\t/\tFALSE\t0\tsession\tsecret-cookie\n")
    env = {"USER_AGENT": "waybox-test-agent/1.0", "CHECK_SSL_VALIDITY": "False", "COOKIES_FILE": str(cookies),
           "WGET_EXTRA_ARGS": '["--header=X-Waybox-Test: yes"]', "WGET_WARC": "False"}
    before = len(served.requests)
    run = snap.run("wget", served.url + "/page2.html", env=env)
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "succeeded"
    [process] = run.of("Process")
    assert "--no-check-certificate" in process["cmd"]
    assert f"--load-cookies={cookies}" in process["cmd"]
    seen = [r for r in served.requests[before:] if r["path"] == "/page2.html"]
    assert seen, served.requests[before:]
    headers = seen[0]["headers"]
    assert headers["User-Agent"] == "waybox-test-agent/1.0"
    assert "secret-cookie" in headers.get("Cookie", "")
    assert headers["X-Waybox-Test"] == "yes"
    assert not (run.cwd / "warc").exists()


def test_wget_404_is_a_soft_failure(snap: Snap, http_server: str) -> None:
    run = snap.run("wget", http_server + "/no-such-page.html")
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "failed"
    assert "404" in run.result["output_str"]


def test_wget_unreachable_server_is_a_hard_failure(snap: Snap) -> None:
    run = snap.run("wget", f"http://127.0.0.1:{closed_port()}/", timeout=20)
    assert run.exit_code not in (0, 10)
    assert not [r for r in run.of("ArchiveResult") if r["status"] == "succeeded"]


def test_missing_binary_is_skipped_with_install_hint(snap: Snap, http_server: str) -> None:
    run = snap.run("wget", http_server + "/", env={"WGET_BINARY": "/nonexistent/wget"})
    assert run.exit_code == 10
    assert run.result["status"] == "skipped"
    assert "apt install wget" in run.result["output_str"]


@pytest.mark.parametrize("target", ["hook", "group"])
def test_sigterm_stops_hook_and_its_child_quickly(snap: Snap, served: Served, target: str) -> None:
    """SIGTERM to the hook alone, or to its process group as the engine does: it stops wget, reports
    the Process and exits non-zero (unfinished work is retried), within seconds."""
    hook = snap.start("wget", served.url + "/slow", timeout=120)
    child = None
    for _ in range(100):
        with contextlib.suppress(psutil.Error):
            child = next((c for c in psutil.Process(hook.pid).children() if c.name() == "wget"), None)
        if child is not None:
            break
        time.sleep(0.1)
    assert child is not None, "wget never started"
    time.sleep(0.5)
    if target == "hook":
        hook.proc.send_signal(signal.SIGTERM)
        done = hook.wait(15)
    else:
        done = hook.stop(grace=15)
    run = HookRun.of_result(done)
    assert run.exit_code not in (0, 10), done
    assert run.seconds < 15
    [process] = run.of("Process")
    assert process["pid"] == child.pid and process["ended_at"]
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_hook_enforces_its_own_timeout(snap: Snap, served: Served) -> None:
    run = snap.run("wget", served.url + "/slow", timeout=4)
    assert run.seconds < 12
    assert run.exit_code not in (0, 10) or run.result["status"] == "succeeded"
    assert run.of("Process")[0]["exit_code"] is not None


# -- git -------------------------------------------------------------------------------------


def test_git_clones_a_repository_over_dumb_http(snap: Snap, served: Served) -> None:
    run = snap.run("git", served.url + "/repo.git")
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["status"] == "succeeded" and result["output_str"] == "repo"
    assert result["output_json"]["head"] == served.head
    clone = run.cwd / "repo"
    assert (clone / "README.md").read_text() == "fixture repository: ocelot\n"
    log = subprocess.run(["git", "-C", str(clone), "log", "--format=%H %s"], capture_output=True, text=True)
    assert log.stdout.strip() == f"{served.head} first commit"
    assert any(Path(p["cmd"][0]).name == "git" and "clone" in p["cmd"] for p in run.of("Process"))
    assert not list(run.cwd.glob(".*partial"))


def test_git_probes_urls_without_extension(snap: Snap, served: Served) -> None:
    run = snap.run("git", served.url + "/project")
    assert run.exit_code == 0, run.stderr
    assert run.result["output_str"] == "project"
    assert (run.cwd / "project" / "README.md").exists()


def test_git_skips_pages_cheaply(snap: Snap, http_server: str) -> None:
    run = snap.run("git", http_server + "/index.html")
    assert run.exit_code == 10 and run.result["status"] == "skipped"
    assert not run.of("Process")  # no git process at all for a URL with a file extension
    run = snap.run("git", http_server + "/")
    assert run.exit_code == 10, run.stderr
    assert [p["cmd"][p["cmd"].index("--") - 2] for p in run.of("Process")] == ["ls-remote"]
    assert run.seconds < 10
    assert not [p for p in run.cwd.iterdir()]


# -- ytdlp -----------------------------------------------------------------------------------


def test_ytdlp_downloads_media_and_metadata(snap: Snap, served: Served) -> None:
    run = snap.run("ytdlp", served.url + "/media.html", timeout=120)
    assert run.exit_code == 0, run.stderr
    result = run.result
    assert result["status"] == "succeeded", run.stderr
    media = run.cwd / result["output_str"]
    assert media.suffix == ".wav"
    assert hashlib.sha256(media.read_bytes()).digest() == hashlib.sha256((SITE / "clip.wav").read_bytes()).digest()
    assert list(run.cwd.glob("*.info.json"))
    assert result["output_json"]["id"]
    assert any("yt-dlp" in " ".join(p["cmd"]) or "yt_dlp" in " ".join(p["cmd"]) for p in run.of("Process"))


def test_ytdlp_recognises_media_that_wget_saved(snap: Snap, served: Served) -> None:
    assert snap.run("wget", served.url + "/clip.wav").exit_code == 0
    run = snap.run("ytdlp", served.url + "/clip.wav", timeout=120)
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "succeeded"
    assert (run.cwd / run.result["output_str"]).read_bytes() == (SITE / "clip.wav").read_bytes()


def test_ytdlp_skips_pages_without_media_quickly(snap: Snap, http_server: str) -> None:
    run = snap.run("ytdlp", http_server + "/index.html")
    assert run.exit_code == 10, run.stderr
    assert run.result["status"] == "skipped"
    assert not run.of("Process")  # decided without starting yt-dlp
    assert run.seconds < 8


def test_ytdlp_max_size_is_respected(snap: Snap, served: Served) -> None:
    run = snap.run("ytdlp", served.url + "/clip.wav", env={"YTDLP_MAX_SIZE": "1k"}, timeout=120)
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "failed"
    assert "YTDLP_MAX_SIZE" in run.result["output_str"]
    assert not list(run.cwd.glob("*.wav"))


# -- favicon and headers ---------------------------------------------------------------------


def test_favicon_falls_back_to_favicon_ico(snap: Snap, http_server: str) -> None:
    run = snap.run("favicon", http_server + "/")
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "succeeded" and run.result["output_str"] == "favicon.ico"
    assert (run.cwd / "favicon.ico").read_bytes() == (SITE / "favicon.ico").read_bytes()


def test_favicon_prefers_the_declared_icon(snap: Snap, served: Served) -> None:
    run = snap.run("favicon", served.url + "/iconpage.html")
    assert run.exit_code == 0, run.stderr
    assert run.result["output_str"] == "favicon.png"
    assert run.result["output_json"]["url"] == served.url + "/img/icon.png"


def test_favicon_missing_is_a_soft_failure(snap: Snap, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "index.html").write_text("<html><body>no icon</body></html>")
    handler = functools.partial(type("H", (Recorder,), {"requests": []}), directory=str(empty))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = snap.run("favicon", f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "failed" and "no favicon" in run.result["output_str"]


def header(data: dict, name: str) -> str:
    """Headers are kept as the server spelled them: look them up without regard to case."""
    return next(v for k, v in data["headers"].items() if k.lower() == name.lower())


def test_headers_without_browser_records_redirects(snap: Snap, served: Served) -> None:
    run = snap.run("headers", served.url + "/redirect", env={"CHROME_ENABLED": "False"})
    assert run.exit_code == 0, run.stderr
    assert run.result["status"] == "succeeded" and run.result["output_str"] == "headers.json"
    data = json.loads((run.cwd / "headers.json").read_text())
    assert data["status"] == 200
    assert data["final_url"] == served.url + "/index.html"
    assert data["redirects"] == [{"url": served.url + "/redirect", "status": 302,
                                  "location": served.url + "/index.html"}]
    assert header(data, "Content-Type").startswith("text/html")
    assert header(data, "Server").startswith("SimpleHTTP")


def test_headers_unset_chrome_counts_as_off(snap: Snap, http_server: str) -> None:
    run = snap.run("headers", http_server + "/style.css")
    assert run.exit_code == 0, run.stderr
    assert header(json.loads((run.cwd / "headers.json").read_text()), "content-type") == "text/css"


def test_headers_skipped_when_the_browser_is_on(snap: Snap, http_server: str) -> None:
    run = snap.run("headers", http_server + "/", env={"CHROME_ENABLED": "True"})
    assert run.exit_code == 10 and run.result["status"] == "skipped"
    assert not (run.cwd / "headers.json").exists()


# -- step 7 parsers --------------------------------------------------------------------------


def test_parse_html_urls_reads_wgets_copy(snap: Snap, http_server: str, served: Served) -> None:
    assert snap.run("wget", http_server + "/").exit_code == 0
    run = snap.run("parse_html_urls", http_server + "/")
    assert run.exit_code == 0, run.stderr
    assert run.links == [http_server + "/page2.html"]
    assert run.result["output_json"]["source"].startswith("wget/")
    lines = (run.cwd / "urls.jsonl").read_text().splitlines()
    assert [json.loads(line)["url"] for line in lines] == run.links


def test_parse_html_urls_fetches_when_wget_did_not_run(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_html_urls", http_server + "/links.html")
    assert run.exit_code == 0, run.stderr
    assert run.links == [http_server + "/page2.html", http_server + "/index.html", "https://example.com/external?q=1"]
    assert run.of("Snapshot")[0]["title"] == "Second page"


def test_parse_html_urls_follows_redirects_for_the_base(snap: Snap, served: Served) -> None:
    run = snap.run("parse_html_urls", served.url + "/redirect")
    assert run.exit_code == 0, run.stderr
    assert run.links == [served.url + "/page2.html"]


@pytest.mark.parametrize("plugin", ["parse_txt_urls", "parse_rss_urls", "parse_netscape_urls", "parse_jsonl_urls"])
def test_other_parsers_skip_an_html_page(snap: Snap, http_server: str, plugin: str) -> None:
    run = snap.run(plugin, http_server + "/index.html")
    assert run.exit_code == 10, run.stderr
    assert run.result["status"] == "skipped" and not run.links


def test_parse_html_urls_skips_a_feed(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_html_urls", http_server + "/feed.rss")
    assert run.exit_code == 10 and "RSS" in run.result["output_str"]


def test_parse_txt_urls(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_txt_urls", http_server + "/links.txt")
    assert run.exit_code == 0, run.stderr
    assert run.links == ["https://example.com/txt/1", "https://example.com/txt/2", "https://example.com/txt/3"]


def test_parse_txt_urls_reads_pocket_csv(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_txt_urls", http_server + "/pocket.csv")
    assert run.exit_code == 0, run.stderr
    assert run.of("Snapshot")[0] == {"type": "Snapshot", "url": "https://example.com/pocket/1", "title": "Pocket one",
                                     "tags": ["news", "later"], "bookmarked_at": "2023-11-14T22:13:20+00:00"}


def test_parse_rss_urls_rss_and_atom(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_rss_urls", http_server + "/feed.rss")
    assert run.exit_code == 0, run.stderr
    assert run.links == ["https://example.com/posts/1", "https://example.com/posts/2?ref=rss",
                         "https://example.com/posts/3"]
    first = run.of("Snapshot")[0]
    assert first["title"] == "First post & more" and first["tags"] == ["news", "tech"]
    assert first["bookmarked_at"] == "2003-06-10T04:00:00+00:00"
    run = snap.run("parse_rss_urls", http_server + "/feed.atom")
    assert run.exit_code == 0, run.stderr
    assert run.links == ["https://example.org/blog/one", "https://example.org/blog/two"]
    assert run.result["output_json"]["format"] == "atom"


def test_parse_netscape_urls_keeps_tags_and_dates(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_netscape_urls", http_server + "/bookmarks.html")
    assert run.exit_code == 0, run.stderr
    assert run.of("Snapshot") == [
        {"type": "Snapshot", "url": "https://example.net/article", "title": "An article",
         "tags": ["reading", "longform"], "bookmarked_at": "2023-11-14T22:13:21+00:00"},
        {"type": "Snapshot", "url": "https://example.net/tool#usage", "title": "A tool & its docs",
         "tags": ["tools"], "bookmarked_at": "2020-09-13T12:26:40+00:00"},
        {"type": "Snapshot", "url": "https://example.net/plain", "title": "No tags or date"},
    ]


def test_parse_jsonl_urls_jsonl_and_pinboard(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_jsonl_urls", http_server + "/links.jsonl")
    assert run.exit_code == 0, run.stderr
    assert run.links == ["https://example.com/jsonl/1", "https://example.com/jsonl/2", "https://example.com/jsonl/3"]
    run = snap.run("parse_jsonl_urls", http_server + "/pinboard.json")
    assert run.exit_code == 0, run.stderr
    assert run.links == ["https://example.com/pin/1", "https://example.com/pin/2"]
    assert run.of("Snapshot")[0]["tags"] == ["python", "web"]


def test_parse_dom_outlinks(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_dom_outlinks", http_server + "/")
    assert run.exit_code == 10 and "dom/output.html" in run.result["output_str"]
    dom = snap.dir / "dom"
    dom.mkdir(parents=True, exist_ok=True)
    (dom / "output.html").write_text('<html><body><a href="page2.html">static</a>'
                                     '<a href="/added-by-script">dynamic</a><a href="/">self</a></body></html>')
    run = snap.run("parse_dom_outlinks", http_server + "/")
    assert run.exit_code == 0, run.stderr
    assert run.links == [http_server + "/page2.html", http_server + "/added-by-script"]


def test_parser_404_is_skipped(snap: Snap, http_server: str) -> None:
    run = snap.run("parse_rss_urls", http_server + "/missing.rss")
    assert run.exit_code == 10 and "404" in run.result["output_str"]


def test_process_records_hide_secrets() -> None:
    from waybox.hookkit import redact

    assert redact(["wget", "--header=Authorization: Bearer abc", "--http-password=pw", "--password", "pw2",
                   "http://user:pass@example.com/x", "--header", "Cookie: a=b", "--header=X-Ok: 1"]) == [
        "wget", "--header=Authorization: ********", "--http-password=********", "--password", "********",
        "http://user:********@example.com/x", "--header", "Cookie: ********", "--header=X-Ok: 1"]
