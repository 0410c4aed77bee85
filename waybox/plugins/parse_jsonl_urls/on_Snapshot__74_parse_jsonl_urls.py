"""Links in JSON Lines (one object with a url per line), JSON link arrays and Pinboard's JSON export.

Reads wget's copy of the page when there is one (the page as served), else fetches it.
Each link becomes a {"type": "Snapshot", "url": ...} record (a child Snapshot when the crawl's
depth allows) and a line of `urls.jsonl`. Skipped (exit 10) when the document is another format.
"""

from __future__ import annotations

from waybox import hookkit


def main(hook: hookkit.Hook) -> int:
    return hookkit.emit_links(hook, hookkit.page_content(hook), {"jsonl", "json", "pinboard"},
                              "JSON Lines or a JSON link list")


if __name__ == "__main__":
    hookkit.run(__file__, main)
