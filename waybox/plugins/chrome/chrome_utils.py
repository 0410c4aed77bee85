"""Shared code of waybox's browser plugins.

One Chromium per Crawl, started by `chrome/on_Crawl__10_chrome_launch.bg.py` in
`<data>/crawls/<crawl_id>/chrome/`, which writes there:

- `browser.json`: {"cdp_url": "ws://127.0.0.1:PORT/devtools/browser/ID", "http_url":
  "http://127.0.0.1:PORT", "pid", "pid_create_time", "hook_pid", "version", ...}; it exists only
  while the browser is usable (written last, removed first);
- `cdp_url.txt`: the same CDP endpoint alone, for tools that want a plain string;
- `chromium.pid`: the browser's pid, which is also its process group (for sweeping);
- `launcher.json`: the launch hook's own pid (a Snapshot hook that finds it dead and no
  browser.json fails at once instead of waiting);
- `browser_unavailable.txt`: why there is no browser (stopped at the end of the crawl, chromium
  not installed): Snapshot hooks then exit 10 (skipped) with that reason;
- `tmp/`: TMPDIR of the playwright drivers of all browser hooks, removed with the browser.

Per Snapshot, `chrome/on_Snapshot__10_chrome_tab.py` opens a tab and writes its CDP target
id to `<SNAP_DIR>/chrome/target_id.txt`; `chrome/on_Snapshot__29_chrome_navigate.py` loads
the URL in it and writes `<SNAP_DIR>/chrome/navigation.json`. Every other browser hook
connects to the crawl's browser (playwright `connect_over_cdp`) and works on that tab.

Step-2 listeners (consolelog, responses, redirects) announce themselves with
`listener.pending` in their own folder and write `listener.ready` once attached; the navigate
hook waits for them (see `wait_for_listeners`).

Hooks import this module by putting this folder on `sys.path` (see any hook's header), so it
works however waybox is installed. Exit codes follow the hook contract: 0 (with a succeeded or
failed record), 10 = skipped, anything else = hard failure (retried).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

PLUGINS_DIR = Path(__file__).resolve().parent.parent
CHROME = "chrome"
BROWSER_FILE = "browser.json"
CDP_URL_FILE = "cdp_url.txt"
PID_FILE = "chromium.pid"
UNAVAILABLE_FILE = "browser_unavailable.txt"
LAUNCHER_FILE = "launcher.json"
TMP_DIR = "tmp"
TARGET_FILE = "target_id.txt"
NAVIGATION_FILE = "navigation.json"
LISTENER_PENDING = "listener.pending"
LISTENER_READY = "listener.ready"
EXIT_SKIPPED = 10
TRUE_WORDS = {"1", "true", "yes", "on", "y"}
FALSE_WORDS = {"0", "false", "no", "off", "n", ""}


# ---------------------------------------------------------------------------------------------
# outcomes


class HookExit(Exception):  # noqa: N818 - these are outcomes, not errors
    """Raised inside a hook to end it with one of the contract's outcomes."""


class Skip(HookExit):
    """Nothing to do here (browser disabled, binary missing...): exit 10 with a skipped record."""


class SoftFail(HookExit):
    """Ran fine but the content is not there (HTTP 404...): a failed record, exit 0, no retry."""

    def __init__(self, message: str, output_files: list[str] | None = None):
        super().__init__(message)
        self.output_files = output_files or []


class HardFail(HookExit):
    """Something went wrong that may work later: no record, non-zero exit, the engine retries."""


class NotAPage(Skip):
    """The URL is a file the browser downloads (zip, binary...), not a page it can show."""


# ---------------------------------------------------------------------------------------------
# records and logs


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def emit(record: dict) -> None:
    """One JSONL record on stdout, flushed at once so the engine sees it immediately."""
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def log(message: str) -> None:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()


def result(status: str, output_str: str, output_files: list[str] | None = None, **extra: Any) -> None:
    record = {"type": "ArchiveResult", "status": status, "output_str": output_str,
              "output_files": output_files or []}
    record.update(extra)
    emit(record)


def process_record(cmd: list[str], pid: int, started_at: str, exit_code: int | None = None,
                   ended_at: str | None = None) -> dict:
    record: dict[str, Any] = {"type": "Process", "cmd": [str(c) for c in cmd], "pid": pid,
                              "started_at": started_at}
    if exit_code is not None:
        record["exit_code"] = exit_code
    if ended_at is not None:
        record["ended_at"] = ended_at
    return record


def human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def write_atomic(path: Path, data: str | bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if isinstance(data, bytes):
        tmp.write_bytes(data)
    else:
        tmp.write_text(data, encoding="utf-8")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------
# config: the engine resolves every key into the environment; defaults come from config.json so
# a hook run by hand (or by a test harness) behaves the same


def _coerce(kind: str, raw: str) -> Any:
    if kind == "boolean":
        word = raw.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"{raw!r} is not a boolean")
    if kind == "integer":
        return int(float(raw.strip()))
    if kind == "number":
        return float(raw.strip())
    if kind == "array":
        text = raw.strip()
        if text.startswith("["):
            value = json.loads(text)
            if not isinstance(value, list):
                raise ValueError("not a list")
            return [str(v) for v in value]
        return [part.strip() for part in text.split(",") if part.strip()] if text else []
    return raw


class PluginConfig:
    """Typed access to a plugin's keys: environment first, then x-fallback, then the default."""

    GLOBAL_DEFAULTS = {"TIMEOUT": ("integer", 60), "USER_AGENT": ("string", ""),
                       "CHECK_SSL_VALIDITY": ("boolean", True), "COOKIES_FILE": ("string", "")}

    def __init__(self, plugin: str, env: dict[str, str] | None = None):
        self.plugin = plugin
        self.env = os.environ if env is None else env
        path = PLUGINS_DIR / plugin / "config.json"
        self.schema = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        self.props: dict[str, dict] = dict(self.schema.get("properties", {}))
        prefix = plugin.upper()
        self.props.setdefault(f"{prefix}_ENABLED",
                              {"type": "boolean", "default": True, "x-aliases": [f"SAVE_{prefix}"]})
        self.props.setdefault(f"{prefix}_TIMEOUT", {"type": "integer", "x-fallback": "TIMEOUT"})

    def get(self, key: str, default: Any = None, _seen: tuple[str, ...] = ()) -> Any:
        spec = self.props.get(key)
        if spec is None and key in self.GLOBAL_DEFAULTS:
            kind, dflt = self.GLOBAL_DEFAULTS[key]
            spec = {"type": kind, "default": dflt}
        spec = spec or {}
        kind = spec.get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        for name in (key, *spec.get("x-aliases", ())):
            if name in self.env:
                try:
                    return _coerce(kind, self.env[name])
                except (ValueError, json.JSONDecodeError) as err:
                    log(f"config: ignoring {name}={self.env[name]!r}: {err}")
                    break
        fallback = spec.get("x-fallback")
        if fallback and fallback not in _seen:
            return self.get(fallback, default, (*_seen, key))
        if "default" in spec:
            return spec["default"]
        return default

    def __getitem__(self, key: str) -> Any:
        return self.get(key)


# ---------------------------------------------------------------------------------------------
# hook invocation


def _age_of_this_process() -> float:
    """Seconds since this process started: the engine's deadline runs from the launch, not from our imports."""
    try:
        return max(0.0, min(30.0, time.time() - psutil.Process().create_time()))
    except psutil.Error:
        return 0.0


@dataclass
class Hook:
    plugin: str
    url: str
    snapshot_id: str
    crawl_id: str
    depth: int
    timeout: float
    cwd: Path
    snap_dir: Path | None
    crawl_dir: Path | None
    data_dir: Path | None
    config: PluginConfig
    started: float = field(default_factory=lambda: time.monotonic() - _age_of_this_process())

    @classmethod
    def from_argv(cls, plugin: str, argv: list[str] | None = None) -> Hook:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--url", default="")
        parser.add_argument("--snapshot-id", default="")
        parser.add_argument("--crawl-id", default="")
        parser.add_argument("--depth", type=int, default=0)
        parser.add_argument("--timeout", type=float, default=0)
        args, unknown = parser.parse_known_args(argv)
        if unknown:
            log(f"{plugin}: ignoring unknown arguments {unknown}")
        config = PluginConfig(plugin)
        timeout = args.timeout or float(config.get(f"{plugin.upper()}_TIMEOUT") or 60)
        cwd = Path.cwd()

        def env_path(name: str) -> Path | None:
            value = os.environ.get(name, "").strip()
            return Path(value) if value else None

        snap_dir = env_path("SNAP_DIR")
        if snap_dir is None and args.snapshot_id:
            snap_dir = cwd.parent  # CWD is <SNAP_DIR>/<plugin>/
        return cls(plugin=plugin, url=args.url, snapshot_id=args.snapshot_id, crawl_id=args.crawl_id,
                   depth=args.depth, timeout=max(1.0, timeout), cwd=cwd, snap_dir=snap_dir,
                   crawl_dir=env_path("CRAWL_DIR"), data_dir=env_path("DATA_DIR"), config=config)

    def remaining(self) -> float:
        return max(0.0, self.timeout - (time.monotonic() - self.started))

    def remaining_ms(self, cap: float | None = None) -> float:
        left = self.remaining()
        if cap is not None:
            left = min(left, cap)
        return max(1000.0, left * 1000)

    @property
    def tab_dir(self) -> Path | None:
        return self.snap_dir / CHROME if self.snap_dir else None


def run(plugin: str, main: Callable[[Hook], Awaitable[None]], *, background: bool = False) -> None:
    """Run an async hook body with the contract's outcomes, SIGTERM handling and self-timeout.

    SIGTERM/SIGINT cancel the body (its `finally` blocks run: that is "finishing hastily").
    Foreground hooks then exit 1 (the engine decides about retries); background hooks write their
    record in their own cleanup and exit 0. A foreground body stops itself two seconds before its
    timeout (counted from the process start, like the engine's) so it can say why.
    """
    hook = Hook.from_argv(plugin)
    if not hook.config.get(f"{plugin.upper()}_ENABLED", True):
        log(f"{plugin}: {plugin.upper()}_ENABLED is False: nothing to do")
        result("skipped", f"{plugin.upper()}_ENABLED is False")
        sys.exit(EXIT_SKIPPED)
    state = {"signal": None}

    async def body() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()

        def on_signal(signum: int) -> None:
            if state["signal"] is None:
                state["signal"] = signal.Signals(signum).name
                log(f"{plugin}: got {state['signal']}, finishing")
                task.cancel()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        if background:
            await main(hook)
        else:
            async with asyncio.timeout(max(1.0, hook.remaining() - 2)):
                await main(hook)

    code = 0
    try:
        asyncio.run(body())
    except Skip as err:
        log(f"{plugin}: skipped: {err}")
        result("skipped", str(err))
        code = EXIT_SKIPPED
    except SoftFail as err:
        log(f"{plugin}: failed: {err}")
        result("failed", str(err), err.output_files)
    except HardFail as err:
        log(f"{plugin}: error: {err}")
        code = 1
    except asyncio.CancelledError:
        log(f"{plugin}: stopped by {state['signal'] or 'cancellation'} before finishing")
        code = 0 if background else 1
    except TimeoutError:
        log(f"{plugin}: timed out after {hook.timeout:.0f}s ({plugin.upper()}_TIMEOUT)")
        code = 1
    except Exception as err:  # noqa: BLE001 - any other error is a hard failure, logged in full
        import traceback

        traceback.print_exc()
        log(f"{plugin}: error: {type(err).__name__}: {err}")
        code = 1
    sys.stdout.flush()
    sys.exit(code)


# ---------------------------------------------------------------------------------------------
# the crawl's browser


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def devtools_http(http_url: str, path: str, method: str = "GET", timeout: float = 5) -> Any:
    req = urllib.request.Request(http_url.rstrip("/") + path, method=method)
    with _OPENER.open(req, timeout=timeout) as resp:
        body = resp.read().decode("utf-8", "replace")
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        return body


def browser_dir(hook: Hook) -> Path | None:
    return hook.crawl_dir / CHROME if hook.crawl_dir else None


def _process_alive(pid: Any, create_time: Any = None) -> bool:
    """Is `pid` running and (when `create_time` is known) still the same process, not a reused pid?"""
    try:
        proc = psutil.Process(int(pid))
        if create_time is not None and abs(proc.create_time() - float(create_time)) > 1:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.Error, ValueError, TypeError):
        return False


def _browser_alive(info: dict) -> bool:
    return _process_alive(info.get("pid"), info.get("pid_create_time"))


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _disabled_reason() -> str:
    chrome_enabled = os.environ.get("CHROME_ENABLED", "").strip().lower()
    plugins = [p.strip().lower() for p in os.environ.get("PLUGINS", "").split(",") if p.strip()]
    if chrome_enabled in FALSE_WORDS - {""}:
        return "CHROME_ENABLED is False"
    if plugins and CHROME not in plugins:
        return f"PLUGINS={os.environ['PLUGINS']} does not include chrome"
    return "the chrome plugin did not run for this crawl (CHROME_ENABLED=False?)"


async def read_browser(hook: Hook, *, wait_for_start: float = 0.0, wait_for_ready: float = 30.0) -> dict:
    """The crawl's browser.json, waiting for a browser that is starting.

    No `chrome/` folder in CRAWL_DIR (after `wait_for_start` seconds): the browser is not part of
    this crawl -> Skip. A folder but no usable browser within `wait_for_ready` -> HardFail.
    """
    bdir = browser_dir(hook)
    if bdir is None:
        raise Skip("no browser: CRAWL_DIR is not set, so the crawl's browser cannot be found")
    deadline = time.monotonic() + min(wait_for_start, hook.remaining())
    while not bdir.is_dir():
        if time.monotonic() >= deadline:
            raise Skip(f"no browser is running for this crawl: {_disabled_reason()}")
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + min(wait_for_ready, hook.remaining())
    while True:
        info_path = bdir / BROWSER_FILE
        if info_path.exists():
            try:
                info = json.loads(info_path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                info = None
            if info and _browser_alive(info):
                return info
        unavailable = bdir / UNAVAILABLE_FILE
        if unavailable.exists() and not info_path.exists():
            reason = unavailable.read_text(encoding="utf-8", errors="replace").strip()
            raise Skip(f"the crawl's browser is not available: {reason}")
        launcher = read_json(bdir / LAUNCHER_FILE)
        if launcher and not info_path.exists() and not _process_alive(launcher.get("pid"), launcher.get("create_time")):
            raise HardFail("the crawl's browser is not running (its launch hook exited; it may be retried)")
        if time.monotonic() >= deadline:
            raise HardFail(f"the crawl's browser ({bdir}) is not running or not ready")
        await asyncio.sleep(0.05)


def read_target_id(hook: Hook) -> str | None:
    tab_dir = hook.tab_dir
    if tab_dir is None:
        return None
    try:
        return (tab_dir / TARGET_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def list_targets(info: dict) -> list[dict]:
    return [t for t in devtools_http(info["http_url"], "/json/list") if isinstance(t, dict)]


def tab_is_open(info: dict, target_id: str) -> bool:
    return any(t.get("id") == target_id for t in list_targets(info))


def cdp_call(info: dict, method: str, params: dict | None = None, timeout: float = 10) -> dict:
    """One CDP command on the browser's endpoint, without starting playwright (milliseconds, not seconds)."""
    import websocket  # websocket-client

    ws = websocket.create_connection(info["cdp_url"], timeout=timeout, suppress_origin=True,
                                     http_no_proxy=["127.0.0.1", "localhost"])
    try:
        ws.send(json.dumps({"id": 1, "method": method, "params": params or {}}))
        while True:
            message = json.loads(ws.recv())
            if message.get("id") == 1:
                break
    finally:
        ws.close()
    if "error" in message:
        raise HardFail(f"CDP {method} failed: {message['error'].get('message', message['error'])}")
    return message.get("result", {})


def new_tab(info: dict, url: str = "about:blank") -> dict:
    """A tab in a window of its own: Chromium only paints the front tab of each window, and a screenshot of a
    tab that is behind another one never completes. Returns {"id": target id}."""
    target = cdp_call(info, "Target.createTarget", {"url": url, "newWindow": True})
    return {"id": target["targetId"]}


def close_tab(info: dict, target_id: str) -> bool:
    try:
        devtools_http(info["http_url"], f"/json/close/{target_id}")
        return True
    except urllib.error.HTTPError:
        return False


# ---------------------------------------------------------------------------------------------
# playwright on the crawl's browser


@contextlib.asynccontextmanager
async def connected(hook: Hook, info: dict):
    """A playwright Browser connected over CDP to the crawl's Chromium (never launched here)."""
    from playwright.async_api import async_playwright

    bdir = browser_dir(hook)
    if bdir is not None and bdir.is_dir():
        # playwright's driver keeps temporary files (downloads...) in TMPDIR and cannot remove them when it is
        # killed with the hook's process group: keep them in the crawl's folder, removed when the browser stops
        tmp = bdir / TMP_DIR
        with contextlib.suppress(OSError):
            tmp.mkdir(exist_ok=True)
            os.environ["TMPDIR"] = str(tmp)
    async with async_playwright() as pw:
        browser = await pw.chromium.connect_over_cdp(info["cdp_url"], timeout=hook.remaining_ms(30))
        try:
            yield browser
        finally:
            # over CDP this only disconnects (the browser and its tabs stay) and lets playwright remove its
            # temporary artifacts folder
            with contextlib.suppress(Exception):
                await asyncio.shield(browser.close())


async def target_id_of(page) -> str:
    session = await page.context.new_cdp_session(page)
    try:
        return (await session.send("Target.getTargetInfo"))["targetInfo"]["targetId"]
    finally:
        with contextlib.suppress(Exception):
            await session.detach()


async def find_page(browser, target_id: str):
    for context in browser.contexts:
        for page in context.pages:
            with contextlib.suppress(Exception):
                if await target_id_of(page) == target_id:
                    return page
    return None


def parse_netscape_cookies(text: str) -> list[dict]:
    """Cookies of a Netscape cookies.txt (as browser extensions and curl/wget export it) as playwright cookies.

    Lines: domain, include-subdomains flag, path, secure, expiry (unix time, 0 = session), name, value, tab-separated;
    `#HttpOnly_` before the domain marks an HttpOnly cookie; other `#` lines are comments.
    """
    cookies = []
    for line in text.splitlines():
        http_only = line.startswith("#HttpOnly_")
        if http_only:
            line = line[len("#HttpOnly_"):]
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) < 7:
            continue
        domain, _subdomains, path, secure, expires, name, value = fields[:7]
        cookie: dict[str, Any] = {"name": name, "value": value, "domain": domain, "path": path or "/",
                                  "secure": secure.upper() == "TRUE", "httpOnly": http_only}
        with contextlib.suppress(ValueError):
            if int(expires) > 0:
                cookie["expires"] = float(expires)
        cookies.append(cookie)
    return cookies


async def load_cookies(context, path: str) -> int:
    """Add a Netscape cookies.txt to the browser's cookie jar; returns how many were loaded."""
    if not path:
        return 0
    if not Path(path).is_file():
        log(f"cookies file {path} does not exist: ignored")
        return 0
    try:
        cookies = parse_netscape_cookies(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError as err:
        log(f"cookies file {path} cannot be read ({err}): ignored")
        return 0
    loaded = 0
    for cookie in cookies:  # one at a time: a bad line must not cost the others
        try:
            await context.add_cookies([cookie])
            loaded += 1
        except Exception as err:  # noqa: BLE001 - playwright's Error: the browser refused this cookie
            log(f"cookie {cookie['name']} for {cookie['domain']} refused: {str(err).splitlines()[0]}")
    return loaded


async def evaluate_isolated(page, expression: str, timeout_s: float = 30) -> Any:
    """Evaluate JS in an isolated world of the page's main frame: the page's own scripts cannot
    tamper with the built-ins our code uses, and our code leaves no globals in the page."""
    session = await page.context.new_cdp_session(page)
    try:
        tree = await session.send("Page.getFrameTree")
        world = await session.send("Page.createIsolatedWorld", {
            "frameId": tree["frameTree"]["frame"]["id"], "worldName": "waybox", "grantUniveralAccess": False})
        response = await asyncio.wait_for(session.send("Runtime.evaluate", {
            "expression": expression, "contextId": world["executionContextId"],
            "returnByValue": True, "awaitPromise": True}), timeout_s)
    finally:
        with contextlib.suppress(Exception):
            await session.detach()
    if "exceptionDetails" in response:
        details = response["exceptionDetails"]
        text = details.get("exception", {}).get("description") or details.get("text", "")
        raise RuntimeError(f"script error in page: {text}")
    return response.get("result", {}).get("value")


def chrome_config(info: dict | None = None) -> PluginConfig:
    """The chrome plugin's keys as seen from any hook: its own environment (the chrome plugin's
    hooks get CHROME_* from the engine), else what the launch hook resolved (browser.json)."""
    return PluginConfig(CHROME, {**((info or {}).get("config") or {}), **os.environ})


async def load_page(hook: Hook, page, url: str, *, chrome: PluginConfig | None = None, user_agent: str = "",
                    cookies_file: str = "") -> dict:
    """Navigate `page` to `url` and wait for it to settle: the load event, then network idle for
    up to CHROME_SETTLE_TIMEOUT seconds, then CHROME_DELAY_AFTER_LOAD seconds.

    Returns what navigation.json records. Network errors raise HardFail (retried later).
    """
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    chrome = chrome or PluginConfig(CHROME)
    settle = float(chrome.get("CHROME_SETTLE_TIMEOUT") or 0)
    delay = float(chrome.get("CHROME_DELAY_AFTER_LOAD") or 0)
    info: dict[str, Any] = {"url": url, "started_at": now_iso()}
    session = await page.context.new_cdp_session(page)
    try:
        if user_agent:
            await session.send("Network.setUserAgentOverride", {"userAgent": user_agent})
        n = await load_cookies(page.context, cookies_file)
        if n:
            log(f"loaded {n} cookies from {cookies_file}")
        t0 = time.monotonic()
        try:
            response = await page.goto(url, wait_until="commit", timeout=hook.remaining_ms())
        except PlaywrightTimeout as err:
            raise HardFail(f"no response from {url} within {hook.timeout:.0f}s") from err
        except PlaywrightError as err:
            message = str(err).splitlines()[0]
            if "Download is starting" in message:
                raise NotAPage(f"{url} is a file download, not a page the browser can show") from err
            raise HardFail(f"could not load {url}: {message}") from err
        info["committed_ms"] = round((time.monotonic() - t0) * 1000)
        if response is not None:
            info.update(status=response.status, status_text=response.status_text)
            with contextlib.suppress(Exception):
                info["headers"] = await response.all_headers()
        for state, cap in (("load", None), ("networkidle", settle)):
            if cap == 0:
                continue
            try:
                await page.wait_for_load_state(state, timeout=hook.remaining_ms(cap))
                info[f"{state}_ms"] = round((time.monotonic() - t0) * 1000)
            except PlaywrightTimeout:
                info.setdefault("not_reached", []).append(state)
                log(f"page did not reach '{state}' in time; continuing with what is loaded")
        if delay > 0:
            await asyncio.sleep(min(delay, max(0.0, hook.remaining() - 2)))
        info["final_url"] = page.url
        with contextlib.suppress(Exception):
            info["title"] = await page.title()
    finally:
        with contextlib.suppress(Exception):
            await session.detach()
    info["ended_at"] = now_iso()
    return info


@contextlib.asynccontextmanager
async def snapshot_page(hook: Hook, *, wait_for_ready: float = 30.0):
    """The Snapshot's tab, ready to read. Used by the step-5 extractors.

    Normally the tab opened in step 1 and loaded in step 2. Without one (the tab hook failed, or a
    plugin is re-run after the tab was closed) the page is loaded in a temporary tab that is closed
    afterwards. A tab still on about:blank (navigation failed) is loaded again.
    """
    navigation = read_json(hook.tab_dir / NAVIGATION_FILE) if hook.tab_dir else None
    if navigation and navigation.get("download"):
        raise NotAPage(f"{hook.url} is a file download, not a page the browser can show (see chrome/navigation.json)")
    info = await read_browser(hook, wait_for_ready=wait_for_ready)
    async with connected(hook, info) as browser:
        target_id = read_target_id(hook)
        page = await find_page(browser, target_id) if target_id else None
        temporary = page is None
        if temporary:
            log("no open tab for this snapshot: loading the page in a temporary tab")
            context = browser.contexts[0] if browser.contexts else await browser.new_context()
            page = await context.new_page()
        try:
            with contextlib.suppress(Exception):
                await page.bring_to_front()  # the front tab of its window: only that one is painted
            if temporary or page.url in ("", "about:blank") or page.url.startswith("chrome-error://"):
                if not temporary:
                    log(f"the snapshot's tab shows {page.url or 'nothing'}: loading the page again")
                chrome = chrome_config(info)
                await load_page(hook, page, hook.url, chrome=chrome,
                                user_agent=chrome.get("CHROME_USER_AGENT") or "",
                                cookies_file=chrome.get("CHROME_COOKIES_FILE") or "")
            yield page
        finally:
            if temporary:
                with contextlib.suppress(Exception):
                    await page.close()


# ---------------------------------------------------------------------------------------------
# step-2 listeners and the navigate hook


def listener_announce(cwd: Path | None = None) -> None:
    """First thing a listener does: say it is attaching (the navigate hook will wait for it)."""
    cwd = cwd or Path.cwd()
    with contextlib.suppress(OSError):
        (cwd / LISTENER_READY).unlink()
    write_atomic(cwd / LISTENER_PENDING, str(os.getpid()))


def listener_ready(cwd: Path | None = None) -> None:
    cwd = cwd or Path.cwd()
    write_atomic(cwd / LISTENER_READY, str(os.getpid()))
    with contextlib.suppress(OSError):
        (cwd / LISTENER_PENDING).unlink()


def listener_done(cwd: Path | None = None) -> None:
    cwd = cwd or Path.cwd()
    for name in (LISTENER_PENDING, LISTENER_READY):
        with contextlib.suppress(OSError):
            (cwd / name).unlink()


def _pid_in(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _listener_processes(snap_dir: Path) -> dict[int, Path]:
    """Live step-2 background hooks of this Snapshot, found by their CWD (<SNAP_DIR>/<plugin>)."""
    found: dict[int, Path] = {}
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if proc.pid == me or not any("on_Snapshot__2" in a and ".bg." in a for a in cmdline):
                continue
            cwd = Path(proc.cwd())
            if cwd.parent == snap_dir:
                found[proc.pid] = cwd
        except (psutil.Error, OSError):
            continue
    return found


async def wait_for_listeners(snap_dir: Path, max_wait: float, announce_grace: float = 2.0) -> list[str]:
    """Wait until every step-2 listener of this Snapshot is attached to the tab.

    Listeners are the live processes of this Snapshot's step-2 `.bg` hooks (the engine launches
    them before the navigate hook, in filename order) and any folder with a `listener.pending`
    file. A process that writes no `listener.pending` within `announce_grace` seconds does not
    take part. Returns the names of the listeners that were not ready in time.
    """
    start = time.monotonic()
    announce_deadline = start + announce_grace
    while True:
        waiting: set[Path] = set()
        for pending in snap_dir.glob(f"*/{LISTENER_PENDING}"):
            pid = _pid_in(pending)
            if pid and psutil.pid_exists(pid) and _pid_in(pending.parent / LISTENER_READY) != pid:
                waiting.add(pending.parent)
        for pid, cwd in _listener_processes(snap_dir).items():
            if _pid_in(cwd / LISTENER_READY) == pid:
                continue
            if _pid_in(cwd / LISTENER_PENDING) == pid or time.monotonic() < announce_deadline:
                waiting.add(cwd)
        if not waiting:
            return []
        if time.monotonic() - start >= max_wait:
            names = sorted(p.name for p in waiting)
            log(f"listeners not ready after {max_wait:.0f}s, navigating anyway: {', '.join(names)}")
            return names
        await asyncio.sleep(0.05)


def run_listener(plugin: str, attach: Callable[[Hook, Any], Awaitable[Callable[[], Awaitable[dict]]]]) -> None:
    """The body of a step-2 `.bg` listener.

    `attach(hook, page)` registers the page event handlers and returns `finish()`, which flushes
    and returns the ArchiveResult fields. The listener then waits until the tab closes (step 7),
    SIGTERM, or its timeout, and always emits its record.
    """
    listener_announce()

    async def main(hook: Hook) -> None:
        info = await read_browser(hook, wait_for_ready=min(30.0, hook.timeout))
        target_id = read_target_id(hook)
        if not target_id:
            raise Skip("this snapshot has no browser tab (the chrome tab hook did not run)")
        finish = None
        try:
            async with connected(hook, info) as browser:
                page = await find_page(browser, target_id)
                if page is None:
                    raise Skip(f"the snapshot's tab {target_id} is not open")
                finish = await attach(hook, page)
                listener_ready()
                closed = asyncio.get_running_loop().create_future()
                page.on("close", lambda _page: closed.done() or closed.set_result(True))
                with contextlib.suppress(TimeoutError):  # before the engine's deadline: the record must get out
                    await asyncio.wait_for(closed, max(1.0, hook.remaining() - 5))
        finally:
            listener_done()
            if finish is not None:
                # runs on tab close, timeout, SIGTERM (cancellation) or a lost connection alike
                fields = await asyncio.shield(finish())
                result(**fields)

    run(plugin, main, background=True)
