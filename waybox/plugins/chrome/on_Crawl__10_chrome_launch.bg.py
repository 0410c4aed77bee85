#!/usr/bin/env python3
"""One headless Chromium for the whole Crawl (CWD = <data>/crawls/<crawl_id>/chrome/).

Starts Chromium with a fresh profile in ./profile (or a copy of CHROME_USER_DATA_DIR), waits for
its DevTools endpoint and writes browser.json, cdp_url.txt and chromium.pid here for the
Snapshot hooks (they find this folder through CRAWL_DIR). Stays alive until SIGTERM (the Crawl
sealed, or on_CrawlEnd__90_chrome_stop), then stops Chromium and its whole process group.
Chromium runs in its own process group and is killed with this hook if the hook dies
(PR_SET_PDEATHSIG). If Chromium crashes mid-crawl it is started again, up to 3 times.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chrome_utils as cu  # noqa: E402

PLUGIN = "chrome"
MAX_RESTARTS = 3
STOP_GRACE_S = 5.0


class Stop(BaseException):
    """SIGTERM/SIGINT: stop the browser and exit."""


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def resolution(value: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in str(value).replace("x", ",").split(","))
        return max(100, w), max(100, h)
    except ValueError:
        cu.log(f"CHROME_RESOLUTION={value!r} is not WIDTH,HEIGHT: using 1440,2000")
        return 1440, 2000


def chromium_flags(config: cu.PluginConfig, profile: Path) -> list[str]:
    width, height = resolution(config.get("CHROME_RESOLUTION") or "1440,2000")
    flags = [
        "--headless=new" if config.get("CHROME_HEADLESS", True) else "",
        "" if config.get("CHROME_SANDBOX", False) else "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-breakpad",
        "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
        "--metrics-recording-only",
        "--no-pings",
        "--password-store=basic",
        "--use-mock-keychain",
        "--mute-audio",
        "--hide-scrollbars",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ]
    user_agent = config.get("CHROME_USER_AGENT") or ""
    if user_agent:
        flags.append(f"--user-agent={user_agent}")
    if not config.get("CHROME_CHECK_SSL_VALIDITY", True):
        flags.append("--ignore-certificate-errors")
    flags += [str(a) for a in (config.get("CHROME_EXTRA_ARGS") or [])]
    return [f for f in flags if f]


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stale_cleanup(cwd: Path, profile: Path) -> None:
    """A Chromium left by an earlier attempt of this hook (killed hard) is stopped first."""
    pid = cu._pid_in(cwd / cu.PID_FILE)
    if pid:
        with contextlib.suppress(psutil.Error):
            if any(str(profile) in a for a in psutil.Process(pid).cmdline()):
                cu.log(f"stopping chromium {pid} left by an earlier attempt")
                kill_group(pid)
    for name in (cu.BROWSER_FILE, cu.CDP_URL_FILE, cu.PID_FILE, cu.UNAVAILABLE_FILE):
        with contextlib.suppress(OSError):
            (cwd / name).unlink()
    me = psutil.Process()
    cu.write_atomic(cwd / cu.LAUNCHER_FILE, json.dumps({"pid": me.pid, "create_time": me.create_time()}))


def prepare_profile(config: cu.PluginConfig, profile: Path) -> None:
    shutil.rmtree(profile, ignore_errors=True)
    shutil.rmtree(profile.parent / cu.TMP_DIR, ignore_errors=True)
    source = (config.get("CHROME_USER_DATA_DIR") or "").strip()
    if source:
        src = Path(source).expanduser()
        if not src.is_dir():
            raise cu.HardFail(f"CHROME_USER_DATA_DIR={source} is not a folder")
        cu.log(f"copying the profile {src} (the original is never modified)")
        shutil.copytree(src, profile, symlinks=True, ignore=shutil.ignore_patterns(
            "Singleton*", "lockfile", "*Cache", "Crashpad", "DevToolsActivePort"))
    profile.mkdir(parents=True, exist_ok=True)


class Browser:
    def __init__(self, hook: cu.Hook, binary: str, flags: list[str], profile: Path):
        self.hook, self.binary, self.flags, self.profile = hook, binary, flags, profile
        self.cwd = hook.cwd
        self.proc: subprocess.Popen | None = None
        self.started_at = ""
        self.info: dict = {}

    @property
    def cmd(self) -> list[str]:
        return [self.binary, *self.flags, "about:blank"]

    def start(self) -> None:
        with contextlib.suppress(OSError):
            (self.profile / "DevToolsActivePort").unlink()
        self.started_at = cu.now_iso()
        with open(self.cwd / "chromium.log", "ab") as logf:
            self.proc = subprocess.Popen(
                self.cmd, cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                start_new_session=True, preexec_fn=_die_with_parent,
            )
        (self.cwd / cu.PID_FILE).write_text(str(self.proc.pid), encoding="utf-8")
        cu.emit(cu.process_record(self.cmd, self.proc.pid, self.started_at))
        cu.log(f"started chromium pid {self.proc.pid}: {' '.join(self.cmd)}")

    def wait_ready(self) -> dict:
        assert self.proc is not None
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + max(10.0, min(self.hook.timeout, 120.0))
        while True:
            if self.proc.poll() is not None:
                raise cu.HardFail(f"chromium exited with code {self.proc.returncode} while starting; "
                                  f"see {self.cwd / 'chromium.log'}: {self.log_tail()}")
            if port_file.exists():
                lines = port_file.read_text(encoding="utf-8", errors="replace").split()
                if len(lines) >= 2:
                    http_url = f"http://127.0.0.1:{int(lines[0])}"
                    try:
                        version = cu.devtools_http(http_url, "/json/version", timeout=2)
                        break
                    except OSError:
                        pass
            if time.monotonic() >= deadline:
                raise cu.HardFail(f"chromium gave no DevTools endpoint within {deadline:.0f}s: {self.log_tail()}")
            time.sleep(0.05)
        proc = psutil.Process(self.proc.pid)
        me = psutil.Process()
        return {
            "cdp_url": version.get("webSocketDebuggerUrl") or f"ws://127.0.0.1:{lines[0]}{lines[1]}",
            "http_url": http_url,
            "pid": self.proc.pid,
            "pid_create_time": proc.create_time(),
            "hook_pid": me.pid,
            "hook_pid_create_time": me.create_time(),
            "version": version.get("Browser", ""),
            "user_agent": version.get("User-Agent", ""),
            "user_data_dir": str(self.profile),
            "crawl_id": self.hook.crawl_id,
            "started_at": self.started_at,
            # this plugin's resolved keys, for hooks of other plugins that load a page themselves
            "config": {k: v for k, v in os.environ.items() if k.startswith("CHROME_") and not any(
                m in k for m in ("KEY", "TOKEN", "SECRET", "PASSWORD", "COOKIE", "AUTH"))},
        }

    def publish(self, info: dict) -> None:
        self.info = info
        cu.write_atomic(self.cwd / cu.CDP_URL_FILE, info["cdp_url"] + "\n")
        cu.write_atomic(self.cwd / cu.BROWSER_FILE, json.dumps(info, indent=2))  # last: now usable
        cu.log(f"browser ready: {info['version']} at {info['cdp_url']}")

    def unpublish(self) -> None:
        for name in (cu.BROWSER_FILE, cu.CDP_URL_FILE):  # first: no new connections
            with contextlib.suppress(OSError):
                (self.cwd / name).unlink()

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = (self.cwd / "chromium.log").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        useful = [ln for ln in lines if "dbus" not in ln and "bus.cc" not in ln]
        return " | ".join(useful[-n:])

    def stop(self) -> int | None:
        """Stop Chromium (gracefully, then its whole process group) and record its exit."""
        self.unpublish()
        proc = self.proc
        if proc is None:
            return None
        code = proc.poll()
        if code is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                cu.log("chromium did not exit on SIGTERM: killing its process group")
                kill_group(proc.pid)
                code = proc.wait()
        kill_group(proc.pid)  # renderers and helpers that outlived the browser process
        with contextlib.suppress(OSError):
            (self.cwd / cu.PID_FILE).unlink()
        cu.emit(cu.process_record(self.cmd, proc.pid, self.started_at, code, cu.now_iso()))
        self.proc = None
        return code


def main() -> int:
    hook = cu.Hook.from_argv(PLUGIN)
    config = hook.config
    cwd = hook.cwd

    def on_signal(signum, _frame):
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if not config.get("CHROME_ENABLED", True):
        cu.log("CHROME_ENABLED is False: no browser for this crawl")
        cu.result("skipped", "CHROME_ENABLED is False")
        return cu.EXIT_SKIPPED
    name = config.get("CHROME_BINARY") or "chromium"
    binary = shutil.which(name)
    if not binary:
        reason = (f"chromium not found (CHROME_BINARY={name}): install it (apt-get install chromium, "
                  f"or `waybox install`) or set CHROME_BINARY to its path")
        cu.write_atomic(cwd / cu.UNAVAILABLE_FILE, reason + "\n")
        cu.log(reason)
        cu.result("skipped", reason)
        return cu.EXIT_SKIPPED

    profile = cwd / "profile"
    browser: Browser | None = None
    restarts = 0
    t0 = time.monotonic()
    try:
        stale_cleanup(cwd, profile)
        prepare_profile(config, profile)
        browser = Browser(hook, binary, chromium_flags(config, profile), profile)
        while True:
            browser.start()
            browser.publish(browser.wait_ready())
            code = browser.proc.wait()
            time.sleep(0.5)  # a stop that SIGTERMed Chromium and this hook together lands here as Stop
            # Chromium went away without being asked to
            cu.log(f"chromium exited unexpectedly with code {code}: {browser.log_tail()}")
            browser.stop()
            if restarts >= MAX_RESTARTS:
                raise cu.HardFail(f"chromium crashed {restarts + 1} times; giving up")
            restarts += 1
            cu.log(f"restarting chromium ({restarts}/{MAX_RESTARTS})")
    except Stop as sig:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        cu.log(f"got {sig}: stopping the browser")
        cu.write_atomic(cwd / cu.UNAVAILABLE_FILE, f"the crawl's browser was stopped at {cu.now_iso()}\n")
        version = browser.info.get("version", "chromium") if browser else "chromium"
        code = browser.stop() if browser else None
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(cwd / cu.TMP_DIR, ignore_errors=True)
        elapsed = time.monotonic() - t0
        detail = f"{version} served the crawl for {elapsed:.0f}s"
        if restarts:
            detail += f" ({restarts} restart{'s' if restarts > 1 else ''} after crashes)"
        cu.log(f"browser stopped (exit code {code})")
        cu.result("succeeded", detail, ["chromium.log"] if (cwd / "chromium.log").exists() else [])
        return 0
    except cu.HardFail as err:
        cu.log(f"chrome: error: {err}")
        if browser:
            browser.stop()
        return 1
    except BaseException:
        if browser:
            browser.stop()
        raise


if __name__ == "__main__":
    sys.exit(main())
