"""`waybox add --file` and stdin through the import parsers: every format, broken files too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, Waybox

SITE = FIXTURES / "site"
BROKEN = FIXTURES / "parsers"


def by_url(wb: Waybox) -> dict[str, dict]:
    return {row["url"]: row for row in wb.json("list", "--json")}


@pytest.mark.parametrize(
    ("fixture", "expected_url"),
    [
        ("bookmarks.html", None),
        ("feed.rss", "https://example.com/posts/1"),
        ("feed.atom", None),
        ("links.jsonl", None),
        ("links.txt", None),
        ("links.html", None),
        ("pinboard.json", "https://example.com/pin/1"),
        ("pocket.csv", "https://example.com/pocket/1"),
    ],
)
def test_each_format_is_detected_and_imported(waybox: Waybox, fixture: str, expected_url: str | None) -> None:
    result = waybox("add", "--bg", "--file", str(SITE / fixture))
    rows = by_url(waybox)
    assert rows, result.stderr
    if expected_url:
        assert expected_url in rows
    assert "queued crawl" in result.stderr


def test_bookmarks_keep_tags_titles_and_dates(waybox: Waybox) -> None:
    waybox("add", "--bg", "--file", str(SITE / "pinboard.json"))
    row = by_url(waybox)["https://example.com/pin/1"]
    assert row["title"] == "Pinned one"
    assert sorted(row["tags"]) == ["python", "web"]
    pocket = waybox("add", "--bg", "--file", str(SITE / "pocket.csv"))
    assert pocket.returncode == 0
    assert sorted(by_url(waybox)["https://example.com/pocket/1"]["tags"]) == ["later", "news"]


def test_stdin_import_detects_the_format(waybox: Waybox) -> None:
    waybox("add", "--bg", "-", input=(SITE / "feed.rss").read_text())
    assert "https://example.com/posts/1" in by_url(waybox)


def test_partly_broken_file_imports_what_it_can_and_reports_each_skipped_line(waybox: Waybox) -> None:
    result = waybox("add", "--bg", "--file", str(BROKEN / "bad_bookmarks.html"))
    assert by_url(waybox), "the good lines are imported"
    assert "skipped" in result.stderr


@pytest.mark.parametrize("fixture", ["garbage.bin", "empty.txt", "blank.txt"])
def test_file_no_parser_understands_is_an_error_and_adds_nothing(waybox: Waybox, fixture: str) -> None:
    result = waybox("add", "--bg", "--file", str(BROKEN / fixture), check=False)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stderr.strip(), "the error says why"
    assert by_url(waybox) == {}


def test_format_can_be_forced(waybox: Waybox, tmp_path: Path) -> None:
    path = tmp_path / "list.data"
    path.write_text("https://example.org/forced\n")
    waybox("add", "--bg", "--format", "txt", "--file", str(path))
    assert "https://example.org/forced" in by_url(waybox)
