#!/usr/bin/env python3
"""Step 7: close this Snapshot's tab (the step-2 listeners then write their results and exit)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chrome_utils as cu  # noqa: E402

PLUGIN = "chrome"


async def main(hook: cu.Hook) -> None:
    target_id = cu.read_target_id(hook)
    if not target_id:
        raise cu.Skip("this snapshot has no tab")
    info = await cu.read_browser(hook, wait_for_ready=min(5.0, hook.remaining()))
    if not cu.tab_is_open(info, target_id):
        raise cu.Skip(f"tab {target_id} is already closed")
    if not cu.close_tab(info, target_id):
        raise cu.HardFail(f"could not close tab {target_id}")
    cu.log(f"closed tab {target_id}")
    cu.result("succeeded", f"closed tab {target_id}")


if __name__ == "__main__":
    cu.run(PLUGIN, main)
