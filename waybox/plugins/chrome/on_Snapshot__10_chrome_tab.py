#!/usr/bin/env python3
"""Step 1: open this Snapshot's tab in the Crawl's browser (CWD = <SNAP_DIR>/chrome/).

Writes the tab's CDP target id to target_id.txt; later hooks work on that tab. Uses the
DevTools HTTP endpoint only, so it takes milliseconds. A retry reuses a tab that is still open.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chrome_utils as cu  # noqa: E402

PLUGIN = "chrome"


async def main(hook: cu.Hook) -> None:
    # the crawl's browser may still be starting: this hook only runs when chrome is enabled
    info = await cu.read_browser(hook, wait_for_start=min(30.0, hook.timeout / 2),
                                 wait_for_ready=hook.remaining())
    target_file = hook.cwd / cu.TARGET_FILE
    old = cu.read_target_id(hook) if hook.snap_dir else None
    if old and cu.tab_is_open(info, old):
        cu.log(f"reusing the snapshot's open tab {old}")
        cu.result("succeeded", f"tab {old} (reused)", [cu.TARGET_FILE])
        return
    tab = cu.new_tab(info)
    target_id = tab["id"]
    cu.write_atomic(target_file, target_id + "\n")
    cu.log(f"opened tab {target_id} in {info.get('version', 'chromium')}")
    cu.result("succeeded", f"tab {target_id}", [cu.TARGET_FILE])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
