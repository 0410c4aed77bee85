"""Run plugin hooks as real subprocesses, exactly as the hook contract (BRIEF.md section 2) says.

    harness = HookHarness(data_dir, crawl_id="crawl1", env={"TIMEOUT": "30"})
    tab = harness.run(hook_path("chrome", "chrome_tab"), url, "snap1")
    assert tab.returncode == 0 and tab.result["status"] == "succeeded"
    listener = harness.start(hook_path("consolelog"), url, "snap1")   # a .bg hook
    ...
    done = listener.stop()          # SIGTERM to its process group, SIGKILL after a grace period

- CWD: `<data>/archive/<snapshot_id>/<plugin>/` (Snapshot hooks) or `<data>/crawls/<crawl_id>/<plugin>/`
  (Crawl and CrawlEnd hooks), created for the hook;
- argv: the interpreter waybox uses for the extension (plugin_registry), then `--url=... --snapshot-id=...
  --crawl-id=... --depth=N --timeout=N` (`--timeout` = the resolved `<PLUGIN>_TIMEOUT`);
- environment: the process environment + `env` given to the harness or the call + every resolved config key of
  the plugin and the global keys (waybox.config, the same resolution the engine uses) + DATA_DIR, SNAP_DIR,
  CRAWL_DIR;
- each hook in its own process group; stdout parsed as JSONL records, stderr kept.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from waybox import plugin_registry
from waybox.config import load_config

PLUGINS_DIR = plugin_registry.BUILTIN_PLUGINS_DIR
_counter = itertools.count(1)


def hook_path(plugin: str, name_part: str = "", plugins_dir: Path = PLUGINS_DIR) -> Path:
    """The one hook file of `plugin` whose name contains `name_part`."""
    matches = sorted(p for p in (plugins_dir / plugin).glob("on_*") if name_part in p.name)
    if len(matches) != 1:
        raise LookupError(f"{plugin}: expected one hook matching {name_part!r}, found {[m.name for m in matches]}")
    return matches[0]


def parse_jsonl(text: str) -> tuple[list[dict], list[str]]:
    """JSON object lines -> records; anything else is returned apart (the engine logs and ignores it)."""
    records, other = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            other.append(line)
            continue
        if isinstance(value, dict):
            records.append(value)
        else:
            other.append(line)
    return records, other


@dataclass
class HookResult:
    hook: Path
    cwd: Path
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    records: list[dict] = field(default_factory=list)
    non_json: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.records, self.non_json = parse_jsonl(self.stdout)

    def of_type(self, kind: str) -> list[dict]:
        return [r for r in self.records if r.get("type") == kind]

    @property
    def result(self) -> dict | None:
        """The last ArchiveResult record, if any."""
        results = self.of_type("ArchiveResult")
        return results[-1] if results else None

    @property
    def status(self) -> str | None:
        return self.result["status"] if self.result else None

    def __str__(self) -> str:
        return (f"{self.hook.name} exited {self.returncode} after {self.duration:.1f}s"
                f"{' (timed out)' if self.timed_out else ''}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}")


class BackgroundHook:
    """A `.bg` hook started by the harness: stop it with SIGTERM to its group, or wait for it to exit."""

    def __init__(self, hook: Path, argv: list[str], cwd: Path, env: dict[str, str], log_dir: Path):
        self.hook, self.argv, self.cwd = hook, argv, cwd
        n = next(_counter)
        self.out_path = log_dir / f"{n:03d}-{hook.name}.stdout"
        self.err_path = log_dir / f"{n:03d}-{hook.name}.stderr"
        self.started = time.monotonic()
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         start_new_session=True)
        self.pgid = self.proc.pid

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def records_so_far(self) -> list[dict]:
        return parse_jsonl(self.out_path.read_text(encoding="utf-8", errors="replace"))[0]

    def stderr_so_far(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def _result(self, timed_out: bool = False) -> HookResult:
        return HookResult(self.hook, self.cwd, self.argv, self.proc.returncode,
                          self.out_path.read_text(encoding="utf-8", errors="replace"), self.stderr_so_far(),
                          time.monotonic() - self.started, timed_out)

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def wait(self, timeout: float) -> HookResult:
        """Wait for the hook to exit by itself; kills the group and marks `timed_out` if it does not."""
        try:
            self.proc.wait(timeout)
            return self._result()
        except subprocess.TimeoutExpired:
            self.kill_group()
            self.proc.wait()
            return self._result(timed_out=True)

    def stop(self, grace: float = 10.0, sig: int = signal.SIGTERM) -> HookResult:
        """What the engine does when the Snapshot (or Crawl) seals: `sig` to the process group, SIGKILL after
        `grace` seconds (then `timed_out` is set)."""
        if self.alive():
            self.kill_group(sig)
        result = self.wait(grace)
        self.kill_group()  # anything of the group that outlived the hook
        return result


class HookHarness:
    """Runs hooks of one Crawl in one data directory."""

    def __init__(self, data_dir: Path, crawl_id: str, env: dict[str, str] | None = None):
        self.data_dir = Path(data_dir)
        self.crawl_id = crawl_id
        self.env = dict(env or {})
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir = self.data_dir / "logs" / "hooks"
        self.log_dir.mkdir(parents=True, exist_ok=True)

    @property
    def crawl_dir(self) -> Path:
        return self.data_dir / "crawls" / self.crawl_id

    def snap_dir(self, snapshot_id: str) -> Path:
        return self.data_dir / "archive" / snapshot_id

    def parse(self, hook: Path) -> plugin_registry.Hook:
        return plugin_registry.parse_hook_name(hook.parent.name, hook)

    def cwd_for(self, hook: plugin_registry.Hook, snapshot_id: str | None) -> Path:
        if hook.model == "Snapshot":
            if not snapshot_id:
                raise ValueError(f"{hook.name} is a Snapshot hook: give a snapshot id")
            return self.snap_dir(snapshot_id) / hook.plugin
        return self.crawl_dir / hook.plugin

    def environment(self, plugin: str, snapshot_id: str | None, env: dict[str, str] | None = None) -> dict[str, str]:
        process_env = {**os.environ, **self.env, **(env or {})}
        config = load_config(None, env=process_env)
        full = {**process_env, **config.hook_env(plugin), "DATA_DIR": str(self.data_dir),
                "CRAWL_DIR": str(self.crawl_dir)}
        if snapshot_id:
            full["SNAP_DIR"] = str(self.snap_dir(snapshot_id))
        return full

    def prepare(self, hook_file: Path, url: str, snapshot_id: str | None, env: dict[str, str] | None,
                depth: int) -> tuple[list[str], Path, dict[str, str], float]:
        hook = self.parse(hook_file)
        cwd = self.cwd_for(hook, snapshot_id)
        cwd.mkdir(parents=True, exist_ok=True)
        full_env = self.environment(hook.plugin, snapshot_id, env)
        timeout = float(full_env.get(f"{hook.plugin.upper()}_TIMEOUT") or full_env.get("TIMEOUT") or 60)
        args = [f"--url={url}", f"--snapshot-id={snapshot_id or ''}", f"--crawl-id={self.crawl_id}",
                f"--depth={depth}", f"--timeout={int(timeout)}"]
        return [*hook.argv(), *args], cwd, full_env, timeout

    def run(self, hook_file: Path, url: str = "", snapshot_id: str | None = None, *,
            env: dict[str, str] | None = None, depth: int = 0, wall_timeout: float | None = None) -> HookResult:
        """Run a foreground hook to its end (killed after its timeout + 15 s, like the engine would)."""
        argv, cwd, full_env, timeout = self.prepare(hook_file, url, snapshot_id, env, depth)
        started = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        timed_out = False
        try:
            out, err = proc.communicate(timeout=wall_timeout or timeout + 15)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of a finished hook may stay behind
        return HookResult(hook_file, cwd, argv, proc.returncode, out, err, time.monotonic() - started, timed_out)

    def start(self, hook_file: Path, url: str = "", snapshot_id: str | None = None, *,
              env: dict[str, str] | None = None, depth: int = 0) -> BackgroundHook:
        """Start a hook (normally a .bg one) and return at once."""
        argv, cwd, full_env, _timeout = self.prepare(hook_file, url, snapshot_id, env, depth)
        return BackgroundHook(hook_file, argv, cwd, full_env, self.log_dir)
