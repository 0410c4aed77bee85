#!/usr/bin/env python3
"""Step 2 listener: the page's console log, uncaught errors, browser log entries (failed loads,
CSP violations...), failed requests and dialogs, one JSON object per line in console.jsonl.

Attaches to the Snapshot's tab before navigation starts (the navigate hook waits for
listener.ready), keeps recording until the tab closes (step 7), SIGTERM or CONSOLELOG_TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "consolelog"
OUTPUT = "console.jsonl"


async def attach(hook: cu.Hook, page):
    out = open(hook.cwd / OUTPUT, "w", encoding="utf-8")  # noqa: SIM115 - open for the hook's lifetime
    levels: Counter = Counter()
    tasks: set[asyncio.Task] = set()

    def write(entry: dict) -> None:
        if out.closed:
            return
        out.write(json.dumps({"ts": cu.now_iso(), **entry}, ensure_ascii=False) + "\n")
        out.flush()
        levels[entry.get("level", "log")] += 1

    def on_console(msg) -> None:
        loc = msg.location or {}
        write({"source": "console", "level": msg.type, "text": msg.text, "url": loc.get("url", ""),
               "line": loc.get("lineNumber"), "column": loc.get("columnNumber")})

    def on_pageerror(err) -> None:
        write({"source": "pageerror", "level": "error", "text": str(err), "stack": getattr(err, "stack", None)})

    def on_requestfailed(request) -> None:
        write({"source": "network", "level": "error", "text": f"{request.failure or 'failed'}: {request.url}",
               "url": request.url, "resource_type": request.resource_type})

    def on_dialog(dialog) -> None:
        write({"source": "dialog", "level": "info", "text": dialog.message, "dialog_type": dialog.type})

        async def answer() -> None:
            with contextlib.suppress(Exception):
                await (dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())

        task = asyncio.ensure_future(answer())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def on_log_entry(params: dict) -> None:
        entry = params.get("entry", {})
        write({"source": f"browser:{entry.get('source', '')}", "level": entry.get("level", "info"),
               "text": entry.get("text", ""), "url": entry.get("url", ""), "line": entry.get("lineNumber")})

    page.on("console", on_console)
    page.on("pageerror", on_pageerror)
    page.on("requestfailed", on_requestfailed)
    page.on("dialog", on_dialog)
    session = await page.context.new_cdp_session(page)
    session.on("Log.entryAdded", on_log_entry)
    await session.send("Log.enable")

    async def finish() -> dict:
        if tasks:
            await asyncio.wait(tasks, timeout=2)
        out.close()
        total = sum(levels.values())
        errors = levels.get("error", 0)
        detail = f"{total} console message{'s' if total != 1 else ''}"
        if errors:
            detail += f" ({errors} error{'s' if errors != 1 else ''})"
        return {"status": "succeeded", "output_str": detail, "output_files": [OUTPUT]}

    return finish


if __name__ == "__main__":
    cu.run_listener(PLUGIN, attach)
