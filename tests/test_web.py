"""The web UI through a real `waybox server` (gunicorn + orchestrator) and real chromium.

The collection's only plugins are the fixture plugins in tests/fixtures/web_plugins
(`webcopy` saves the page, `webshot` draws a small PNG "screenshot"), so these tests do not
depend on the browser plugins. Screenshots of every page go to $WAYBOX_WEB_SHOTS
(default /tmp/waybox-web-shots) for a person to look at.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, Waybox
from tests.web_helpers import (
    ADMIN_PASSWORD,
    ADMIN_USER,
    Client,
    Server,
    api_token,
    chromium,
    free_port,
    serve_site,
    shot,
    wait_for,
    wait_sealed,
    web_collection,
)

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with serve_site(tmp_path_factory.mktemp("site")) as base:
        yield base


@pytest.fixture(scope="module")
def env(tmp_path_factory, site):
    """One collection served by `waybox server` (with its orchestrator) for this module."""
    wb = web_collection(tmp_path_factory.mktemp("web") / "collection", WEBSHOT_SLEEP="1.5")
    server = Server(wb)
    token = api_token(wb)
    try:
        yield wb, server, token
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


def login_page(browser, base: str, *, username: str = ADMIN_USER, password: str = ADMIN_PASSWORD):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    page.goto(base + "/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")
    page.console_errors = errors
    return context, page


def add_by_api(server: Server, token: str, *urls: str, **extra) -> str:
    response = Client(server.base, token).post("/api/v1/add", json_body={"urls": list(urls), **extra})
    assert response.status == 201, response
    return response.json()["crawl_id"]


# -- the main path: log in, add, watch, open ---------------------------------------------------


def test_login_add_watch_progress_and_open_the_snapshot(env, site, browser) -> None:
    wb, server, token = env
    context, page = login_page(browser, server.base)
    try:
        shot(page, "01-index-empty")
        page.click("nav >> text=Add")
        page.fill("#id_urls", f"{site}/index.html")
        page.fill("#id_tags", "fixtures, web")
        shot(page, "02-add-filled")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/progress/\?crawl=.*"))
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads
        page.wait_for_selector("#snapshots .hookchip", timeout=60_000)  # a hook running, with its elapsed time
        assert "webshot" in page.text_content("#snapshots") or "webcopy" in page.text_content("#snapshots")
        shot(page, "03-progress-running")
        page.wait_for_selector("#crawls tr[data-status=sealed]", timeout=120_000)
        page.wait_for_selector("#recent tr[data-status=sealed] a")
        assert page.evaluate("window.__sameDocument") is True, "the progress page reloaded instead of updating"
        shot(page, "04-progress-done")
        page.click("#recent tr[data-status=sealed] a")
        page.wait_for_selector("h1")
        assert page.text_content("h1").strip() == "Web fixture page"
        image = page.wait_for_selector("#output-webshot img.shot")
        wait_for(lambda: page.evaluate("(img) => img.complete && img.naturalWidth", image) == 320,
                 what="the screenshot to load")
        assert "succeeded" in page.text_content("table.results")
        assert page.locator("#output-webcopy iframe").count() == 1
        page.click("table.results tr[data-plugin=webshot] summary:has-text('stderr')")
        assert "drew a 320x200 screenshot" in page.text_content("table.results tr[data-plugin=webshot]")
        shot(page, "05-snapshot")
        assert not page.console_errors, page.console_errors  # CSP violations show here
    finally:
        context.close()


def test_archived_scripts_get_neither_cookies_nor_the_api(env, site, browser) -> None:
    wb, server, token = env
    api = Client(server.base, token)
    crawl_id = add_by_api(server, token, f"{site}/hostile.html")
    (snap,) = wait_sealed(api, crawl_id)
    url = f"/archive/{snap['id']}/webcopy/page.html"
    headers = api.get(url).headers  # the token is no cookie: archived files take the session only
    client = Client(server.base)
    client.login()
    response = client.get(url)
    assert response.status == 200
    csp = response.headers["Content-Security-Policy"]
    assert "sandbox" in csp and "allow-same-origin" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert headers is not None
    context, page = login_page(browser, server.base)
    try:
        assert any(c["name"] == "waybox_session" and c["httpOnly"] for c in context.cookies())
        page.goto(server.base + url)
        page.wait_for_selector("body[data-done]", timeout=20_000)
        report = json.loads(page.text_content("#report"))
        shot(page, "06-archived-hostile-page")
        assert report["cookie"] in ("", "error: SecurityError"), report
        assert report["storage"].startswith("error"), report
        assert report["api"].startswith("error") or not report["api"].startswith("status 200"), report
        assert report["crawls"].startswith("error") or report["crawls"] in ("status 401", "status 403"), report
        # the blind POST went out, but without the session: nothing was added
        crawls = api.get("/api/v1/crawls?limit=500").json()
        assert not any("evil.invalid" in u for c in crawls for u in c["urls"]), crawls
        # framed in the snapshot page's preview, it gets no scripts at all
        page.goto(f"{server.base}/snapshot/{snap['id']}/")
        frame = page.frame_locator("#output-webcopy iframe")
        frame.locator("#report").wait_for()
        time.sleep(0.5)
        assert frame.locator("#report").text_content() == "running"
    finally:
        context.close()


def test_anonymous_visitors_see_only_what_public_settings_allow(env, site) -> None:
    wb, server, token = env
    crawl_id = add_by_api(server, token, f"{site}/second.html")
    (snap,) = wait_sealed(Client(server.base, token), crawl_id)
    anon = Client(server.base)
    pages = {"index": "/", "snapshot": f"/snapshot/{snap['id']}/", "file": f"/archive/{snap['id']}/webcopy/page.html",
             "add": "/add/", "progress": "/progress/", "admin": "/admin/"}

    def status_of(name: str) -> int:
        return anon.get(pages[name]).status

    def set_public(**flags: bool) -> None:
        wb("config", *[a for k, v in flags.items() for a in ("--set", f"{k}={str(v).lower()}")])
        time.sleep(2.5)  # the server re-reads waybox.toml every 2 seconds

    try:
        for name in pages:
            response = anon.get(pages[name])
            assert response.status == 302 and "login" in response.headers["Location"], (name, response)
        assert anon.get("/api/v1/snapshots").status == 401
        assert anon.post("/api/v1/add", json_body={"urls": ["https://example.com/"]}).status == 401

        set_public(PUBLIC_INDEX=True)
        index = anon.get("/")
        assert index.status == 200 and "Second page" in index.text
        assert f"/snapshot/{snap['id']}/" not in index.text  # titles are not links for them
        assert anon.get("/api/v1/snapshots").json()["count"] >= 1
        assert status_of("snapshot") == 302 and status_of("file") == 302 and status_of("add") == 302
        assert anon.get(f"/api/v1/snapshots/{snap['id']}").status == 401
        assert anon.get("/api/v1/crawls").status == 401 and anon.get("/api/v1/processes").status == 401

        set_public(PUBLIC_SNAPSHOTS=True)
        assert status_of("snapshot") == 200 and status_of("file") == 200
        assert anon.get(f"/archive/{snap['id']}/.hooks/").status == 404  # hook logs stay private
        assert status_of("add") == 302 and status_of("admin") == 302

        set_public(PUBLIC_ADD=True)
        assert status_of("add") == 200
        added = anon.post("/api/v1/add", json_body={"urls": [f"{site}/second.html?anon=1"]})
        assert added.status == 201, added
        assert status_of("admin") == 302  # the admin never opens to anonymous visitors
        assert anon.get("/api/v1/crawls").status == 401
        bad = Client(server.base, "wbx_not-a-real-token")
        assert bad.get("/api/v1/snapshots").status == 401  # a bad token is refused even where public
    finally:
        set_public(PUBLIC_INDEX=False, PUBLIC_SNAPSHOTS=False, PUBLIC_ADD=False)
    assert anon.get("/").status == 302


def raw_get(server: Server, path: str, cookie: str = "") -> int:
    """GET with the path sent exactly as written (no client-side normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        if cookie:
            conn.putheader("Cookie", cookie)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_archive_paths_stay_inside_the_snapshot_folder(env, site) -> None:
    wb, server, token = env
    crawl_id = add_by_api(server, token, f"{site}/index.html?paths=1")
    (snap,) = wait_sealed(Client(server.base, token), crawl_id)
    folder = wb.data_dir / "archive" / snap["id"]
    (folder / "webcopy" / "escape.txt").symlink_to(wb.data_dir / "waybox.toml")
    (folder / "webcopy" / "escape-dir").symlink_to(wb.data_dir, target_is_directory=True)
    client = Client(server.base)
    client.login()
    cookie = "; ".join(f"{c.name}={c.value}" for c in client.jar)
    base = f"/archive/{snap['id']}"
    assert raw_get(server, f"{base}/webcopy/page.html", cookie) == 200
    for attack in ("/../../waybox.toml", "/webcopy/../../../waybox.toml", "/%2e%2e/%2e%2e/waybox.toml",
                   "/..%2f..%2fwaybox.toml", "/webcopy/escape.txt", "/webcopy/escape-dir/waybox.toml",
                   "//etc/passwd", "/%2fetc%2fpasswd", "/webcopy/page.html%00.txt", "/webcopy/nope.html"):
        assert raw_get(server, base + attack, cookie) in (404, 400), attack
    other = "01a20000-0000-7000-8000-000000000000"
    assert raw_get(server, f"/archive/{other}/index.json", cookie) == 404
    text = client.get(f"{base}/webcopy/content.txt")
    assert text.status == 200 and text.headers["Content-Type"] == "text/plain; charset=utf-8"
    part = client.get(f"{base}/webcopy/page.html", headers={"Range": "bytes=0-9"})
    assert part.status == 206 and len(part.body) == 10
    assert client.get(f"{base}/webcopy/").status == 200  # a folder listing, sandboxed like the files


def test_forms_need_csrf_and_cookies_are_httponly(env) -> None:
    wb, server, token = env
    client = Client(server.base)
    login = client.login()
    cookies = login.headers.get_all("Set-Cookie")
    session = next(c for c in cookies if c.startswith("waybox_session="))
    assert "HttpOnly" in session and "SameSite=Lax" in session
    assert client.post("/add/", form={"urls": "https://example.com/"}).status == 403  # no CSRF token
    assert client.post("/api/v1/add", json_body={"urls": ["https://example.com/"]}).status == 403
    token_value = client.csrf_form("/add/")
    ok = client.post("/add/", form={"csrfmiddlewaretoken": token_value, "urls": "https://example.com/csrf-ok",
                                    "depth": "0"}, headers={"Referer": server.base + "/add/"})
    assert ok.status == 302 and "/progress/" in ok.headers["Location"]
    assert client.post("/logout/", form={}).status == 403  # logging out is a form too


def test_add_page_explains_bad_input(env, browser) -> None:
    wb, server, token = env
    context, page = login_page(browser, server.base)
    try:
        page.goto(server.base + "/add/")
        page.fill("#id_urls", "not a url\nftp:/broken")
        page.click("button[type=submit]")
        page.wait_for_selector(".error")
        assert "No URL found in the URLs given" in page.text_content(".error")
        shot(page, "07-add-error")
        page.fill("#id_urls", "https://example.com/ok\nnot-a-url-either")
        page.click("summary:has-text('Plugins')")
        page.check("input[value=webshot]")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/progress/.*"))
        assert "Queued 1 URL" in page.text_content(".messages")
    finally:
        context.close()


def test_rerun_one_plugin_then_delete_with_preview(env, site, browser) -> None:
    wb, server, token = env
    api = Client(server.base, token)
    crawl_id = add_by_api(server, token, f"{site}/index.html?rerun=1")
    (snap,) = wait_sealed(api, crawl_id)
    before = {r["plugin"]: r for r in api.get(f"/api/v1/snapshots/{snap['id']}").json()["archiveresults"]}
    context, page = login_page(browser, server.base)
    try:
        page.goto(f"{server.base}/snapshot/{snap['id']}/")
        page.click("table.results tr[data-plugin=webshot] button:has-text('Re-run')")
        page.wait_for_selector(".messages")
        assert "Re-running 1 hook" in page.text_content(".messages")

        def rerun_done():
            data = api.get(f"/api/v1/snapshots/{snap['id']}").json()
            results = {r["plugin"]: r for r in data["archiveresults"]}
            return data["status"] == "sealed" and results["webshot"]["ended_at"] != before["webshot"]["ended_at"] \
                and results

        after = wait_for(rerun_done, timeout=90, what="the re-run to finish")
        assert after["webshot"]["status"] == "succeeded" and after["webshot"]["attempts"] == 1
        assert after["webcopy"]["ended_at"] == before["webcopy"]["ended_at"]  # the other plugin did not run
        page.goto(f"{server.base}/snapshot/{snap['id']}/")
        page.click("text=Delete…")
        page.wait_for_selector("text=Delete this Snapshot?")
        assert "archive result" in page.text_content("main")
        shot(page, "08-delete-confirm")
        page.click("button.danger")
        page.wait_for_url(server.base + "/")
        assert api.get(f"/api/v1/snapshots/{snap['id']}").status == 404
        assert not (wb.data_dir / "archive" / snap["id"]).exists()
    finally:
        context.close()


def test_every_page_renders_cleanly_for_a_person(env, site, browser) -> None:
    """Screenshots of each page (index with filters, admin, API docs...) and no console errors."""
    wb, server, token = env
    crawl_id = add_by_api(server, token, f"{site}/index.html?shots=1", f"{site}/second.html?shots=1",
                          tags=["shots"])
    snaps = wait_sealed(Client(server.base, token), crawl_id)
    context, page = login_page(browser, server.base)
    try:
        for name, path in [("09-index", "/"), ("10-index-filtered", "/?q=fixture&tag=shots&status=sealed"),
                           ("11-index-no-match", "/?q=zzzz-nothing"), ("12-progress-idle", "/progress/"),
                           ("13-api-docs", "/api/v1/docs"), ("14-admin", "/admin/"),
                           ("15-admin-snapshots", "/admin/waybox/snapshot/"),
                           ("16-admin-tokens", "/admin/waybox/apitoken/"),
                           ("17-admin-process-tree", None)]:
            if path is None:
                rows = Client(server.base, token).get("/api/v1/processes?type=server&status=running").json()
                top = next(r for r in rows if "server" in r["cmd"] and not any("gunicorn" in c for c in r["cmd"]))
                path = f"/admin/waybox/process/{top['id']}/tree/"
            page.goto(server.base + path)
            page.wait_for_load_state("networkidle")
            if name == "13-api-docs":
                page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
            shot(page, name)
        assert page.locator("#process-tree").count() == 1
        # an API token made in the admin is shown once and works
        page.goto(server.base + "/admin/waybox/apitoken/add/")
        page.fill("#id_name", "from-the-admin")
        page.click("input[name=_save]")
        secret = re.search(r"(wbx_[\w-]+)", page.text_content(".messagelist")).group(1)
        assert Client(server.base, secret).get("/api/v1/crawls").status == 200
        page.goto(server.base + "/admin/waybox/apitoken/")
        assert "from-the-admin" in page.content() and secret not in page.content()  # shown once only
        # the admin's delete action shows what goes before anything is deleted
        page.goto(server.base + "/admin/waybox/snapshot/?q=shots%3D1")
        page.check(f"input[name=_selected_action][value='{snaps[0]['id']}']")
        page.select_option("select[name=action]", "delete_with_files")
        page.click("button[name=index]")
        page.wait_for_selector("text=This deletes, for good")
        shot(page, "18-admin-delete-preview")
        page.click("input[value='Yes, delete them']")
        page.wait_for_selector(".messagelist")
        assert "Deleted 1 Snapshot" in page.text_content(".messagelist")
        assert not (wb.data_dir / "archive" / snaps[0]["id"]).exists()
        ui_errors = [e for e in page.console_errors if not e.startswith("Failed to load resource")]
        assert not ui_errors, ui_errors
    finally:
        context.close()
    anon = browser.new_context()
    try:
        page = anon.new_page()
        page.goto(server.base + "/")
        page.wait_for_selector("#id_username")
        shot(page, "19-login")
    finally:
        anon.close()


MINIMAL_PDF = (b"%PDF-1.1\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj 2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>"
               b"endobj 3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 100]>>endobj\n"
               b"trailer<</Root 1 0 R>>\n%%EOF\n")


def test_snapshot_page_shows_every_kind_of_output(env, site, browser) -> None:
    """PDF, wget copy with its WARC, readable text, media, headers, favicon, a failure: as the
    browser plugins lay them out, written here beside a real Snapshot's own outputs."""
    wb, server, token = env
    crawl_id = add_by_api(server, token, f"{site}/index.html?kinds=1")
    (snap,) = wait_sealed(Client(server.base, token), crawl_id)
    folder = wb.data_dir / "archive" / snap["id"]
    files = {
        "pdf/output.pdf": MINIMAL_PDF,
        "wget/127.0.0.1/index.html": (Path(__file__).parent / "fixtures/site/index.html").read_bytes(),
        "wget/warc/20260101.warc.gz": b"\x1f\x8b fake warc",
        "readability/content.html": b"<html><body><article><h1>Readable</h1><p>Clean text.</p></article></body></html>",
        "readability/content.txt": b"Readable\nClean text.\n",
        "ytdlp/clip.wav": (Path(__file__).parent / "fixtures/site/clip.wav").read_bytes(),
        "headers/headers.json": json.dumps({"status": 200, "content-type": "text/html"}).encode(),
        "favicon/favicon.ico": (Path(__file__).parent / "fixtures/site/favicon.ico").read_bytes(),
    }
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    rows = [("pdf", "on_Snapshot__52_pdf.py", "succeeded", "output.pdf", ["pdf/output.pdf"]),
            ("wget", "on_Snapshot__61_wget.py", "succeeded", "127.0.0.1/index.html",
             ["wget/127.0.0.1/index.html", "wget/warc/20260101.warc.gz"]),
            ("readability", "on_Snapshot__55_readability.py", "succeeded", "content.html",
             ["readability/content.html", "readability/content.txt"]),
            ("ytdlp", "on_Snapshot__63_ytdlp.py", "succeeded", "clip.wav", ["ytdlp/clip.wav"]),
            ("headers", "on_Snapshot__60_headers.py", "succeeded", "headers.json", ["headers/headers.json"]),
            ("favicon", "on_Snapshot__64_favicon.py", "succeeded", "favicon.ico", ["favicon/favicon.ico"]),
            ("git", "on_Snapshot__62_git.py", "failed", "exit 1: not a git repository", [])]
    code = "from waybox.models import ArchiveResult\n" + "".join(
        f"ArchiveResult.objects.create(snapshot_id={snap['id']!r}, plugin={p!r}, hook_name={h!r}, status={st!r}, "
        f"output_str={o!r}, output_files={f!r}, attempts=1, retry_at=None)\n" for p, h, st, o, f in rows)
    wb("manage", "shell", "-c", code)
    context, page = login_page(browser, server.base)
    try:
        page.goto(server.base + "/?q=kinds")
        favicon = page.wait_for_selector("td.fav img")
        wait_for(lambda: page.evaluate("(img) => img.complete && img.naturalWidth > 0", favicon),
                 what="the favicon")
        page.goto(f"{server.base}/snapshot/{snap['id']}/")
        labels = page.locator(".output header strong").all_text_contents()
        for label in ("Screenshot", "PDF", "Archived page", "Readable text", "Media", "Data"):
            assert label in labels, labels
        assert page.locator("#output-ytdlp audio").count() == 1
        assert "content-type" in page.text_content("#output-headers pre.preview")
        assert page.locator("#output-wget iframe").count() == 1
        warc = page.locator(".downloads a")
        assert warc.count() == 1 and warc.get_attribute("download") is not None
        download = Client(server.base)
        download.login()
        got = download.get(warc.get_attribute("href"))
        assert got.status == 200 and "attachment" in got.headers["Content-Disposition"]
        pdf = download.get(f"/archive/{snap['id']}/pdf/output.pdf")
        assert pdf.headers["Content-Type"] == "application/pdf" and "sandbox" in pdf.headers["Content-Security-Policy"]
        assert "not a git repository" in page.text_content("table.results tr[data-plugin=git]")
        shot(page, "23-snapshot-every-output")
        assert not page.console_errors, page.console_errors
        # the admin's "retry failed" action runs the failed result again (its hook is gone: skipped)
        page.goto(server.base + "/admin/waybox/snapshot/?q=kinds%3D1")
        page.check(f"input[name=_selected_action][value='{snap['id']}']")
        page.select_option("select[name=action]", "retry_failed")
        page.click("button[name=index]")
        assert "1 failed result(s) queued" in page.text_content(".messagelist")
        api = Client(server.base, token)

        def git_result():
            data = api.get(f"/api/v1/snapshots/{snap['id']}").json()
            git = next(r for r in data["archiveresults"] if r["plugin"] == "git")
            return data["status"] == "sealed" and git["status"] != "queued" and git

        git = wait_for(git_result, timeout=60, what="the retried result")
        assert git["status"] == "skipped" and git["attempts"] == 1, git  # git is not among PLUGINS here
    finally:
        context.close()


def test_server_process_tree_and_orchestrator(env) -> None:
    wb, server, token = env
    running = wb.json("process", "list", "--running", "--json")
    by_id = {p["id"]: p for p in running}
    servers = [p for p in running if p["type"] == "server"]
    top = [p for p in servers if "server" in p["cmd"] and "gunicorn" not in p["cmd"]]
    assert len(top) == 1, servers
    gunicorn = [p for p in servers if "gunicorn" in p["cmd"] and p["parent_id"] == top[0]["id"]]
    assert gunicorn, servers
    workers = [p for p in servers if by_id.get(p["parent_id"], {}).get("id") in {g["id"] for g in gunicorn}]
    assert len(workers) >= 2, servers
    orchestrators = [p for p in running if p["type"] == "orchestrator"]
    assert [o["parent_id"] for o in orchestrators] == [top[0]["id"]], orchestrators


# -- separate archive origin, first run, SIGINT, scale ---------------------------------------


def test_separate_archive_origin(tmp_path, site, browser) -> None:
    port = free_port()
    wb = web_collection(tmp_path / "collection", ARCHIVE_ORIGIN=f"http://localhost:{port}")
    server = Server(wb, port=port)
    try:
        token = api_token(wb)
        crawl_id = add_by_api(server, token, f"{site}/index.html", f"{site}/hostile.html")
        snaps = {s["title"]: s for s in wait_sealed(Client(server.base, token), crawl_id)}
        context, page = login_page(browser, server.base)
        try:
            page.goto(f"{server.base}/snapshot/{snaps['Web fixture page']['id']}/")
            image = page.wait_for_selector("#output-webshot img.shot")
            assert image.get_attribute("src").startswith(f"http://localhost:{port}/archive/")
            wait_for(lambda: page.evaluate("(img) => img.complete && img.naturalWidth", image) == 320,
                     what="the screenshot from the archive origin")
            shot(page, "20-snapshot-archive-origin")
            page.goto(f"{server.base}/archive/{snaps['Hostile page']['id']}/webcopy/page.html")
            page.wait_for_selector("body[data-done]", timeout=20_000)
            assert page.url.startswith(f"http://localhost:{port}/archive/")  # redirected, grant removed
            assert "grant=" not in page.url
            report = json.loads(page.text_content("#report"))
            assert report["cookie"] in ("", "error: SecurityError"), report
            assert report["api"].startswith("error") or "404" in report["api"], report
        finally:
            context.close()
        other_origin = Client(f"http://localhost:{port}")
        assert other_origin.get("/api/v1/snapshots").status == 404  # the archive origin serves files only
        assert other_origin.get("/admin/").status == 404
        assert other_origin.get(f"/archive/{snaps['Web fixture page']['id']}/webshot/screenshot.png").status == 403
        assert other_origin.get(f"/archive/{snaps['Web fixture page']['id']}/index.json?grant=forged").status == 403
    finally:
        server.stop()


def test_first_run_setup_link_then_sigint_stops_everything(tmp_path, browser) -> None:
    wb = web_collection(tmp_path / "collection", user=False)
    server = Server(wb)
    stopped = False
    try:
        match = wait_for(lambda: re.search(r"(http://\S+/setup/\?token=\S+)", server.log), what="the setup link")
        link = match.group(1)
        assert Client(server.base).get("/setup/?token=wrong").status == 404
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(link)
            shot(page, "21-first-run-setup")
            page.fill("#id_username", "first")
            page.fill("#id_password1", "a-long-enough-passphrase")
            page.fill("#id_password2", "a-long-enough-passphrase")
            page.click("button[type=submit]")
            page.wait_for_url(server.base + "/add/")
            assert "Welcome, first" in page.text_content(".messages")
            shot(page, "22-after-setup")
        finally:
            context.close()
        assert Client(server.base).get(link.replace(server.base, "")).status == 404  # used up
        assert not (wb.data_dir / "logs" / "run" / "setup-token").exists()
        assert server.stop(signal.SIGINT) == 0
        stopped = True
        still = [p for p in wb.json("process", "list", "--running", "--json") if p["type"] != "cli"]
        assert not still, still
        rows = wb.json("process", "list", "--json", "--type", "server")
        assert rows and all(r["status"] == "exited" for r in rows), rows
    finally:
        if not stopped:
            server.stop()


def test_killed_server_leaves_no_orphan_web_server(tmp_path) -> None:
    """After `kill -9` of `waybox server`, the next start stops the gunicorn it left behind."""
    wb = web_collection(tmp_path / "collection")
    first = Server(wb, "--no-orchestrator")
    try:
        children = psutil.Process(first.proc.pid).children(recursive=True)
        assert children
        first.proc.kill()
        first.proc.wait(10)
        assert any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
        second = Server(wb, "--no-orchestrator")
        try:
            wait_for(lambda: not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children),
                     timeout=30, what="the orphaned gunicorn to be stopped")
            assert Client(second.base).get("/login/").status == 200
        finally:
            second.stop()
    finally:
        first.stop(check=False)


def test_index_stays_fast_at_100k_snapshots(tmp_path) -> None:
    wb = Waybox(tmp_path / "collection")
    wb.data_dir.mkdir()
    wb("init")
    n = int(os.environ.get("WAYBOX_INDEX_BENCH_N", "100000"))
    result = subprocess.run([sys.executable, str(Path(__file__).parent / "web_index_bench.py"), str(wb.data_dir),
                             str(n)], capture_output=True, text=True, timeout=900, cwd=REPO,
                            env={**os.environ, "WAYBOX_DATA_DIR": str(wb.data_dir), "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    plan = report.pop("plan")
    assert "USING INDEX" in plan and "TEMP B-TREE" not in plan, plan
    for path, row in report.items():
        assert row["status"] == 200, (path, row)
        assert row["queries"] <= 10, (path, row)  # a fixed handful, whatever the page
        assert row["seconds"] < 2.0, (path, row)
