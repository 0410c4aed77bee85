"""Step 9: put the Snapshot's title, URL, tags and extracted text in the full-text index.

Text comes from the best extractor output present (readability, htmltotext, the DOM, wget's
copy), stripped of markup. This hook is part of waybox itself, so it writes the index row
through waybox's database layer (waybox.search) rather than a JSONL record.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from pathlib import Path

TEXT_SOURCES = ("readability/content.txt", "htmltotext/htmltotext.txt")
HTML_SOURCES = ("dom/output.html", "singlefile/singlefile.html")
TAG_RE = re.compile(r"<(script|style)\b.*?</\1>|<[^>]+>", re.S | re.I)


def html_to_text(markup: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(TAG_RE.sub(" ", markup))).strip()


def extracted_text(snap_dir: Path, limit: int) -> tuple[str, str]:
    """(text, which file it came from); the first source that has text wins."""
    for rel in TEXT_SOURCES:
        path = snap_dir / rel
        if path.is_file() and path.stat().st_size:
            return path.read_text(errors="replace")[:limit], rel
    candidates = [snap_dir / rel for rel in HTML_SOURCES]
    candidates += sorted((snap_dir / "wget").rglob("*.html"))[:1] if (snap_dir / "wget").is_dir() else []
    for path in candidates:
        if path.is_file() and path.stat().st_size:
            return html_to_text(path.read_text(errors="replace")[: limit * 4])[:limit], str(path.relative_to(snap_dir))
    return "", ""


def main() -> int:
    snap_dir = Path(os.environ["SNAP_DIR"])
    snapshot_id = next(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--snapshot-id="))
    from waybox.datadir import DataDir
    from waybox.settings import setup_django

    setup_django(DataDir(Path(os.environ["DATA_DIR"])), os.environ.get("DATABASE_URL", ""))
    from waybox import search
    from waybox.models import Snapshot

    snapshot = Snapshot.objects.prefetch_related("tags").get(pk=snapshot_id)
    text, source = extracted_text(snap_dir, int(os.environ.get("SEARCH_MAX_CHARS", "2000000")))
    tags = " ".join(t.name for t in snapshot.tags.all())
    search.index_snapshot(snapshot_id, snapshot.url, snapshot.title, tags, text)
    Path("indexed.json").write_text(json.dumps({"source": source, "chars": len(text)}) + "\n")
    print(json.dumps({
        "type": "ArchiveResult", "status": "succeeded",
        "output_str": f"indexed {len(text)} characters" + (f" from {source}" if source else " (title, URL, tags)"),
        "output_files": ["indexed.json"],
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
