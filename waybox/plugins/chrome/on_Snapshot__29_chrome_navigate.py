#!/usr/bin/env python3
"""Step 2: load the URL in the Snapshot's tab and wait for the page to settle.

Waits first (at most CHROME_LISTENER_WAIT seconds) for the step-2 listeners (consolelog,
responses, redirects) to attach, so they see the whole load. Then: load event, network idle for
up to CHROME_SETTLE_TIMEOUT seconds, CHROME_DELAY_AFTER_LOAD. Writes navigation.json (status,
final URL, main response headers, timings) and emits the page title as soon as it is known.
HTTP errors (>= 400) are soft failures; network errors are hard failures (retried).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chrome_utils as cu  # noqa: E402

PLUGIN = "chrome"


async def main(hook: cu.Hook) -> None:
    if not hook.url:
        raise cu.HardFail("no --url given")
    config = hook.config
    info = await cu.read_browser(hook, wait_for_ready=min(30.0, hook.remaining()))
    target_id = cu.read_target_id(hook)
    if not target_id:
        raise cu.HardFail("this snapshot has no tab (target_id.txt is missing: did the chrome tab hook fail?)")
    if hook.snap_dir is not None:
        late = await cu.wait_for_listeners(hook.snap_dir, float(config.get("CHROME_LISTENER_WAIT") or 0))
        if late:
            cu.log(f"these listeners may miss the start of the load: {', '.join(late)}")
    nav_file = hook.cwd / cu.NAVIGATION_FILE
    async with cu.connected(hook, info) as browser:
        page = await cu.find_page(browser, target_id)
        if page is None:  # e.g. Chromium crashed and the launch hook restarted it: a new tab
            context = browser.contexts[0] if browser.contexts else await browser.new_context()
            page = await context.new_page()
            new_id = await cu.target_id_of(page)
            cu.log(f"the snapshot's tab {target_id} is not open any more: loading the page in a new tab {new_id}")
            cu.write_atomic(hook.cwd / cu.TARGET_FILE, new_id + "\n")
        with contextlib.suppress(Exception):
            await page.bring_to_front()  # the front tab of its window: painted while it loads
        try:
            nav = await cu.load_page(hook, page, hook.url, chrome=config,
                                     user_agent=config.get("CHROME_USER_AGENT") or "",
                                     cookies_file=config.get("CHROME_COOKIES_FILE") or "")
        except cu.NotAPage as err:
            cu.write_atomic(nav_file, json.dumps({"url": hook.url, "download": True, "error": str(err),
                                                  "ended_at": cu.now_iso()}, indent=2))
            raise cu.SoftFail(str(err), [cu.NAVIGATION_FILE]) from err
        except cu.HardFail as err:
            cu.write_atomic(nav_file, json.dumps({"url": hook.url, "error": str(err), "ended_at": cu.now_iso()},
                                                 indent=2))
            raise
    title = (nav.get("title") or "").strip()
    if title:
        cu.emit({"type": "Snapshot", "title": title})
    cu.write_atomic(nav_file, json.dumps(nav, indent=2, ensure_ascii=False))
    status = nav.get("status")
    summary = f"{status} {nav.get('status_text', '')}".strip() if status is not None else "loaded"
    summary += f" {nav.get('final_url', hook.url)}"
    if nav.get("not_reached"):
        summary += f" (did not reach: {', '.join(nav['not_reached'])})"
    if status is not None and status >= 400:
        raise cu.SoftFail(f"HTTP {status} {nav.get('status_text', '')}".strip(), [cu.NAVIGATION_FILE])
    cu.result("succeeded", summary, [cu.NAVIGATION_FILE])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
