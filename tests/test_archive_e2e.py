"""The whole archiver on the local fixture site: every built-in plugin, one `waybox add`.

This is issue 6's "done when": `waybox add http://127.0.0.1:PORT/` produces every output in
one run, a depth-1 crawl archives the linked page, and `waybox search` finds a body word.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Waybox, kill_leftovers


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory, http_server: str):
    wb = Waybox(tmp_path_factory.mktemp("e2e") / "collection")
    wb.data_dir.mkdir()
    wb("init")
    result = wb("add", "--depth", "1", f"{http_server}/index.html", timeout=600)
    rows = wb.json("list", "--json")
    yield wb, rows, result
    left = kill_leftovers(wb.data_dir)  # the crawl's chromium has its profile in the collection
    assert not left, f"left running: {left}"


def root_of(rows: list[dict], http_server: str) -> dict:
    return next(r for r in rows if r["url"] == f"{http_server}/index.html")


def output(wb: Waybox, snapshot: dict, relative: str) -> Path:
    return wb.data_dir / "archive" / snapshot["id"] / relative


def test_every_snapshot_seals_and_the_linked_page_is_archived(archived, http_server) -> None:
    wb, rows, result = archived
    assert all(r["status"] == "sealed" for r in rows), [(r["url"], r["status"]) for r in rows]
    urls = {r["url"] for r in rows}
    assert f"{http_server}/page2.html" in urls
    page2 = next(r for r in rows if r["url"] == f"{http_server}/page2.html")
    assert page2["depth"] == 1 and page2["title"] == "Second Page"
    assert all(r["depth"] <= 1 for r in rows)


def test_no_hook_failed_on_the_root_page(archived, http_server) -> None:
    wb, rows, _ = archived
    root = root_of(rows, http_server)
    statuses = {r["plugin"]: r["status"] for r in root["archiveresults"]}
    assert not [p for p, s in statuses.items() if s in ("failed", "backoff", "queued", "started")], statuses
    for plugin in ("chrome", "singlefile", "screenshot", "pdf", "dom", "title", "readability", "htmltotext",
                   "wget", "favicon", "parse_html_urls", "search", "hashes", "responses", "consolelog"):
        assert statuses.get(plugin) == "succeeded", (plugin, statuses.get(plugin))
    assert root["title"] == "Fixture Home"


def test_screenshot_is_a_png_of_the_page(archived, http_server) -> None:
    wb, rows, _ = archived
    png = output(wb, root_of(rows, http_server), "screenshot/screenshot.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 0 and height > 0


def test_pdf_has_the_page_text(archived, http_server) -> None:
    from pypdf import PdfReader

    wb, rows, _ = archived
    reader = PdfReader(output(wb, root_of(rows, http_server), "pdf/output.pdf"))
    text = " ".join(page.extract_text() for page in reader.pages)
    assert "marmoset" in text


def test_singlefile_dom_and_text_outputs(archived, http_server) -> None:
    wb, rows, _ = archived
    root = root_of(rows, http_server)
    singlefile = output(wb, root, "singlefile/singlefile.html").read_text()
    assert "#333" in singlefile and "marmoset" in singlefile  # the stylesheet is inlined
    assert "marmoset" in output(wb, root, "dom/output.html").read_text()
    assert "marmoset" in output(wb, root, "readability/content.txt").read_text()
    assert "marmoset" in output(wb, root, "htmltotext/htmltotext.txt").read_text()


def test_wget_warc_passes_warcio_check_and_holds_the_page(archived, http_server) -> None:
    wb, rows, _ = archived
    folder = output(wb, root_of(rows, http_server), "wget")
    (warc,) = sorted(folder.rglob("*.warc.gz"))
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", str(warc)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    from warcio.archiveiterator import ArchiveIterator

    with open(warc, "rb") as f:
        targets = [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(f) if r.rec_type == "response"]
    assert f"{http_server}/index.html" in targets
    assert sorted(folder.rglob("*.cdx")), "a CDX index is written beside the WARC"


def test_search_finds_a_word_only_in_the_body(archived, http_server) -> None:
    wb, rows, _ = archived
    hits = wb.json("search", "zanzibar", "--json")
    assert [h["url"] for h in hits] == [f"{http_server}/index.html"]
    assert "[zanzibar]" in hits[0]["snippet"]


def test_index_json_lists_results_and_merkle_root(archived, http_server) -> None:
    wb, rows, _ = archived
    root = root_of(rows, http_server)
    index = json.loads(output(wb, root, "index.json").read_text())
    assert index["url"] == root["url"] and index["status"] == "sealed"
    assert len(index["merkle_root"]) == 64
    assert {r["hook_name"] for r in index["results"]} == {r["hook_name"] for r in root["archiveresults"]}


def test_process_tree_records_cli_orchestrator_worker_hook_binary(archived) -> None:
    wb, _, _ = archived
    tree = wb.json("process", "tree", "--json")
    chains = set()

    def walk(node, path):
        path = (*path, node["type"])
        chains.add(path)
        for child in node["children"]:
            walk(child, path)

    for root in tree:
        walk(root, ())
    assert ("cli", "orchestrator", "worker", "hook", "binary") in chains, sorted(chains)
