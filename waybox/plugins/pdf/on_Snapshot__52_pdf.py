#!/usr/bin/env python3
"""Step 5: the Snapshot's tab printed to PDF (output.pdf), as Chromium's "Save as PDF" would."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "pdf"
OUTPUT = "output.pdf"


async def main(hook: cu.Hook) -> None:
    cfg = hook.config
    async with cu.snapshot_page(hook) as page:
        media = (cfg.get("PDF_MEDIA") or "print").strip().lower()
        await page.emulate_media(media="screen" if media == "screen" else "print")
        data = await page.pdf(
            format=cfg.get("PDF_PAPER_FORMAT") or "Letter",
            landscape=bool(cfg.get("PDF_LANDSCAPE", False)),
            print_background=bool(cfg.get("PDF_PRINT_BACKGROUND", True)),
            scale=float(cfg.get("PDF_SCALE") or 1),
        )
    if not data.startswith(b"%PDF"):
        raise cu.HardFail("the browser did not return a PDF")
    cu.write_atomic(hook.cwd / OUTPUT, data)
    cu.result("succeeded", f"{OUTPUT} ({cu.human_size(len(data))})", [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
