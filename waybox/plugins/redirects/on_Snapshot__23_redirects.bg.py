#!/usr/bin/env python3
"""Step 2 listener: the main frame's redirect chain, HTTP (3xx + Location) and client-side (meta
refresh, script) hops, in redirects.json: {"url", "final_url", "hops": [{"type", "from", "to",
"status"}]}.

Attaches to the Snapshot's tab before navigation starts (the navigate hook waits for
listener.ready), keeps recording until the tab closes (step 7), SIGTERM or REDIRECTS_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "redirects"
OUTPUT = "redirects.json"


async def attach(hook: cu.Hook, page):
    state: dict = {"url": hook.url, "final_url": None, "hops": [], "document": None}
    tasks: set[asyncio.Task] = set()

    def save() -> None:
        data = {"url": state["url"], "final_url": state["final_url"] or state["document"], "hops": state["hops"]}
        cu.write_atomic(hook.cwd / OUTPUT, json.dumps(data, indent=2, ensure_ascii=False))

    async def fill_status(hop: dict, previous) -> None:
        with contextlib.suppress(Exception):
            response = await previous.response()
            if response is not None:
                hop["status"] = response.status
                hop["location"] = (await response.all_headers()).get("location")
        save()

    def on_request(request) -> None:
        try:
            if not request.is_navigation_request() or request.frame != page.main_frame:
                return
        except Exception:  # noqa: BLE001 - requests of workers have no frame
            return
        previous = request.redirected_from
        if previous is not None:
            hop = {"type": "http", "from": previous.url, "to": request.url, "status": None}
            state["hops"].append(hop)
            task = asyncio.ensure_future(fill_status(hop, previous))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        elif state["document"] is not None and request.url != state["document"]:
            state["hops"].append({"type": "client", "from": state["document"], "to": request.url, "status": None})
        save()

    def on_framenavigated(frame) -> None:
        if frame == page.main_frame and frame.url and frame.url != "about:blank":
            state["document"] = state["final_url"] = frame.url
            save()

    page.on("request", on_request)
    page.on("framenavigated", on_framenavigated)

    async def finish() -> dict:
        if tasks:
            await asyncio.wait(tasks, timeout=3)
        save()
        hops = state["hops"]
        if not hops:
            detail = "no redirects"
        else:
            chain = " -> ".join([hops[0]["from"], *(h["to"] for h in hops)])
            detail = f"{len(hops)} redirect{'s' if len(hops) != 1 else ''}: {chain}"
        return {"status": "succeeded", "output_str": detail, "output_files": [OUTPUT]}

    return finish


if __name__ == "__main__":
    cu.run_listener(PLUGIN, attach)
