"""Running one hook attempt: invocation exactly as BRIEF.md section 2, output read as it comes.

A foreground hook is run to its end here (records applied as lines arrive, stopped at its
timeout). A background hook is launched and handed back; whoever holds it calls `finish()`
when it exits. Either way the attempt ends in a `policy.HookRun` that the state machine
turns into an ArchiveResult status.
"""

from __future__ import annotations

import os
import select
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
    env = config.hook_env(hook.plugin)
    env["DATA_DIR"] = str(target.datadir.root)
    env["CRAWL_DIR"] = str(target.datadir.crawl_dir(target.crawl.id))
    env["SNAP_DIR"] = str(target.owner_dir) if target.snapshot is not None else ""
    return env


def hook_timeout(hook: Hook, config: Config) -> int:
    return int(config.get(f"{hook.plugin.upper()}_TIMEOUT") or config["TIMEOUT"])


def left_files(folder: Path) -> bool:
    """Whether the hook left any output (pid files and hidden files do not count)."""
    if not folder.is_dir():
        return False
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and not path.name.endswith(".pid") and not any(p.startswith(".") for p in rel.parts):
            return True
    return False


class Attempt:
    """One run of one hook for one ArchiveResult."""

    def __init__(self, result: ArchiveResult, hook: Hook, target: Target, config: Config, worker: Process):
        self.result = result
        self.hook = hook
        self.target = target
        self.config = config
        self.worker = worker
        self.cwd = target.owner_dir / hook.plugin
        self.log_dir = target.owner_dir / HOOK_LOG_DIR
        self.timeout = hook_timeout(hook, config)
        self.grace = float(config["BG_HOOK_GRACE"])
        self.process: Process | None = None
        self.sink: RecordSink | None = None
        self.splitter = jsonl.LineSplitter()
        self.deadline = 0.0

    # -- start ---------------------------------------------------------------------------

    def launch(self) -> Process:
        self.process = Process.launch(
            hook_argv(self.hook, self.target, self.timeout),
            cwd=self.cwd,
            process_type=Process.Type.HOOK,
            env=hook_env(self.hook, self.target, self.config),
            parent=self.worker,
            timeout=self.timeout,
            log_dir=self.log_dir,
            log_name=self.hook.name,
        )
        self.deadline = time.monotonic() + self.timeout
        self.sink = RecordSink(self.result, self.target.snapshot, self.process, self.config, self.log)
        return self.process

    def log(self, message: str) -> None:
        """Problems with the hook's output go to its stderr log, beside its own messages."""
        path = self.process.stderr_path if self.process else str(self.log_dir / f"{self.hook.name}.stderr.log")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"[waybox] {self.hook.name}: {message}\n")

    # -- foreground ----------------------------------------------------------------------

    def run_foreground(self, should_stop) -> policy.HookRun:
        """Follow the hook's stdout file until it exits, applying records as they arrive.

        stdout goes to a file, not a pipe, so a hook outlives a worker that dies without
        losing what it reported; its exit wakes us through a pidfd, and the file is read
        every FOLLOW_INTERVAL_S meanwhile so records (a title, say) show while it runs.
        """
        pidfd = os.pidfd_open(self.process.pid)
        try:
            with open(self.process.stdout_path, "rb") as stdout:
                while True:
                    remaining = self.deadline - time.monotonic()
                    if remaining <= 0 or should_stop():
                        self._read_new(stdout)
                        return self._stop(timed_out=remaining <= 0)
                    exited, _, _ = select.select([pidfd], [], [], min(remaining, FOLLOW_INTERVAL_S))
                    self._read_new(stdout)
                    if exited:
                        break
                code = self.process.wait(10)
                self._read_new(stdout)
        finally:
            os.close(pidfd)
        for line in self.splitter.close():
            self.sink.accept(line)
        return self._outcome(code)

    def _read_new(self, stdout) -> None:
        for chunk in iter(lambda: stdout.read(READ_CHUNK), b""):
            for line in self.splitter.feed(chunk):
                self.sink.accept(line)

    def _stop(self, *, timed_out: bool) -> policy.HookRun:
        self.process.kill_tree(self.grace)
        run = self._outcome(self.process.exit_code)
        if timed_out:
            return policy.HookRun(run.exit_code, run.reported_status, run.left_files, True, self.timeout,
                                  error=run.error)
        return run

    # -- background and recovery ---------------------------------------------------------

    def finish_from_file(self, exit_code: int | None, stopped_at_seal: bool) -> policy.HookRun:
        """Apply everything a hook wrote to its stdout file (background hooks, crash recovery)."""
        if self.sink is None:
            self.sink = RecordSink(self.result, self.target.snapshot, self.process, self.config, self.log)
        path = Path(self.process.stdout_path) if self.process else None
        if path and path.exists():
            with open(path, "rb") as f:
                self._read_new(f)
            for line in self.splitter.close():
                self.sink.accept(line)
        run = self._outcome(exit_code)
        if stopped_at_seal:
            return policy.HookRun(run.exit_code, run.reported_status, run.left_files, stopped_at_seal=True,
                                  error=run.error)
        return run

    def _outcome(self, exit_code: int | None) -> policy.HookRun:
        return policy.HookRun(
            exit_code=exit_code,
            reported_status=self.sink.status if self.sink else None,
            left_files=left_files(self.cwd),
            error="; ".join(self.sink.errors) if self.sink else "",
        )

    def output_fields(self) -> dict:
        """The ArchiveResult fields this attempt's records set (paths made Snapshot-relative)."""
        sink = self.sink
        if sink is None:
            return {}
        prefix = self.hook.plugin
        return {
            "output_str": sink.output_str,
            "output_json": sink.output_json,
            "output_files": [f"{prefix}/{p}" for p in sink.output_files],
        }
