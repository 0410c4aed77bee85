#!/usr/bin/env python3
"""Step 5: the page's title (title.txt), sent as a Snapshot record the moment it is read.

document.title, else og:title / twitter:title, else the first <h1>.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "title"
OUTPUT = "title.txt"
TITLE_JS = """(() => {
  const meta = (sel) => { const el = document.querySelector(sel); return el ? el.getAttribute('content') || '' : ''; };
  const h1 = document.querySelector('h1');
  return [document.title, meta('meta[property="og:title"]'), meta('meta[name="twitter:title"]'),
          h1 ? h1.innerText : ''].map(t => (t || '').replace(/\\s+/g, ' ').trim()).find(t => t) || '';
})()"""


async def main(hook: cu.Hook) -> None:
    async with cu.snapshot_page(hook) as page:
        title = (await cu.evaluate_isolated(page, TITLE_JS, timeout_s=hook.remaining()) or "").strip()
    if not title:
        raise cu.SoftFail("the page has no title")
    cu.emit({"type": "Snapshot", "title": title})
    cu.write_atomic(hook.cwd / OUTPUT, title + "\n")
    cu.result("succeeded", title, [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
