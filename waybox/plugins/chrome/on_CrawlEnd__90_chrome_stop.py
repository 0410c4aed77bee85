#!/usr/bin/env python3
"""Stop the Crawl's browser when the Crawl seals (CWD = <data>/crawls/<crawl_id>/chrome/).

Belt and braces next to the engine's SIGTERM to the launch hook: asks the launch hook to stop
(SIGTERM), waits for it, and kills Chromium's process group if anything is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chrome_utils as cu  # noqa: E402

PLUGIN = "chrome"


def same_process(pid: int | None, create_time: float | None) -> psutil.Process | None:
    if not pid:
        return None
    try:
        proc = psutil.Process(int(pid))
        if create_time is not None and abs(proc.create_time() - float(create_time)) > 1:
            return None  # the pid was reused
        return proc if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.Error, ValueError):
        return None


def wait_gone(proc: psutil.Process, timeout: float) -> bool:
    """Wait for `proc` to exit; a zombie counts as gone (its parent, not us, reaps it)."""
    deadline = time.monotonic() + timeout
    while same_process(proc.pid, proc.create_time()) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def main() -> int:
    hook = cu.Hook.from_argv(PLUGIN)
    cwd = hook.cwd
    try:
        info = json.loads((cwd / cu.BROWSER_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        info = {}
    launcher = same_process(info.get("hook_pid"), info.get("hook_pid_create_time"))
    chromium_pid = info.get("pid") or cu._pid_in(cwd / cu.PID_FILE)
    chromium = same_process(chromium_pid, info.get("pid_create_time"))
    if chromium is not None and not any(str(cwd) in a for a in chromium.cmdline()):
        chromium = None  # not ours
    if launcher is None and chromium is None:
        cu.log("no browser is running for this crawl")
        cu.result("skipped", "no browser was running")
        return cu.EXIT_SKIPPED

    deadline = time.monotonic() + max(2.0, min(hook.timeout - 2, 15.0))
    if launcher is not None:
        cu.log(f"asking the launch hook (pid {launcher.pid}) to stop the browser")
        with contextlib.suppress(psutil.Error):
            launcher.send_signal(signal.SIGTERM)
        wait_gone(launcher, max(0.1, deadline - time.monotonic()))
    if launcher is not None and same_process(launcher.pid, launcher.create_time()) is not None:
        cu.log(f"the launch hook (pid {launcher.pid}) did not stop in time: killing it")
        with contextlib.suppress(psutil.Error):
            launcher.kill()
    if chromium is not None and chromium.is_running():
        cu.log(f"killing chromium's process group {chromium.pid}")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(chromium.pid, signal.SIGKILL)
        wait_gone(chromium, 5)
    left = same_process(chromium_pid, info.get("pid_create_time")) if chromium_pid else None
    if left is not None:
        cu.log(f"chromium {chromium_pid} is still running")
        return 1
    cu.result("succeeded", "stopped the crawl's browser")
    return 0


if __name__ == "__main__":
    sys.exit(main())
