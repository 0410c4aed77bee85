"""Running one hook attempt: invocation exactly as BRIEF.md section 2, output read as it comes.

An `Attempt` launches the hook, `follow()`s its stdout file while it runs (records applied as
lines arrive) and `conclude()`s into a `policy.HookRun`, which the state machine turns into an
ArchiveResult status. Foreground and background hooks run the same way; they differ only in
whether their step waits for them (policy.pending_step).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from waybox.config import Config
from waybox.datadir import DataDir
from waybox.engine import jsonl, policy
from waybox.engine.records import RecordSink
from waybox.models import ArchiveResult, Crawl, Process, Snapshot
from waybox.plugin_registry import Hook

HOOK_LOG_DIR = ".hooks"
READ_CHUNK = 65536
FOLLOW_INTERVAL_S = 0.1


@dataclass
class Target:
    """Where a hook runs: a Snapshot's folder, or a Crawl's folder for Crawl hooks."""

    datadir: DataDir
    crawl: Crawl
    snapshot: Snapshot | None

    @property
    def owner_dir(self) -> Path:
        if self.snapshot is not None:
            return self.datadir.snapshot_dir(self.snapshot.id)
        return self.datadir.crawl_dir(self.crawl.id)

    @property
    def url(self) -> str:
        if self.snapshot is not None:
            return self.snapshot.url
        return (self.crawl.urls.splitlines() or [""])[0]


def hook_argv(hook: Hook, target: Target, timeout: int) -> list[str]:
    args = [f"--url={target.url}"]
    if target.snapshot is not None:
        args.append(f"--snapshot-id={target.snapshot.id}")
    args += [
        f"--crawl-id={target.crawl.id}",
        f"--depth={target.snapshot.depth if target.snapshot else 0}",
        f"--timeout={timeout}",
    ]
    return [*hook.argv(), *args]


def hook_env(hook: Hook, target: Target, config: Config) -> dict[str, str]:
    """The plugin's keys and the global keys, every plugin's <PLUGIN>_ENABLED (so hooks can
    coordinate, e.g. headers without a browser), and the folders of BRIEF.md section 2."""
    env = config.hook_env(hook.plugin)
    for name in config.registry.plugins if config.registry else ():
        env[f"{name.upper()}_ENABLED"] = "True" if config.plugin_enabled(name) else "False"
    env["DATA_DIR"] = str(target.datadir.root)
    env["CRAWL_DIR"] = str(target.datadir.crawl_dir(target.crawl.id))
    env["SNAP_DIR"] = str(target.owner_dir) if target.snapshot is not None else ""
    return env


def hook_timeout(hook: Hook, config: Config) -> int:
    return int(config.get(f"{hook.plugin.upper()}_TIMEOUT") or config["TIMEOUT"])


def lives_until_seal(hook: Hook) -> bool:
    """Background Crawl hooks (a shared browser, say) serve the whole Crawl: their
    <PLUGIN>_TIMEOUT bounds each use, not their life, which ends when the Crawl seals."""
    return hook.background and hook.model == "Crawl"


def output_state(folder: Path) -> dict[str, tuple[int, int]]:
    """(mtime, size) of every output file in a folder (pid files and hidden files do not count)."""
    state: dict[str, tuple[int, int]] = {}
    if not folder.is_dir():
        return state
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and not path.name.endswith(".pid") and not any(p.startswith(".") for p in rel.parts):
            stat = path.stat()
            state[str(rel)] = (stat.st_mtime_ns, stat.st_size)
    return state


def left_files(folder: Path, before: dict[str, tuple[int, int]] | None = None) -> bool:
    """Whether the hook left any output. The folder is shared by every hook of a plugin (and
    by earlier attempts), so with `before` (the state at launch) only new or changed files count."""
    after = output_state(folder)
    if before is None:
        return bool(after)
    return any(before.get(name) != value for name, value in after.items())


class Attempt:
    """One run of one hook for one ArchiveResult."""

    def __init__(self, result: ArchiveResult, hook: Hook, target: Target, config: Config, worker: Process):
        self.result = result
        self.hook = hook
        self.target = target
        self.config = config
        self.worker = worker
        self.cwd = target.owner_dir / hook.plugin
        self.log_dir = target.owner_dir / HOOK_LOG_DIR / hook.plugin
        self.timeout = hook_timeout(hook, config)
        self.grace = float(config["BG_HOOK_GRACE"])
        self.process: Process | None = None
        self.sink: RecordSink | None = None
        self.splitter = jsonl.LineSplitter()
        self.deadline = 0.0
        self.before: dict[str, tuple[int, int]] | None = None  # output files at launch
        self.stdout = None

    # -- start ---------------------------------------------------------------------------

    def launch(self) -> Process:
        self.before = output_state(self.cwd)
        self.process = Process.launch(
            hook_argv(self.hook, self.target, self.timeout),
            cwd=self.cwd,
            process_type=Process.Type.HOOK,
            env=hook_env(self.hook, self.target, self.config),
            parent=self.worker,
            timeout=self.timeout,
            log_dir=self.log_dir,
            log_name=self.hook.name,
            on_record=self.link,
        )
        self.deadline = time.monotonic() + (float("inf") if lives_until_seal(self.hook) else self.timeout)
        self.sink = RecordSink(self.result, self.target.snapshot, self.process, self.config, self.log)
        return self.process

    def link(self, process: Process) -> None:
        """Tie the result to its Process row before the hook starts (see `recover`)."""
        ArchiveResult.objects.filter(pk=self.result.pk).update(process=process)
        self.result.process = process

    def log(self, message: str) -> None:
        """Problems with the hook's output go to its stderr log, beside its own messages."""
        path = self.process.stderr_path if self.process else str(self.log_dir / f"{self.hook.name}.stderr.log")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"[waybox] {self.hook.name}: {message}\n")

    # -- following -----------------------------------------------------------------------

    def follow(self) -> None:
        """Apply whatever the hook has added to its stdout file since the last call.

        stdout goes to a file, not a pipe, so a hook outlives a worker that dies without
        losing what it reported; the supervisor calls this every FOLLOW_INTERVAL_S while the
        hook runs, so records (a title, say) show before it ends.
        """
        if self.sink is None:
            self.sink = RecordSink(self.result, self.target.snapshot, self.process, self.config, self.log)
        if self.process is None or not self.process.stdout_path:
            return
        if self.stdout is None:
            try:
                self.stdout = open(self.process.stdout_path, "rb")  # noqa: SIM115 - closed in conclude()
            except FileNotFoundError:
                return
        for chunk in iter(lambda: self.stdout.read(READ_CHUNK), b""):
            for line in self.splitter.feed(chunk):
                self.sink.accept(line)

    def stop(self) -> None:
        """SIGTERM the hook's whole tree, SIGKILL what is left after the grace."""
        self.process.kill_tree(self.grace)

    def conclude(self, exit_code: int | None, *, timed_out: bool = False,
                 stopped_at_seal: bool = False, interrupted: bool = False) -> policy.HookRun:
        """Read the rest of stdout and sum the attempt up for `policy.decide`."""
        self.follow()
        for line in self.splitter.close():
            self.sink.accept(line)
        if self.stdout is not None:
            self.stdout.close()
            self.stdout = None
        return policy.HookRun(
            exit_code=exit_code,
            reported_status=self.sink.status,
            left_files=left_files(self.cwd, self.before),
            timed_out=timed_out,
            timeout=self.timeout,
            stopped_at_seal=stopped_at_seal,
            interrupted=interrupted,
        )

    def output_fields(self) -> dict:
        """The ArchiveResult fields this attempt's records set (paths made Snapshot-relative)."""
        sink = self.sink
        if sink is None:
            return {}
        prefix = self.hook.plugin
        output_str = sink.output_str
        if sink.errors:  # e.g. a path outside the Snapshot folder: an error on the result, whatever its status
            errors = "; ".join(sink.errors)
            output_str = f"{output_str} ({errors})" if output_str else errors
        return {
            "output_str": output_str,
            "output_json": sink.output_json,
            "output_files": [f"{prefix}/{p}" for p in sink.output_files],
        }
