"""Links in the DOM the browser serialized after the page's scripts ran ($SNAP_DIR/dom/output.html).

Catches links that scripts added, which the HTML as served does not have. Skipped (exit 10)
when the dom plugin left no output. Each link becomes a {"type": "Snapshot", "url": ...} record
and a line of `urls.jsonl`.
"""

from __future__ import annotations

from waybox import hookkit

DOM_FILE = "dom/output.html"


def main(hook: hookkit.Hook) -> int:
    path = hook.snap_dir / DOM_FILE if hook.snap_dir is not None else None
    if path is None or not path.is_file() or path.stat().st_size == 0:
        hook.skip(f"no {DOM_FILE} (the dom plugin did not run or wrote nothing)")
    content = hookkit.Content(path.read_bytes(), DOM_FILE, "text/html", hook.url)
    return hookkit.emit_links(hook, content, {"html"}, "an HTML document", force_format="html")


if __name__ == "__main__":
    hookkit.run(__file__, main)
