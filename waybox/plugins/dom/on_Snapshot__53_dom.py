#!/usr/bin/env python3
"""Step 5: the DOM of the Snapshot's tab after its scripts ran, serialized to output.html."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "dom"
OUTPUT = "output.html"


async def main(hook: cu.Hook) -> None:
    async with cu.snapshot_page(hook) as page:
        html = await page.content()
    if not html.strip():
        raise cu.SoftFail("the page has an empty DOM")
    data = html.encode("utf-8")
    cu.write_atomic(hook.cwd / OUTPUT, data)
    cu.result("succeeded", f"{OUTPUT} ({cu.human_size(len(data))})", [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
