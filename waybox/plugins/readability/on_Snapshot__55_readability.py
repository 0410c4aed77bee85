#!/usr/bin/env python3
"""Step 5: the page's article, as Firefox's Reader View finds it: content.html (article HTML),
content.txt (its plain text) and article.json (title, byline, excerpt, site name, language...).

Runs Mozilla's Readability (npm @mozilla/readability, installed in this folder) inside the
Snapshot's tab, in an isolated world, on a clone of the rendered DOM: it sees what scripts
built, and neither the page nor the live DOM is changed.
"""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "readability"
HERE = Path(__file__).resolve().parent
LIBRARY = HERE / "node_modules" / "@mozilla" / "readability" / "Readability.js"
INSTALL_HINT = "run scripts/install-plugin-deps.sh (npm install in waybox/plugins/readability)"


def readability_js(char_threshold: int) -> str:
    source = LIBRARY.read_text(encoding="utf-8")
    return (
        "(() => { var module = undefined, exports = undefined;\n" + source + "\n"
        f"const options = {{charThreshold: {int(char_threshold)}}};\n"
        "const article = new Readability(document.cloneNode(true), options).parse();\n"
        "return article ? JSON.parse(JSON.stringify(article)) : null; })()"
    )


def tidy(text: str) -> str:
    lines = [re.sub(r"[ \t\xa0]+", " ", line).strip() for line in text.replace("\r\n", "\n").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


async def main(hook: cu.Hook) -> None:
    if not LIBRARY.exists():
        raise cu.Skip(f"Mozilla Readability is not installed: {INSTALL_HINT}")
    script = readability_js(int(hook.config.get("READABILITY_CHAR_THRESHOLD") or 500))
    async with cu.snapshot_page(hook) as page:
        article = await cu.evaluate_isolated(page, script, timeout_s=hook.remaining())
    if not article or not (article.get("textContent") or "").strip():
        raise cu.SoftFail("no article found on the page")
    text = tidy(article["textContent"])
    title = (article.get("title") or "").strip()
    lang = html.escape(article.get("lang") or "", quote=True)
    lang_attr = f' lang="{lang}"' if lang else ""
    page_html = (
        f"<!doctype html>\n<html{lang_attr}>\n<head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title></head>\n<body>\n{article.get('content') or ''}\n</body>\n</html>\n"
    )
    meta = {k: v for k, v in article.items() if k not in ("content", "textContent")}
    meta["url"] = hook.url
    cu.write_atomic(hook.cwd / "content.html", page_html)
    cu.write_atomic(hook.cwd / "content.txt", text)
    cu.write_atomic(hook.cwd / "article.json", json.dumps(meta, indent=2, ensure_ascii=False))
    words = len(text.split())
    cu.result("succeeded", f"{title or 'article'} ({words} words)", ["content.html", "content.txt", "article.json"])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
