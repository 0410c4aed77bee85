"""Shared plumbing for waybox's built-in Python hook scripts.

A hook script calls `hookkit.run(__file__, main)`. `main(hook)` gets a `Hook` with the
parsed arguments (`--url --snapshot-id --crawl-id --depth --timeout`), its folders and its
resolved config, and returns the exit code. The contract (BRIEF section 2):

* stdout carries JSONL records only (`hook.emit`, `hook.result`); logs go to stderr (`hook.log`);
* exit 0 with a `failed` record is a soft failure, exit 10 (`hook.skip`) is skipped, any other
  non-zero exit is a hard failure that the engine retries;
* SIGTERM/SIGINT raise `Terminated` in the hook, which stops its child process, and `run` then
  exits 1 (unfinished work, to be retried) unless the hook handled it;
* every binary a hook runs goes through `hook.run_binary`, which reports a `Process` record and
  makes the child die with the hook (same process group, and SIGKILL on the hook's death).

Config: the engine passes every resolved key in the environment; when a key is missing (a
hook run by hand) it is resolved here the same way, from aliases, `x-fallback` and defaults of
the plugin's config.json and waybox's global schema.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import http.cookiejar
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

EXIT_SKIPPED = 10
STOP_GRACE_S = 3.0
MAX_CAPTURE_CHARS = 1_000_000
GLOBAL_SCHEMA = Path(__file__).parent / "config_schema.json"
SECRET_FLAG_RE = re.compile(r"(?i)^(--?[\w-]*(?:password|passwd|token|secret|api-key|apikey)[\w-]*)(=.*)?$")
SECRET_HEADER_RE = re.compile(r"(?i)^((?:--header=|--add-header[= ]?)?\s*(?:authorization|proxy-authorization|cookie|"
                              r"x-api-key|x-auth-token)\s*:\s*)\S.*$")
TEXTUAL_TYPE_RE = re.compile(r"(?i)^(text/|application/(?:[\w.+-]*\+)?(?:xml|json|x-ndjson|jsonl?|csv|rss|atom)\b)")


class Terminated(BaseException):
    """SIGTERM or SIGINT arrived: finish hastily."""


class FetchError(Exception):
    """The server could not be reached (DNS, refused, timeout, TLS...)."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


# -- config ---------------------------------------------------------------------------------


def _schema_properties(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    props = data.get("properties") if isinstance(data, dict) else None
    return props if isinstance(props, dict) else {}


def resolve_config(plugin: str, plugin_dir: Path, env: dict[str, str]) -> dict[str, Any]:
    """Every global key and every key of the plugin, typed, from `env` with the same rules as the engine."""
    from waybox.config import ConfigError, Option, coerce

    prefix = plugin.upper()
    schemas = dict(_schema_properties(GLOBAL_SCHEMA))
    schemas[f"{prefix}_ENABLED"] = {"type": "boolean", "default": True, "x-aliases": [f"SAVE_{prefix}"]}
    schemas[f"{prefix}_TIMEOUT"] = {"type": "integer", "minimum": 1, "x-fallback": "TIMEOUT"}
    schemas.update(_schema_properties(plugin_dir / "config.json"))

    def raw(key: str, seen: tuple[str, ...] = ()) -> Any:
        schema = schemas[key]
        for name in (key, *schema.get("x-aliases", ())):
            if name in env:
                return env[name]
        fallback = schema.get("x-fallback")
        if fallback in schemas and fallback not in seen:
            return raw(fallback, (*seen, key))
        return schema.get("default")

    values: dict[str, Any] = {}
    for key, schema in schemas.items():
        value = raw(key)
        if value is None:
            values[key] = None
            continue
        try:
            values[key] = coerce(Option(key, schema, plugin), value, "environment")
        except ConfigError as err:
            raise SystemExit(f"config error: {err}") from None
    return values


# -- the hook -------------------------------------------------------------------------------


@dataclass
class Ran:
    cmd: list[str]
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False


@dataclass
class Hook:
    plugin: str
    plugin_dir: Path
    url: str
    snapshot_id: str
    crawl_id: str
    depth: int
    timeout: float
    config: dict[str, Any]
    cwd: Path = field(default_factory=Path.cwd)
    snap_dir: Path | None = None
    data_dir: Path | None = None
    started: float = field(default_factory=time.monotonic)
    _child: subprocess.Popen | None = None

    # - time -
    def remaining(self) -> float:
        """Seconds left before this hook's timeout, keeping a margin to report before the engine kills it."""
        margin = min(5.0, self.timeout * 0.1)
        return max(0.5, self.timeout - margin - (time.monotonic() - self.started))

    # - config -
    def get(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return default if value is None else value

    @property
    def user_agent(self) -> str:
        return self.get(f"{self.plugin.upper()}_USER_AGENT") or self.get("USER_AGENT", "")

    @property
    def check_ssl(self) -> bool:
        value = self.config.get(f"{self.plugin.upper()}_CHECK_SSL_VALIDITY")
        return bool(self.get("CHECK_SSL_VALIDITY", True) if value is None else value)

    @property
    def cookies_file(self) -> str:
        path = self.get(f"{self.plugin.upper()}_COOKIES_FILE") or self.get("COOKIES_FILE", "")
        return str(Path(path).expanduser()) if path else ""

    # - output -
    def emit(self, record: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
        sys.stdout.flush()

    def result(self, status: str, output_str: str = "", output_files: Iterable[str] = (),
               output_json: Any = None) -> None:
        record: dict[str, Any] = {"type": "ArchiveResult", "status": status, "output_str": output_str}
        files = list(output_files)
        if files:
            record["output_files"] = files
        if output_json is not None:
            record["output_json"] = output_json
        self.emit(record)

    def skip(self, reason: str) -> NoReturn:
        self.log(f"skipped: {reason}")
        self.result("skipped", reason)
        raise SystemExit(EXIT_SKIPPED)

    def log(self, message: str) -> None:
        sys.stderr.write(f"[{self.plugin}] {message}\n")
        sys.stderr.flush()

    def files(self, root: Path | None = None) -> list[str]:
        """Every file under `root` (default: the hook's folder), relative to the hook's folder, sorted."""
        root = root or self.cwd
        found = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        return sorted(str(p.relative_to(self.cwd)) for p in found)

    # - binaries -
    def which(self, name: str) -> str | None:
        """A binary by name or path: PATH first, then next to waybox's Python (the virtualenv's bin)."""
        found = shutil.which(name)
        if found:
            return found
        beside = Path(sys.executable).parent / name
        return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None

    def require(self, name: str, install_hint: str) -> str:
        path = self.which(name)
        if not path:
            self.skip(f"{name} is not installed ({install_hint}, or run `waybox install`)")
        return path

    def run_binary(self, cmd: Sequence[str], *, timeout: float | None = None, env: dict[str, str] | None = None,
                   cwd: Path | None = None, echo_stderr: bool = True) -> Ran:
        """Run a binary to completion (or until `timeout`/the hook's deadline), reporting a Process record."""
        cmd = [str(c) for c in cmd]
        limit = self.remaining() if timeout is None else min(timeout, self.remaining())
        started_at = now_iso()
        proc = subprocess.Popen(
            cmd, cwd=cwd or self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, preexec_fn=_die_with_parent,  # noqa: PLW1509 - single-threaded here
        )
        self._child = proc
        out_chunks: list[str] = []
        err_chunks: list[str] = []
        readers = [
            threading.Thread(target=_drain, args=(proc.stdout, out_chunks, None), daemon=True),
            threading.Thread(target=_drain, args=(proc.stderr, err_chunks, sys.stderr if echo_stderr else None),
                             daemon=True),
        ]
        for reader in readers:
            reader.start()
        timed_out = False
        try:
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
                self.log(f"{Path(cmd[0]).name} still running after {limit:.0f}s: stopping it")
                stop_process(proc)
        except BaseException:
            stop_process(proc)
            self._report(cmd, proc, started_at)
            raise
        finally:
            self._child = None
            for reader in readers:
                reader.join(timeout=5)
        self._report(cmd, proc, started_at)
        return Ran(cmd, proc.returncode, "".join(out_chunks), "".join(err_chunks), timed_out)

    def _report(self, cmd: list[str], proc: subprocess.Popen, started_at: str) -> None:
        self.emit({"type": "Process", "cmd": redact(cmd), "pid": proc.pid, "exit_code": proc.returncode,
                   "started_at": started_at, "ended_at": now_iso(), "pwd": str(self.cwd)})

    # - fetching -
    def fetch(self, url: str, *, max_bytes: int = 10_000_000, method: str = "GET",
              timeout: float | None = None, text_only: bool = False) -> Response:
        return fetch(url, user_agent=self.user_agent, check_ssl=self.check_ssl, cookies_file=self.cookies_file,
                     timeout=min(timeout or self.remaining(), self.remaining()), max_bytes=max_bytes, method=method,
                     text_only=text_only)


def _drain(stream: Any, chunks: list[str], echo: Any) -> None:
    size = 0
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if echo is not None:
            with contextlib.suppress(OSError, ValueError):
                echo.write(line)
                echo.flush()
        if size < MAX_CAPTURE_CHARS:
            chunks.append(line)
            size += len(line)
    stream.close()


_PR_SET_PDEATHSIG = 1
_libc: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """In the child, before exec: be SIGKILLed if the hook dies (Linux)."""
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def stop_process(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM the child and its descendants, then SIGKILL whatever is left after `grace`."""
    if proc.poll() is not None:
        return
    try:
        import psutil

        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - psutil missing or the process just ended
        family = []
    for member in family or []:
        with contextlib.suppress(Exception):
            member.terminate()
    if not family:
        with contextlib.suppress(OSError):
            proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    for member in family:
        with contextlib.suppress(Exception):
            member.kill()
    with contextlib.suppress(OSError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)


def redact(cmd: Sequence[str]) -> list[str]:
    """The command with secrets (password/token options, passwords in URLs) replaced."""
    out: list[str] = []
    hide_next = False
    for arg in cmd:
        if hide_next:
            out.append("********")
            hide_next = False
            continue
        header = SECRET_HEADER_RE.match(arg)
        if header:
            out.append(f"{header.group(1)}********")
            continue
        match = SECRET_FLAG_RE.match(arg)
        if match:
            if match.group(2):
                out.append(f"{match.group(1)}=********")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(re.sub(r"(://[^/\s:@]+:)[^/\s@]+@", r"\1********@", arg))
    return out


# -- fetching -------------------------------------------------------------------------------


@dataclass
class Response:
    url: str  # the final URL, after redirects
    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool = False
    redirects: list[dict[str, Any]] = field(default_factory=list)
    http_version: str = ""

    def header(self, name: str, default: str = "") -> str:
        lname = name.lower()
        return next((v for k, v in self.headers if k.lower() == lname), default)

    @property
    def content_type(self) -> str:
        return self.header("Content-Type").split(";", 1)[0].strip().lower()

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class _RecordingRedirects(urllib.request.HTTPRedirectHandler):
    def __init__(self) -> None:
        self.chain: list[dict[str, Any]] = []

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201
        self.chain.append({"url": req.full_url, "status": code, "location": newurl})
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def looks_binary(sample: bytes) -> bool:
    if b"\x00" in sample:
        return True
    controls = sum(1 for byte in sample if byte < 9 or 13 < byte < 32)
    return controls > max(8, len(sample) // 20)


def fetch(url: str, *, user_agent: str = "", check_ssl: bool = True, cookies_file: str = "", timeout: float = 30,
          max_bytes: int = 10_000_000, method: str = "GET", text_only: bool = False) -> Response:
    """One HTTP(S) request with redirects followed; HTTP errors are responses, network errors FetchError.
    `text_only`: a body that is not declared as text is read only as far as needed to see it is
    binary (then `truncated` is set), so a video is not downloaded to find no links in it."""
    redirects = _RecordingRedirects()
    handlers: list[Any] = [redirects]
    context = ssl.create_default_context()
    if not check_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    handlers.append(urllib.request.HTTPSHandler(context=context))
    if cookies_file:
        jar = http.cookiejar.MozillaCookieJar(cookies_file)
        try:
            jar.load(ignore_discard=True, ignore_expires=True)
        except (OSError, http.cookiejar.LoadError) as err:
            sys.stderr.write(f"cookies file {cookies_file} not loaded: {err}\n")
        handlers.append(urllib.request.HTTPCookieProcessor(jar))
    opener = urllib.request.build_opener(*handlers)
    headers = {"User-Agent": user_agent or "waybox", "Accept": "*/*", "Accept-Encoding": "identity"}
    request = urllib.request.Request(url, headers=headers, method=method)
    try:
        try:
            response = opener.open(request, timeout=max(1.0, timeout))
        except urllib.error.HTTPError as err:
            response = err
        with response:
            body = b""
            if method != "HEAD":
                content_type = (response.headers.get("Content-Type") or "").split(";", 1)[0].strip()
                if text_only and not is_textual(content_type):
                    body = response.read(min(65536, max_bytes + 1))
                    if looks_binary(body[:8192]):
                        body += b"\x00"  # marks it truncated below
                        max_bytes = len(body) - 1
                    else:
                        body += response.read(max_bytes + 1 - len(body))
                else:
                    body = response.read(max_bytes + 1)
            status = response.status if response.status is not None else response.code
            version = getattr(getattr(response, "fp", None), "version", None) or getattr(response, "version", None)
            return Response(
                url=response.geturl(), status=int(status), reason=str(response.reason or ""),
                headers=list(response.headers.items()), body=body[:max_bytes], truncated=len(body) > max_bytes,
                redirects=redirects.chain, http_version={10: "HTTP/1.0", 11: "HTTP/1.1"}.get(version, ""),
            )
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as err:
        reason = getattr(err, "reason", None) or err
        raise FetchError(f"{url}: {reason}") from None


def is_textual(content_type: str) -> bool:
    return not content_type or bool(TEXTUAL_TYPE_RE.match(content_type))


# -- files other hooks left -----------------------------------------------------------------


def wget_main_file(wget_dir: Path, url: str) -> Path | None:
    """The file wget saved for `url` (wget's --force-directories layout), or None."""
    if not wget_dir.is_dir():
        return None
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return None
    hosts = [host] if port is None else [f"{host}+{port}", f"{host}:{port}", host]
    path = unquote(parts.path or "/").lstrip("/")
    names: list[str] = []
    if not path or path.endswith("/"):
        names.append(path + "index.html")
    else:
        names += [path, path + ".html", path + "/index.html"]
    if parts.query:
        names = [f"{n}@{parts.query}" for n in names] + [f"{n}@{parts.query}.html" for n in names] + names
    for h in hosts:
        for name in names:
            candidate = wget_dir / h / name
            if candidate.is_file() and not candidate.is_symlink():
                return candidate
    return None


def original_of(path: Path) -> Path:
    """wget --backup-converted keeps the page as served in `<file>.orig`: prefer it."""
    orig = path.with_name(path.name + ".orig")
    return orig if orig.is_file() else path


@dataclass
class Content:
    data: bytes
    source: str  # where it came from, for messages
    content_type: str = ""
    base_url: str = ""  # the URL relative links are relative to (after redirects)


def page_content(hook: Hook, *, max_bytes: int = 50_000_000) -> Content:
    """The document at hook.url: wget's saved copy when there is one, else fetched. Skips (exit 10)
    when it cannot be had for a reason a retry would not fix."""
    if hook.snap_dir is not None:
        main = wget_main_file(hook.snap_dir / "wget", hook.url)
        if main is not None:
            path = original_of(main)
            with path.open("rb") as f:
                return Content(f.read(max_bytes), f"wget/{path.relative_to(hook.snap_dir / 'wget')}")
    try:
        response = hook.fetch(hook.url, max_bytes=max_bytes, text_only=True)
    except FetchError as err:
        hook.log(f"cannot fetch the page: {err}")
        raise SystemExit(1) from None
    if not response.ok:
        hook.skip(f"the page answered {response.status} {response.reason}")
    if not is_textual(response.content_type) and response.truncated:
        hook.skip(f"the page is {response.content_type or 'binary data'}, not a text document")
    return Content(response.body, response.url, response.content_type, response.url)


MAX_LOGGED_SKIPS = 50


def emit_links(hook: Hook, content: Content, formats: Iterable[str], what: str, *,
               force_format: str | None = None) -> int:
    """The body of a step-7 parser hook: parse `content` if it is one of `formats`, report each link
    as a Snapshot record, keep them in `urls.jsonl`, and end with an ArchiveResult."""
    from waybox import parsers
    from waybox.urlinput import InvalidURL, normalize_url

    try:
        found = force_format or parsers.detect_format(content.data)
    except parsers.ParseError as err:
        hook.skip(f"{content.source}: {err}")
    if found not in formats:
        hook.skip(f"not {what}: {content.source} is {parsers.FORMATS[found]}")
    try:
        parsed = parsers.parse(content.data, format=found, base_url=content.base_url or hook.url)
    except parsers.ParseError as err:
        hook.skip(f"{content.source}: {err}")
    for skipped in parsed.skipped[:MAX_LOGGED_SKIPS]:
        hook.log(f"passed over {skipped}")
    if len(parsed.skipped) > MAX_LOGGED_SKIPS:
        hook.log(f"... and {len(parsed.skipped) - MAX_LOGGED_SKIPS} more")
    try:
        own = {normalize_url(hook.url), normalize_url(content.base_url)} if content.base_url else {
            normalize_url(hook.url)}
    except InvalidURL:
        own = {hook.url}
    links = [link for link in parsed.links if link.url not in own]
    summary = {"format": parsed.format, "source": content.source, "links": len(links),
               "skipped": len(parsed.skipped)}
    if not links:
        hook.result("succeeded", f"no links found in {parsers.FORMATS[parsed.format]}", output_json=summary)
        return 0
    records = [link.record() for link in links]
    with (hook.cwd / "urls.jsonl").open("w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    for record in records:
        hook.emit(record)
    hook.result("succeeded", "urls.jsonl", ["urls.jsonl"], summary)
    return 0


# -- running a hook -------------------------------------------------------------------------


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    args: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        if not arg.startswith("--"):
            continue
        key, eq, value = arg[2:].partition("=")
        if not eq:
            value = next(it, "")
        args[key.replace("-", "_")] = value
    return args


def setup(script: str, argv: Sequence[str] | None = None, env: dict[str, str] | None = None) -> Hook:
    script_path = Path(script).resolve()
    plugin_dir = script_path.parent
    plugin = plugin_dir.name
    env = dict(os.environ if env is None else env)
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.get("url"):
        raise SystemExit(f"{script_path.name}: --url=URL is required")
    config = resolve_config(plugin, plugin_dir, env)
    timeout_text = args.get("timeout") or ""
    try:
        timeout = float(timeout_text) if timeout_text else float(config.get(f"{plugin.upper()}_TIMEOUT") or 60)
    except ValueError:
        timeout = float(config.get(f"{plugin.upper()}_TIMEOUT") or 60)
    try:
        depth = int(args.get("depth") or 0)
    except ValueError:
        depth = 0
    cwd = Path.cwd()
    snap_dir = Path(env["SNAP_DIR"]) if env.get("SNAP_DIR") else cwd.parent
    data_dir = Path(env["DATA_DIR"]) if env.get("DATA_DIR") else None
    return Hook(plugin=plugin, plugin_dir=plugin_dir, url=args["url"], snapshot_id=args.get("snapshot_id", ""),
                crawl_id=args.get("crawl_id", ""), depth=depth, timeout=max(1.0, timeout), config=config, cwd=cwd,
                snap_dir=snap_dir, data_dir=data_dir)


def _on_signal(signum: int, frame: Any) -> None:
    # the first signal interrupts; later ones are ignored while the hook winds down
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise Terminated(signal.Signals(signum).name)


def run(script: str, main: Callable[[Hook], int | None],
        on_terminated: Callable[[Hook], int | None] | None = None) -> NoReturn:
    """Set up, call `main(hook)`, and exit with its code (hard failure on an unexpected error)."""
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    hook: Hook | None = None
    try:
        hook = setup(script)
        if hook.config.get(f"{hook.plugin.upper()}_ENABLED") is False:
            hook.skip(f"{hook.plugin.upper()}_ENABLED is False")
        code = main(hook)
    except Terminated as sig:
        if hook is not None:
            hook.log(f"{sig}: stopping early")
        code = on_terminated(hook) if (hook is not None and on_terminated is not None) else 1
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        if stop.code is not None and not isinstance(stop.code, int):
            sys.stderr.write(f"{stop.code}\n")
    except Exception:  # noqa: BLE001 - any bug is a hard failure with its traceback in the log
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code or 0)
