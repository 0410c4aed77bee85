#!/usr/bin/env python3
"""Step 2 listener: every HTTP response the page received (URL, status, method, resource type,
headers), one JSON object per line in responses.jsonl, and the main document's final response
in headers.json.

Attaches to the Snapshot's tab before navigation starts (the navigate hook waits for
listener.ready), keeps recording until the tab closes (step 7), SIGTERM or RESPONSES_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "responses"
OUTPUT = "responses.jsonl"
HEADERS = "headers.json"


async def attach(hook: cu.Hook, page):
    out = open(hook.cwd / OUTPUT, "w", encoding="utf-8")  # noqa: SIM115 - open for the hook's lifetime
    tasks: set[asyncio.Task] = set()
    state = {"count": 0, "main": None}

    async def record(response) -> None:
        request = response.request
        try:
            headers = await response.all_headers()
        except Exception:  # noqa: BLE001 - the tab may be gone; the raw headers are still known
            headers = dict(response.headers)
        entry = {"ts": cu.now_iso(), "url": response.url, "status": response.status,
                 "status_text": response.status_text, "method": request.method,
                 "resource_type": request.resource_type, "mime_type": headers.get("content-type", ""),
                 "from_service_worker": response.from_service_worker, "headers": headers}
        try:
            main_document = request.is_navigation_request() and request.frame == page.main_frame
        except Exception:  # noqa: BLE001 - requests of workers have no frame
            main_document = False
        entry["main_document"] = main_document
        if not out.closed:
            out.write(json.dumps(entry, ensure_ascii=False) + "\n")
            out.flush()
        state["count"] += 1
        is_redirect = 300 <= response.status < 400 and "location" in headers
        if main_document and not is_redirect:
            state["main"] = {k: entry[k] for k in ("url", "status", "status_text", "mime_type", "headers")}
            cu.write_atomic(hook.cwd / HEADERS, json.dumps(state["main"], indent=2, ensure_ascii=False))

    def on_response(response) -> None:
        task = asyncio.ensure_future(record(response))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    page.on("response", on_response)

    async def finish() -> dict:
        if tasks:
            await asyncio.wait(tasks, timeout=3)
        out.close()
        files = [OUTPUT] + ([HEADERS] if (hook.cwd / HEADERS).exists() else [])
        main = state["main"]
        detail = f"{state['count']} response{'s' if state['count'] != 1 else ''}"
        if main:
            detail += f"; document {main['status']} {main['mime_type']}".rstrip()
        return {"status": "succeeded", "output_str": detail, "output_files": files}

    return finish


if __name__ == "__main__":
    cu.run_listener(PLUGIN, attach)
