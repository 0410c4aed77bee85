"""Bookmarks in a Netscape bookmarks export (Firefox, Chrome, Pinboard...), keeping titles, ADD_DATE and TAGS.

Reads wget's copy of the page when there is one (the page as served), else fetches it.
Each link becomes a {"type": "Snapshot", "url": ...} record (a child Snapshot when the crawl's
depth allows) and a line of `urls.jsonl`. Skipped (exit 10) when the document is another format.
"""

from __future__ import annotations

from waybox import hookkit


def main(hook: hookkit.Hook) -> int:
    return hookkit.emit_links(hook, hookkit.page_content(hook), {"netscape"}, "a Netscape bookmarks file")


if __name__ == "__main__":
    hookkit.run(__file__, main)
