#!/usr/bin/env python3
"""Step 5: the page saved as one self-contained HTML file (singlefile.html) by SingleFile.

Runs single-file-cli (npm, installed in this folder, or SINGLEFILE_BINARY) against the Crawl's
Chromium (--browser-server), so it uses the crawl's profile, cookies and settings; SingleFile
loads the URL in a tab of its own, inlines stylesheets, images and fonts as data: URIs and adds
a CSP that blocks network access when the file is opened. SingleFile sometimes exits 0 without
writing a file: the file is checked and the run repeated (SINGLEFILE_ATTEMPTS).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chrome"))
import chrome_utils as cu  # noqa: E402

PLUGIN = "singlefile"
OUTPUT = "singlefile.html"
HERE = Path(__file__).resolve().parent
INSTALL_HINT = ("run scripts/install-plugin-deps.sh (npm install in waybox/plugins/singlefile), "
                "or set SINGLEFILE_BINARY to single-file's path")


def find_binary(name: str) -> str:
    if "/" in name:
        path = Path(name).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
        raise cu.Skip(f"SINGLEFILE_BINARY={name} is not an executable file: {INSTALL_HINT}")
    local = HERE / "node_modules" / ".bin" / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise cu.Skip(f"{name} (npm package single-file-cli) is not installed: {INSTALL_HINT}")
    return found


def needs_node(binary: str) -> bool:
    try:
        with open(binary, "rb") as f:
            first = f.readline(200)
        return first.startswith(b"#!") and b"node" in first
    except OSError:
        return False


def looks_like_html(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lower()
    except OSError:
        return False
    return b"<html" in head or b"<!doctype html" in head


async def run_once(hook: cu.Hook, cmd: list[str]) -> tuple[int, str]:
    started = cu.now_iso()
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=hook.cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), max(1.0, hook.remaining() - 1))
    except BaseException:  # timeout, SIGTERM (cancellation): stop SingleFile, record it, pass it on
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        code = await proc.wait()
        cu.emit(cu.process_record(cmd, proc.pid, started, code, cu.now_iso()))
        raise
    cu.emit(cu.process_record(cmd, proc.pid, started, proc.returncode, cu.now_iso()))
    text = (err or b"").decode("utf-8", "replace").strip() or (out or b"").decode("utf-8", "replace").strip()
    return proc.returncode, text


async def main(hook: cu.Hook) -> None:
    cfg = hook.config
    binary = find_binary(cfg.get("SINGLEFILE_BINARY") or "single-file")
    if needs_node(binary) and not shutil.which("node"):
        raise cu.Skip("node is not installed (apt-get install nodejs): single-file needs it")
    navigation = cu.read_json(hook.tab_dir / cu.NAVIGATION_FILE) if hook.tab_dir else None
    if navigation and navigation.get("download"):
        raise cu.NotAPage(f"{hook.url} is a file download, not a page (see chrome/navigation.json)")
    info = await cu.read_browser(hook, wait_for_ready=min(30.0, hook.remaining()))
    tmp = hook.cwd / f".{OUTPUT}.partial"
    # SingleFile retries a load that times out with weaker wait conditions, each with this budget
    load_ms = int(max(5.0, min(30.0, (hook.remaining() - 5) / 2)) * 1000)
    cmd = [binary, hook.url, tmp.name,
           f"--browser-server={info['http_url']}",
           "--filename-conflict-action=overwrite",
           f"--browser-load-max-time={load_ms}",
           f"--browser-capture-max-time={load_ms}"]
    if not cfg.get("SINGLEFILE_CHECK_SSL_VALIDITY", True):
        cmd.append("--browser-ignore-insecure-certs")
    cookies = (cfg.get("SINGLEFILE_COOKIES_FILE") or "").strip()
    if cookies:
        if Path(cookies).is_file():
            cmd.append(f"--browser-cookies-file={cookies}")
        else:
            cu.log(f"cookies file {cookies} does not exist: ignored")
    cmd += [str(a) for a in (cfg.get("SINGLEFILE_EXTRA_ARGS") or [])]
    attempts = max(1, int(cfg.get("SINGLEFILE_ATTEMPTS") or 3))
    last = ""
    try:
        for attempt in range(1, attempts + 1):
            with contextlib.suppress(OSError):
                tmp.unlink()
            code, last = await run_once(hook, cmd)
            if tmp.exists() and tmp.stat().st_size > 0 and looks_like_html(tmp):
                break
            cu.log(f"attempt {attempt}/{attempts}: single-file exited {code} without writing a page"
                   + (f": {last[-500:]}" if last else ""))
            if hook.remaining() < 5:
                break
        if not (tmp.exists() and tmp.stat().st_size > 0 and looks_like_html(tmp)):
            detail = f": {last[-300:]}" if last else ""
            raise cu.HardFail(f"single-file wrote no page in {attempt} attempt{'s' if attempt > 1 else ''}{detail}")
        size = tmp.stat().st_size
        os.replace(tmp, hook.cwd / OUTPUT)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    cu.result("succeeded", f"{OUTPUT} ({cu.human_size(size)})", [OUTPUT])


if __name__ == "__main__":
    cu.run(PLUGIN, main)
