"""The REST API (/api/v1/) over HTTP against a real `waybox server`, with tokens from the CLI."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.web_helpers import ADMIN_USER, Client, Server, api_token, serve_site, wait_for, wait_sealed, web_collection

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with serve_site(tmp_path_factory.mktemp("site")) as base:
        yield base


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    wb = web_collection(tmp_path_factory.mktemp("api") / "collection")
    server = Server(wb)
    try:
        yield wb, server, Client(server.base, api_token(wb))
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sealed(env, site):
    """One Crawl of two pages, archived, with a tag."""
    wb, server, api = env
    response = api.post("/api/v1/add", json_body={"urls": [f"{site}/index.html", f"{site}/second.html"],
                                                  "tags": ["api", "fixtures"]})
    assert response.status == 201, response
    body = response.json()
    assert body["added"] == 2 and body["skipped"] == []
    return body["crawl_id"], {s["title"]: s for s in wait_sealed(api, body["crawl_id"])}


def test_tokens_from_the_cli_authenticate_and_bad_ones_are_401(env) -> None:
    wb, server, api = env
    assert api.get("/api/v1/snapshots").status == 200
    for header in ({}, {"Authorization": "Bearer wbx_wrong"}, {"Authorization": "Bearer "},
                   {"Authorization": "Basic YWRtaW46eA=="}, {"Authorization": "Token abc"}):
        response = Client(server.base).get("/api/v1/snapshots", headers=header)
        assert response.status == 401, (header, response)
        assert response.json()["detail"]
    assert "invalid, expired or revoked" in Client(server.base, "wbx_wrong").get("/api/v1/snapshots").json()["detail"]
    token = api_token(wb, name="short-lived")
    listed = wb.json("token", "list", "--json")
    row = next(t for t in listed if t["name"] == "short-lived")
    assert token.startswith(row["prefix"]) and "token" not in row and row["user"] == ADMIN_USER
    assert Client(server.base, token).get("/api/v1/tags").status == 200
    wb("token", "revoke", row["prefix"])
    revoked = Client(server.base, token).get("/api/v1/tags")
    assert revoked.status == 401 and "revoked" in revoked.json()["detail"]
    assert all(t["name"] != "short-lived" for t in wb.json("token", "list", "--json"))
    assert any(t["name"] == "short-lived" and t["state"] == "revoked" for t in wb.json("token", "list", "--all",
                                                                                        "--json"))
    assert wb("token", "revoke", "wbx_nothing", check=False).returncode != 0


def test_add_validates_its_input(env, site) -> None:
    wb, server, api = env
    cases = [
        ({"urls": "https://example.com/"}, 422),  # not a list
        ({"urls": ["https://example.com/"], "depth": 99}, 422),
        ({"urls": ["https://example.com/"], "depth": "deep"}, 422),
        ({}, 400),
        ({"urls": ["not a url", "javascript:alert(1)"]}, 400),
        ({"urls": ["https://example.com/"], "plugins": ["no_such_plugin"]}, 400),
        ({"text": "nothing that looks like a link"}, 400),
    ]
    for body, status in cases:
        response = api.post("/api/v1/add", json_body=body)
        assert response.status == status, (body, response)
        assert response.json()["detail"], response
    bad = api.post("/api/v1/add", json_body={"urls": ["example.com/page"]}).json()["detail"]
    assert "urls[0]" in bad and "no scheme" in bad and "https://example.com/page" in bad
    unknown = api.post("/api/v1/add", json_body={"urls": ["https://example.com/"], "plugins": ["nope"]})
    assert "unknown plugin" in unknown.json()["detail"]
    broken = api.post("/api/v1/add", data=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status in (400, 422), broken
    mixed = api.post("/api/v1/add", json_body={"urls": [f"{site}/second.html?mixed=1", "nope"],
                                               "text": f"<a href='{site}/index.html?mixed=2'>x</a>",
                                               "plugins": ["webcopy"]})
    assert mixed.status == 201, mixed
    body = mixed.json()
    assert body["added"] == 2 and [s["where"] for s in body["skipped"]] == ["urls[1]"]
    crawl = api.get(f"/api/v1/crawls/{body['crawl_id']}").json()
    assert crawl["config"] == {"PLUGINS": "webcopy"} and len(crawl["urls"]) == 2
    items = wait_sealed(api, body["crawl_id"])
    for snap in items:
        plugins = {r["plugin"] for r in api.get(f"/api/v1/snapshots/{snap['id']}").json()["archiveresults"]}
        assert plugins == {"webcopy"}


def test_snapshots_list_filter_get_and_search(env, sealed) -> None:
    wb, server, api = env
    crawl_id, snaps = sealed
    listing = api.get(f"/api/v1/snapshots?crawl_id={crawl_id}").json()
    assert listing["count"] == 2 and {s["title"] for s in listing["items"]} == {"Web fixture page", "Second page"}
    assert all(sorted(s["tags"]) == ["api", "fixtures"] for s in listing["items"])
    assert api.get("/api/v1/snapshots?tag=api&q=second").json()["count"] == 1
    assert api.get("/api/v1/snapshots?status=sealed&limit=1").json()["items"][0]["status"] == "sealed"
    assert api.get("/api/v1/snapshots?since=2000-01-01&until=2999-12-31&tag=api").json()["count"] == 2
    assert api.get("/api/v1/snapshots?until=2000-01-01").json()["count"] == 0
    found = {s["id"] for s in api.get("/api/v1/search?q=fixture%20page").json()["items"]}
    assert snaps["Web fixture page"]["id"] in found and snaps["Second page"]["id"] not in found
    one = api.get(f"/api/v1/snapshots/{snaps['Web fixture page']['id']}").json()
    results = {r["plugin"]: r for r in one["archiveresults"]}
    assert set(results) == {"webcopy", "webshot"} and all(r["status"] == "succeeded" for r in results.values())
    assert "webshot/screenshot.png" in results["webshot"]["output_files"]
    assert "drew a 320x200" in results["webshot"]["stderr_tail"]
    assert one["ui_url"] == f"/snapshot/{one['id']}/" and one["archive_url"] == f"/archive/{one['id']}/"
    by_plugin = api.get(f"/api/v1/archiveresults?snapshot_id={one['id']}&plugin=webshot").json()
    assert [r["id"] for r in by_plugin] == [results["webshot"]["id"]]
    assert api.get(f"/api/v1/archiveresults/{results['webshot']['id']}").json()["plugin"] == "webshot"
    tags = {t["name"]: t["snapshots"] for t in api.get("/api/v1/tags").json()}
    assert tags["api"] >= 2


def test_bad_filters_and_ids_are_clear_errors(env) -> None:
    wb, server, api = env
    for path, status, words in [
        ("/api/v1/snapshots?status=done", 400, "status"),
        ("/api/v1/snapshots?since=yesterday", 400, "since"),
        ("/api/v1/snapshots?crawl_id=123", 400, "crawl"),
        ("/api/v1/snapshots?limit=0", 422, ""),
        ("/api/v1/snapshots?limit=100000", 422, ""),
        ("/api/v1/snapshots?offset=-1", 422, ""),
        ("/api/v1/snapshots/not-a-uuid", 422, ""),
        (f"/api/v1/snapshots/{uuid.uuid4()}", 404, ""),
        ("/api/v1/archiveresults?status=nope", 400, "status"),
        ("/api/v1/processes?type=alien", 400, "type"),
        ("/api/v1/crawls?status=nope", 400, "status"),
        ("/api/v1/search", 422, ""),
    ]:
        response = api.get(path)
        assert response.status == status, (path, response)
        assert words in str(response.json()["detail"]), (path, response)
    assert api.request("PATCH", f"/api/v1/snapshots/{uuid.uuid4()}", json_body={"title": "x"}).status == 404


def test_patch_rerun_resnapshot_and_delete(env, sealed) -> None:
    wb, server, api = env
    crawl_id, snaps = sealed
    target = snaps["Second page"]
    patched = api.request("PATCH", f"/api/v1/snapshots/{target['id']}", json_body={"title": "Renamed",
                                                                                   "tags": ["renamed", "api"]})
    assert patched.status == 200 and patched.json()["title"] == "Renamed"
    assert sorted(patched.json()["tags"]) == ["api", "renamed"]
    bad = api.request("PATCH", f"/api/v1/snapshots/{target['id']}", json_body={"tags": "not-a-list"})
    assert bad.status == 422
    before = {r["plugin"]: r for r in api.get(f"/api/v1/snapshots/{target['id']}").json()["archiveresults"]}
    rerun = api.post(f"/api/v1/snapshots/{target['id']}/rerun", json_body={"plugins": ["webcopy"]})
    assert rerun.status == 202 and rerun.json() == {"queued": 1}
    again = api.post(f"/api/v1/snapshots/{target['id']}/rerun", json_body={})
    assert again.status in (202, 409)  # refused while the first re-run is still going

    def done():
        data = api.get(f"/api/v1/snapshots/{target['id']}").json()
        results = {r["plugin"]: r for r in data["archiveresults"]}
        return data["status"] == "sealed" and results["webcopy"]["ended_at"] != before["webcopy"]["ended_at"] \
            and data

    data = wait_for(done, timeout=90, what="the re-run")
    assert data["title"] in ("Renamed", "Second page")
    assert api.post(f"/api/v1/snapshots/{target['id']}/rerun", json_body={"plugins": ["nope"]}).status == 400
    fresh = api.post(f"/api/v1/snapshots/{target['id']}/resnapshot")
    assert fresh.status == 201
    (copy,) = wait_sealed(api, fresh.json()["crawl_id"])
    assert copy["url"] == target["url"] and copy["id"] != target["id"] and "renamed" in copy["tags"]
    folder = wb.data_dir / "archive" / copy["id"]
    assert folder.exists()
    assert api.request("DELETE", f"/api/v1/snapshots/{copy['id']}").status == 204
    assert api.get(f"/api/v1/snapshots/{copy['id']}").status == 404
    assert not folder.exists()
    assert api.request("DELETE", f"/api/v1/snapshots/{copy['id']}").status == 404


def test_crawls_processes_and_docs(env, sealed) -> None:
    wb, server, api = env
    crawl_id, _ = sealed
    crawl = api.get(f"/api/v1/crawls/{crawl_id}").json()
    assert crawl["status"] == "sealed" and crawl["snapshots"] == {"sealed": 2} and crawl["tags"] == ["api", "fixtures"]
    assert any(c["id"] == crawl_id for c in api.get("/api/v1/crawls?status=sealed").json())
    running = api.get("/api/v1/processes?status=running&limit=200").json()
    assert {"server", "orchestrator"} <= {p["process_type"] for p in running}
    one = api.get(f"/api/v1/processes/{running[0]['id']}").json()
    assert one["id"] == running[0]["id"] and isinstance(one["cmd"], list)
    schema = Client(server.base).get("/api/v1/openapi.json").json()
    assert {"/api/v1/add", "/api/v1/snapshots", "/api/v1/snapshots/{snapshot_id}", "/api/v1/archiveresults",
            "/api/v1/tags", "/api/v1/crawls", "/api/v1/processes", "/api/v1/search"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]
    docs = Client(server.base).get("/api/v1/docs")
    assert docs.status == 200 and "swagger" in docs.text.lower() and "cdn" not in docs.text.lower()


def test_session_auth_needs_csrf_for_changes(env, site) -> None:
    wb, server, api = env
    browser_like = Client(server.base)
    browser_like.login()
    assert browser_like.get("/api/v1/snapshots").status == 200  # reading with the session is fine
    refused = browser_like.post("/api/v1/add", json_body={"urls": [f"{site}/index.html?session=1"]})
    assert refused.status == 403 and "CSRF" in refused.json()["detail"]
    token = browser_like.cookie("waybox_csrftoken")
    ok = browser_like.post("/api/v1/add", json_body={"urls": [f"{site}/index.html?session=1"]},
                           headers={"X-CSRFToken": token, "Referer": server.base + "/"})
    assert ok.status == 201, ok


def test_public_index_opens_reads_but_never_crawls_or_processes(env, sealed) -> None:
    wb, server, api = env
    anon = Client(server.base)
    assert anon.get("/api/v1/snapshots").status == 401
    wb("config", "--set", "PUBLIC_INDEX=true")
    try:
        time.sleep(2.5)  # each server process re-reads waybox.toml every 2 seconds
        assert anon.get("/api/v1/search?q=fixture").json()["count"] >= 1
        assert anon.get("/api/v1/tags").status == 200
        crawl_id, snaps = sealed
        assert anon.get(f"/api/v1/snapshots/{snaps['Web fixture page']['id']}").status == 401
        assert anon.get("/api/v1/crawls").status == 401 and anon.get("/api/v1/processes").status == 401
        assert anon.post("/api/v1/add", json_body={"urls": ["https://example.com/"]}).status == 401
        assert anon.request("DELETE", f"/api/v1/snapshots/{snaps['Web fixture page']['id']}").status == 401
        assert Client(server.base, "wbx_bad").get("/api/v1/snapshots").status == 401
    finally:
        wb("config", "--set", "PUBLIC_INDEX=false")
        time.sleep(2.5)
    assert anon.get("/api/v1/snapshots").status == 401
