#!/usr/bin/env python3
"""Step 5: the page's text as the browser lays it out (innerText of the rendered DOM: hidden
elements left out, blocks on their own lines), for full-text search (htmltotext.txt)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "htmltotext"
OUTPUT = "htmltotext.txt"
TEXT_JS = "(() => (document.body || document.documentElement).innerText || '')()"


def tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\xa0", " ").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


async def main(hook: cu.Hook) -> None:
    async with cu.snapshot_page(hook) as page:
        text = await cu.evaluate_isolated(page, TEXT_JS, timeout_s=hook.remaining()) or ""
    text = tidy(text)
    if not text.strip():
        raise cu.SoftFail("the page has no text")
    cu.write_atomic(hook.cwd / OUTPUT, text)
    cu.result("succeeded", f"{OUTPUT} ({len(text.split())} words)", [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
