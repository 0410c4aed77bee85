#!/usr/bin/env python3
"""Step 5: a PNG screenshot of the Snapshot's tab, the full page by default (screenshot.png).

SCREENSHOT_WIDTH / SCREENSHOT_HEIGHT set the viewport for the capture (0: the browser window,
CHROME_RESOLUTION); SCREENSHOT_MAX_HEIGHT caps very long pages. The viewport goes back to the
window's when the hook disconnects.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "screenshot"
OUTPUT = "screenshot.png"
PAGE_SIZE_JS = """() => {
  const d = document.documentElement, b = document.body;
  return {width: Math.max(d.scrollWidth, b ? b.scrollWidth : 0, innerWidth),
          height: Math.max(d.scrollHeight, b ? b.scrollHeight : 0, innerHeight)};
}"""


def png_size(data: bytes) -> tuple[int, int]:
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise cu.HardFail("the browser did not return a PNG")
    return struct.unpack(">II", data[16:24])


async def main(hook: cu.Hook) -> None:
    cfg = hook.config
    width = int(cfg.get("SCREENSHOT_WIDTH") or 0)
    height = int(cfg.get("SCREENSHOT_HEIGHT") or 0)
    full_page = bool(cfg.get("SCREENSHOT_FULL_PAGE", True))
    max_height = int(cfg.get("SCREENSHOT_MAX_HEIGHT") or 0)
    async with cu.snapshot_page(hook) as page:
        if width or height:
            current = await page.evaluate("() => ({width: innerWidth, height: innerHeight})")
            await page.set_viewport_size({"width": width or current["width"], "height": height or current["height"]})
        options: dict = {"type": "png", "full_page": full_page, "timeout": hook.remaining_ms()}
        if full_page and max_height:
            size = await page.evaluate(PAGE_SIZE_JS)
            if size["height"] > max_height:
                cu.log(f"page is {size['height']}px tall: capturing the first {max_height}px (SCREENSHOT_MAX_HEIGHT)")
                options["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": max_height}
        data = await page.screenshot(**options)
    w, h = png_size(data)
    cu.write_atomic(hook.cwd / OUTPUT, data)
    cu.result("succeeded", f"{OUTPUT} ({w}x{h}, {cu.human_size(len(data))})", [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
