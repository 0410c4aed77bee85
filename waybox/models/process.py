from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
from django.db import models
from django.utils import timezone

from waybox import proc as osproc
from waybox.models.base import Row, queue_index
from waybox.models.machine import Machine

_CURRENT: dict[int, Process] = {}
QUEUED_GRACE = timedelta(minutes=1)  # a queued row younger than this may be mid-launch
KILL_WAIT_S = osproc.KILL_WAIT_S
# Rows whose working folder is their own (a hook's plugin folder), so `*.pid` files in it are
# their daemons'; an orchestrator's folder is the whole data directory.
PID_FILE_TYPES = ("hook", "binary")


def _from_epoch(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts is not None else None


def _psutil_or_none(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.NoSuchProcess:
        return None


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
        row = _CURRENT.get(pid)
        if row is None:
            machine = Machine.current()
            row = cls._launched_row(machine, pid) or cls.get_by_pid(pid, machine) or cls._create_current(machine)
            _CURRENT[pid] = row
        if process_type and row.process_type != process_type:
            row.process_type = process_type
            cls.objects.filter(pk=row.pk).update(process_type=process_type)
        return row

    @classmethod
    def _create_current(cls, machine: Machine) -> Process:
        """A row for a process nobody launched through waybox (a CLI command, say)."""
        me = psutil.Process()
        return cls.objects.create(
            machine=machine,
            parent=cls.get_by_pid(me.ppid(), machine),
            process_type=cls.Type.CLI,
            cmd=osproc.redact_cmd(me.cmdline(), osproc.secret_values_of(dict(os.environ))),
            pwd=os.getcwd(),
            pid=me.pid,
            started_at=_from_epoch(me.create_time()),
            status=cls.Status.RUNNING,
        )

    @classmethod
    def _launched_row(cls, machine: Machine, pid: int) -> Process | None:
        """The row our launcher made for us, named by WAYBOX_PROCESS_ID in our environment.

        The launcher records our pid right after starting us, so we may get here first: a row
        without a pid is ours only if we lead our own session, as every launched process
        does (a descendant that inherited the marker does not).
        """
        row_id = os.environ.get(osproc.PROCESS_ID_ENV)
        if not row_id:
            return None
        row = cls.objects.filter(pk=row_id, machine=machine).exclude(status=cls.Status.EXITED).first()
        if row is None or row.pid not in (pid, None):
            return None
        if row.pid is None:
            if os.getsid(0) != pid:
                return None
            row.pid, row.started_at, row.status = pid, _from_epoch(psutil.Process().create_time()), cls.Status.RUNNING
            cls.objects.filter(pk=row.pk, pid__isnull=True).update(
                pid=row.pid, started_at=row.started_at, status=row.status
            )
        return row

    @classmethod
    def get_by_pid(cls, pid: int, machine: Machine | None = None) -> Process | None:
        """The running row of a live PID on this machine, validated like `proc` (start time, program)."""
        machine = machine or Machine.current()
        for row in cls.objects.filter(machine=machine, pid=pid, status=cls.Status.RUNNING).order_by("-started_at"):
            if row.proc is not None:
                return row
        return None

    # -- the live process ----------------------------------------------------------------

    @property
    def proc(self) -> psutil.Process | None:
        """The live OS process, only if it is really this row's (machine, start time, program)."""
        popen = self.popen
        if popen is not None:  # our unreaped child: its PID cannot have been reused
            return _psutil_or_none(popen.pid) if popen.poll() is None else None
        if self.machine_id != Machine.current().id:
            return None
        started = self.started_at.timestamp() if self.started_at else None
        return osproc.find_live(self.pid, started, self.cmd, marker=str(self.id))

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.RUNNING and self.proc is not None

    def _own_procs(self) -> list[psutil.Process]:
        """This row's live process and its OS descendants (not those of descendant rows)."""
        live = self.proc if self.status == self.Status.RUNNING else None
        return [live, *osproc.descendants_of(live)] if live is not None else []

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
        on_record: Callable[[Process], object] | None = None,
    ) -> Process:
        """Start `cmd` in its own process group with a pid file, cmd.sh and log files.

        With `pipe_stdout` the caller reads stdout from `process.popen.stdout` as it arrives
        (and is responsible for copying it to `stdout_path`); otherwise it goes to the file.
        The row and cmd.sh get the command and env with secret values redacted.
        `on_record` gets the row before the process starts, so whoever owns it can be linked
        to it first: a caller that dies mid-launch still leaves a row that finds the process.
        """
        env = env or {}
        cwd = Path(cwd)
        cwd.mkdir(parents=True, exist_ok=True)
        logs = Path(log_dir) if log_dir else cwd
        logs.mkdir(parents=True, exist_ok=True)
        secrets = [*osproc.secret_values_of(env), *osproc.secret_values_of(dict(os.environ))]
        shown_cmd = osproc.redact_cmd(list(cmd), secrets)
        row = cls.objects.create(
            machine=Machine.current(),
            parent=parent if parent is not None else cls.current(),
            process_type=process_type,
            cmd=shown_cmd,
            pwd=str(cwd),
            env=osproc.redact_env(env, secrets),
            status=cls.Status.QUEUED,
            timeout=timeout,
            stdout_path=str(logs / f"{log_name}.stdout.log"),
            stderr_path=str(logs / f"{log_name}.stderr.log"),
        )
        if on_record is not None:
            on_record(row)
        try:
            osproc.write_cmd_sh(logs / f"{log_name}.cmd.sh", shown_cmd, str(cwd), env)
            popen = osproc.spawn(
                str(row.id), list(cmd), str(cwd), env, Path(row.stdout_path), Path(row.stderr_path),
                pipe_stdout=pipe_stdout,
            )
        except OSError as err:
            row.status, row.ended_at, row.stderr_tail = cls.Status.EXITED, timezone.now(), f"failed to start: {err}"
            row.save(update_fields=["status", "ended_at", "stderr_tail", "modified_at"])
            raise
        started = osproc.os_start_time(popen.pid)
        row.pid = popen.pid
        row.started_at = _from_epoch(started) if started else timezone.now()
        row.status = cls.Status.RUNNING
        row.save(update_fields=["pid", "started_at", "status", "modified_at"])
        try:
            (logs / f"{log_name}.pid").write_text(f"{popen.pid}\n")
        except OSError:
            row.kill_tree(grace=1.0)  # started but not fully recorded (a full disk): never leave it running
            raise
        return row

    @property
    def popen(self) -> subprocess.Popen | None:
        return osproc.child_handle(str(self.id))

    # -- watching ------------------------------------------------------------------------

    def poll(self) -> int | None:
        """The exit code if the process has ended (recording it), else None.

        None also when it ended with an unknown code (not our child): check `status`.
        """
        if self.status == self.Status.EXITED:
            return self._reap_handle(timeout=0)
        popen = self.popen
        if popen is not None:
            code = popen.poll()
            if code is not None:
                self.mark_exited(code)
            return code
        if self.proc is None:
            self.mark_exited(None)
        return None

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until exit (child handle, else pidfd); raises TimeoutError if still running."""
        if self.status == self.Status.EXITED:
            return self._reap_handle(timeout)
        popen = self.popen
        if popen is not None:
            code = osproc.wait_child(popen, timeout)
            if code is None:
                raise TimeoutError(f"{self} still running after {timeout}s")
            self.mark_exited(code)
            return code
        live = self.proc
        if live is not None and not osproc.wait_pid(live.pid, timeout):
            raise TimeoutError(f"{self} still running after {timeout}s")
        self.mark_exited(None)
        return None

    def _reap_handle(self, timeout: float | None) -> int | None:
        """For a row already marked exited (maybe by another process) whose child we still hold:
        reap it, so no zombie stays, and record the real exit code the other could not know.
        """
        popen = self.popen
        code = osproc.wait_child(popen, timeout) if popen is not None else None
        if code is not None:
            self.mark_exited(code)
        return self.exit_code

    def mark_exited(self, exit_code: int | None) -> None:
        """Record the end. A second call only fills in an exit code the first did not know."""
        self._store_tails()
        now = timezone.now()
        fields = {"exit_code": exit_code, "stdout_tail": self.stdout_tail, "stderr_tail": self.stderr_tail,
                  "modified_at": now}
        rows = type(self).objects.filter(pk=self.pk)
        first = rows.exclude(status=self.Status.EXITED).update(
            status=self.Status.EXITED, ended_at=self.ended_at or now, retry_at=None, **fields
        )
        if not first and exit_code is not None:
            rows.filter(exit_code__isnull=True).update(**fields)
        self.refresh_from_db()
        popen = self.popen
        if popen is None or popen.returncode is not None:
            self._close_handle()

    def _store_tails(self) -> None:
        """Copy the ends of the log files into the row, scrubbed of the secrets it was given.

        A process that cannot know those values (it did not launch this one, and could not
        read its environment) stores no tails: the files are still there.
        """
        if self._secret_keys() and not osproc.knows_secrets(str(self.id)):
            self.stdout_tail = self.stderr_tail = ""
            return
        secrets = osproc.secret_values(str(self.id))
        self.stdout_tail = osproc.redact_text(osproc.read_tail(self.stdout_path), secrets)
        self.stderr_tail = osproc.redact_text(osproc.read_tail(self.stderr_path), secrets)

    def _secret_keys(self) -> list[str]:
        return [k for k, v in (self.env or {}).items() if v == osproc.REDACTED]

    def _close_handle(self) -> None:
        popen = self.popen
        if popen is not None and popen.stdout is not None:
            popen.stdout.close()
        osproc.forget_child(str(self.id))

    # -- stopping ------------------------------------------------------------------------

    def terminate(self, grace: float = 5.0) -> int | None:
        """SIGTERM the process group, wait `grace` seconds, then SIGKILL what is left of it.

        Returns the exit code: real for our children, None when unknown.
        """
        if self.poll() is not None or self.status == self.Status.EXITED:
            return self.exit_code
        live = self.proc
        if live is None:  # ended just now
            return self._record_end()
        osproc.learn_secrets(str(self.id), live.pid, self._secret_keys())
        osproc.terminate_procs(osproc.group_of(live), grace)
        return self._record_end()

    def tree_procs(self) -> list[psutil.Process]:
        """This process and every live descendant, also double-forked ones.

        Descendants are found four ways: the OS's child list, members of the process groups
        they lead, `*.pid` files in the working folders of hook rows in the tree, and the
        WAYBOX_PROCESS_ID each launched process and its own children inherit. Rows of other
        machines are left out: their PIDs mean nothing here.
        """
        return self._procs_of(self._local_tree_rows())

    def kill_tree(self, grace: float = 5.0) -> int:
        """Stop this process and every descendant (see `tree_procs`), then record the ends.

        Returns how many processes were signalled.
        """
        rows = self._local_tree_rows()
        for row in rows:
            live = row.proc if row.status == self.Status.RUNNING else None
            if live is not None:  # before it dies: to scrub its log tails in this process too
                osproc.learn_secrets(str(row.id), live.pid, row._secret_keys())
        procs = self._procs_of(rows)
        osproc.terminate_procs(procs, grace)
        for row in rows:
            row._record_end()
        return len(procs)

    def _local_tree_rows(self) -> list[Process]:
        here = Machine.current().id
        return [r for r in [self, *self.get_descendants(include_exited=True)] if r.machine_id == here]

    @staticmethod
    def _procs_of(rows: list[Process]) -> list[psutil.Process]:
        targets: dict[int, psutil.Process] = {}
        for row in rows:
            targets.update((p.pid, p) for p in row._own_procs())
        for row in rows:
            if row.process_type in PID_FILE_TYPES and row.stdout_path and row.pwd and row.started_at:
                for pid, written_at in osproc.pid_files(Path(row.pwd)):
                    found = osproc.declared_process(pid, written_at, row.started_at.timestamp())
                    if found is not None:
                        targets.setdefault(pid, found)
        for found in osproc.processes_with_marker({str(r.id) for r in rows}):
            targets.setdefault(found.pid, found)
        for found in list(targets.values()):
            targets.update((m.pid, m) for m in osproc.group_of(found))
        targets.pop(os.getpid(), None)
        return list(targets.values())

    def _record_end(self) -> int | None:
        """After signalling: record how it ended (the real code for our child, else unknown)."""
        if self.status == self.Status.EXITED:
            return self._reap_handle(KILL_WAIT_S)
        popen = self.popen
        if popen is not None:
            code = osproc.wait_child(popen, KILL_WAIT_S)
            if code is not None:
                self.mark_exited(code)
            return code
        if self.proc is None:
            self.mark_exited(None)
        return None

    # -- crash recovery ------------------------------------------------------------------

    @classmethod
    def cleanup_stale_running(cls) -> int:
        """Mark rows `exited` (exit code unknown) whose process no longer exists.

        Covers this machine, and earlier boots of the same host: those PIDs cannot be alive.
        Rows of other live machines (another container sharing the database) are left alone.
        Our own children that ended get their real exit code.
        """
        machine = Machine.current()
        stale = 0
        for row in cls.objects.filter(status__in=[cls.Status.RUNNING, cls.Status.QUEUED]).filter(
            models.Q(machine=machine) | models.Q(machine__in=cls._earlier_boots(machine))
        ):
            if row.status == cls.Status.QUEUED and row.created_at > timezone.now() - QUEUED_GRACE:
                continue  # being launched right now
            if row.machine_id == machine.id and (row.popen is not None or row.proc is not None):
                row.poll()  # records the real code if our child has ended
                stale += row.status == cls.Status.EXITED
                continue
            row.mark_exited(None)
            stale += 1
        return stale

    @staticmethod
    def _earlier_boots(machine: Machine) -> models.QuerySet:
        """Machines that were this host before the current boot.

        Same machine-id and hostname, another boot id, and not seen since this boot began:
        a container image with a baked-in machine-id, running on another host right now,
        keeps its rows.
        """
        booted = _from_epoch(psutil.boot_time())
        return Machine.objects.filter(
            host_id=machine.host_id, hostname=machine.hostname, last_seen__lt=booted
        ).exclude(boot_id=machine.boot_id)

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
