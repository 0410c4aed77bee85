from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
from django.db import models
from django.utils import timezone

from waybox import proc as osproc
from waybox.models.base import Row, queue_index
from waybox.models.machine import Machine

_CURRENT: dict[int, Process] = {}


def _from_epoch(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts is not None else None


class Process(Row):
    """An OS process waybox started or runs as, in one parent/child tree.

    The row is the record; `waybox.proc` holds the OS calls. A row is only ever matched to a
    live process after checking machine, start time and executable, so a recycled PID is
    never signalled.
    """

    class Type(models.TextChoices):
        CLI = "cli"
        ORCHESTRATOR = "orchestrator"
        WORKER = "worker"
        HOOK = "hook"
        BINARY = "binary"
        SERVER = "server"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        EXITED = "exited"

    machine = models.ForeignKey("waybox.Machine", on_delete=models.CASCADE, related_name="processes")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    process_type = models.CharField(max_length=16, choices=Type.choices, default=Type.BINARY, db_index=True)
    cmd = models.JSONField(default=list)
    pwd = models.CharField(max_length=4096, blank=True)
    env = models.JSONField(default=dict, blank=True, help_text="Only the keys waybox added; secrets redacted.")
    pid = models.IntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="The OS's start time of the process.")
    ended_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True, help_text="Null when unknown; negative = signal.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    retry_at = models.DateTimeField(null=True, blank=True)
    timeout = models.FloatField(null=True, blank=True)
    stdout_path = models.CharField(max_length=4096, blank=True)
    stderr_path = models.CharField(max_length=4096, blank=True)
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)

    class Meta:
        indexes = [queue_index("process"), models.Index(fields=["machine", "pid"], name="process_pid_idx")]
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.process_type} pid={self.pid} {self.status}"

    # -- finding rows ----------------------------------------------------------------------

    @classmethod
    def current(cls, process_type: str | None = None) -> Process:
        """The row for this OS process, created (and linked to its parent) on first call."""
        pid = os.getpid()
        cached = _CURRENT.get(pid)
        if cached is not None:
            if process_type and cached.process_type != process_type:
                cached.process_type = process_type
                cls.objects.filter(pk=cached.pk).update(process_type=process_type)
            return cached
        machine = Machine.current()
        row = cls._launched_row(machine, pid) or cls.get_by_pid(pid, machine)
        if row is None:
            me = psutil.Process(pid)
            row = cls.objects.create(
                machine=machine,
                parent=cls.get_by_pid(os.getppid(), machine),
                process_type=process_type or cls.Type.CLI,
                cmd=me.cmdline(),
                pwd=os.getcwd(),
                pid=pid,
                started_at=_from_epoch(me.create_time()),
                status=cls.Status.RUNNING,
            )
        elif process_type and row.process_type != process_type:
            row.process_type = process_type
            cls.objects.filter(pk=row.pk).update(process_type=process_type)
        _CURRENT[pid] = row
        return row

    @classmethod
    def _launched_row(cls, machine: Machine, pid: int) -> Process | None:
        """The row our launcher made for us, named by WAYBOX_PROCESS_ID in our environment."""
        row_id = os.environ.get(osproc.PROCESS_ID_ENV)
        if not row_id:
            return None
        row = cls.objects.filter(pk=row_id, machine=machine, pid=pid).first()
        if row is not None and row.status != cls.Status.RUNNING:
            return None
        return row

    @classmethod
    def get_by_pid(cls, pid: int, machine: Machine | None = None) -> Process | None:
        """The running row for a live PID on this machine, if its start time matches."""
        machine = machine or Machine.current()
        started = osproc.os_start_time(pid)
        if started is None:
            return None
        for row in cls.objects.filter(machine=machine, pid=pid, status=cls.Status.RUNNING).order_by("-started_at"):
            if row.started_at and abs(row.started_at.timestamp() - started) <= osproc.START_TIME_TOLERANCE_S:
                return row
        return None

    # -- the live process ----------------------------------------------------------------

    @property
    def proc(self) -> psutil.Process | None:
        """The live OS process, only if it is really this row's (machine, start time, program)."""
        if self.machine_id != Machine.current().id:
            return None
        started = self.started_at.timestamp() if self.started_at else None
        return osproc.find_live(self.pid, started, self.cmd)

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.RUNNING and self.proc is not None

    # -- launching -----------------------------------------------------------------------

    @classmethod
    def launch(
        cls,
        cmd: list[str],
        *,
        cwd: str | Path,
        process_type: str = Type.BINARY,
        env: dict[str, str] | None = None,
        parent: Process | None = None,
        timeout: float | None = None,
        log_dir: str | Path | None = None,
        log_name: str = "process",
        pipe_stdout: bool = False,
    ) -> Process:
        """Start `cmd` in its own process group with a pid file, cmd.sh and log files.

        With `pipe_stdout` the caller reads stdout from `process.popen.stdout` as it arrives
        (and is responsible for copying it to `stdout_path`); otherwise it goes to the file.
        """
        env = env or {}
        cwd = Path(cwd)
        cwd.mkdir(parents=True, exist_ok=True)
        logs = Path(log_dir) if log_dir else cwd
        logs.mkdir(parents=True, exist_ok=True)
        row = cls.objects.create(
            machine=Machine.current(),
            parent=parent if parent is not None else cls.current(),
            process_type=process_type,
            cmd=list(cmd),
            pwd=str(cwd),
            env=osproc.redact_env(env),
            status=cls.Status.QUEUED,
            timeout=timeout,
            stdout_path=str(logs / f"{log_name}.stdout.log"),
            stderr_path=str(logs / f"{log_name}.stderr.log"),
        )
        osproc.write_cmd_sh(logs / f"{log_name}.cmd.sh", list(cmd), str(cwd), env)
        try:
            popen = osproc.spawn(
                str(row.id), list(cmd), str(cwd), env, Path(row.stdout_path), Path(row.stderr_path),
                pipe_stdout=pipe_stdout,
            )
        except OSError as err:
            row.status, row.ended_at, row.stderr_tail = cls.Status.EXITED, timezone.now(), f"failed to start: {err}"
            row.save(update_fields=["status", "ended_at", "stderr_tail", "modified_at"])
            raise
        (logs / f"{log_name}.pid").write_text(f"{popen.pid}\n")
        started = osproc.os_start_time(popen.pid)
        row.pid = popen.pid
        row.started_at = _from_epoch(started) if started else timezone.now()
        row.status = cls.Status.RUNNING
        row.save(update_fields=["pid", "started_at", "status", "modified_at"])
        return row

    @property
    def popen(self) -> subprocess.Popen | None:
        return osproc.child_handle(str(self.id))

    # -- watching ------------------------------------------------------------------------

    def poll(self) -> int | None:
        """The exit code if the process has ended (recording it), else None."""
        if self.status == self.Status.EXITED:
            return self.exit_code
        popen = self.popen
        if popen is not None:
            code = popen.poll()
            if code is None:
                return None
            self.mark_exited(code)
            return code
        if self.proc is None:
            self.mark_exited(None)
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until exit (child handle, else pidfd); raises TimeoutError if still running."""
        if self.status == self.Status.EXITED:
            return self.exit_code
        popen = self.popen
        if popen is not None:
            try:
                code = popen.wait(timeout)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"{self} still running after {timeout}s") from None
            self.mark_exited(code)
            return code
        live = self.proc
        if live is not None and not osproc.wait_pid(live.pid, timeout):
            raise TimeoutError(f"{self} still running after {timeout}s")
        self.mark_exited(None)
        return None

    def mark_exited(self, exit_code: int | None) -> None:
        """Record the end; a second call changes nothing."""
        popen = self.popen
        if popen is not None and popen.stdout is not None and popen.returncode is not None:
            popen.stdout.close()
        secrets = osproc.secret_values(str(self.id))
        self.stdout_tail = osproc.redact_text(osproc.read_tail(self.stdout_path), secrets)
        self.stderr_tail = osproc.redact_text(osproc.read_tail(self.stderr_path), secrets)
        self.exit_code = exit_code
        self.ended_at = self.ended_at or timezone.now()
        updated = type(self).objects.filter(pk=self.pk).exclude(status=self.Status.EXITED).update(
            status=self.Status.EXITED, exit_code=exit_code, ended_at=self.ended_at,
            stdout_tail=self.stdout_tail, stderr_tail=self.stderr_tail, retry_at=None, modified_at=timezone.now(),
        )
        if not updated:
            self.refresh_from_db()
        self.status = self.Status.EXITED
        osproc.forget_child(str(self.id))

    # -- stopping ------------------------------------------------------------------------

    def terminate(self, grace: float = 5.0) -> int | None:
        """SIGTERM the process group, wait `grace` seconds, then SIGKILL the group."""
        if self.status == self.Status.EXITED:
            return self.exit_code
        live = self.proc
        if live is None:
            self.mark_exited(None)
            return None
        osproc.signal_group(live.pid, signal.SIGTERM)
        try:
            return self.wait(grace)
        except TimeoutError:
            osproc.signal_group(live.pid, signal.SIGKILL)
            return self.wait(10)

    def tree_procs(self) -> list[psutil.Process]:
        """This process and every live descendant, also double-forked ones.

        Descendants are found three ways: the OS's child list, `*.pid` files in the working
        folders of this row and its descendant rows, and the WAYBOX_PROCESS_ID each launched
        process and its own children inherit.
        """
        rows = [self, *self.get_descendants(include_exited=True)]
        markers = {str(r.id) for r in rows}
        targets: dict[int, psutil.Process] = {}
        for row in rows:
            live = row.proc if row.status == self.Status.RUNNING else None
            if live is None:
                continue
            targets[live.pid] = live
            for child in live.children(recursive=True):
                targets[child.pid] = child
        not_before = (self.started_at.timestamp() - osproc.START_TIME_TOLERANCE_S) if self.started_at else 0
        for row in rows:
            for pid in osproc.pids_from_files(Path(row.pwd)) if row.pwd else ():
                started = osproc.os_start_time(pid)
                if started is not None and started >= not_before and pid != os.getpid():
                    targets.setdefault(pid, psutil.Process(pid))
        for found in osproc.processes_with_marker(markers):
            targets.setdefault(found.pid, found)
        targets.pop(os.getpid(), None)
        return list(targets.values())

    def kill_tree(self, grace: float = 5.0) -> None:
        """Stop this process and every descendant (see `tree_procs`), then record the ends."""
        rows = [self, *self.get_descendants(include_exited=False)]
        osproc.terminate_procs(self.tree_procs(), grace)
        for row in rows:
            if row.status == self.Status.RUNNING:
                popen = row.popen
                row.mark_exited(popen.wait() if popen is not None else None)

    # -- crash recovery ------------------------------------------------------------------

    @classmethod
    def cleanup_stale_running(cls) -> int:
        """Mark rows `exited` (exit code unknown) whose process no longer exists.

        Covers this machine, and earlier boots of the same host: those PIDs cannot be alive.
        Rows of other live machines (another container sharing the database) are left alone.
        """
        machine = Machine.current()
        stale = 0
        earlier_boots = Machine.objects.filter(host_id=machine.host_id).exclude(boot_id=machine.boot_id)
        for row in cls.objects.filter(status__in=[cls.Status.RUNNING, cls.Status.QUEUED]).filter(
            models.Q(machine=machine) | models.Q(machine__in=earlier_boots)
        ):
            if row.status == cls.Status.QUEUED and row.created_at > timezone.now() - timedelta(minutes=1):
                continue  # being launched right now
            if row.machine_id == machine.id and row.proc is not None:
                continue
            row.mark_exited(None)
            stale += 1
        return stale

    # -- the tree ------------------------------------------------------------------------

    @property
    def ancestors(self) -> list[Process]:
        """Parent first, root last."""
        chain, seen, node = [], {self.pk}, self.parent
        while node is not None and node.pk not in seen:
            chain.append(node)
            seen.add(node.pk)
            node = node.parent
        return chain

    @property
    def root(self) -> Process:
        chain = self.ancestors
        return chain[-1] if chain else self

    @property
    def depth(self) -> int:
        return len(self.ancestors)

    def get_descendants(self, include_exited: bool = True) -> list[Process]:
        """Breadth-first, one query per level."""
        found: list[Process] = []
        level = [self.pk]
        seen = {self.pk}
        while level:
            children = list(type(self).objects.filter(parent_id__in=level).exclude(pk__in=seen))
            found += children
            seen.update(c.pk for c in children)
            level = [c.pk for c in children]
        if not include_exited:
            found = [p for p in found if p.status != self.Status.EXITED]
        return found


def register_entry_point(process_type: str) -> Process:
    """Record this waybox process (CLI, orchestrator, worker, server) and its end.

    SIGTERM becomes SystemExit so `finally` blocks and the exit record run; the exit
    itself is recorded by `register_exit`, called from the command wrapper.
    """
    row = Process.current(process_type)
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _exit_on_signal)
    return row


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def register_exit(code: object) -> None:
    """Record this process's own end (called on the way out of every entry point)."""
    row = _CURRENT.get(os.getpid())
    if row is None:
        return
    if code is None:
        exit_code = 0
    elif isinstance(code, int):
        exit_code = code
    else:
        exit_code = 1
    row.exit_code = exit_code
    Process.objects.filter(pk=row.pk).update(
        status=Process.Status.EXITED, exit_code=exit_code, ended_at=timezone.now(), modified_at=timezone.now()
    )
    _CURRENT.pop(os.getpid(), None)


def python_cmd(*args: str) -> list[str]:
    """How waybox starts another waybox process: the same interpreter, `-m waybox`."""
    return [sys.executable, "-m", "waybox", *args]
