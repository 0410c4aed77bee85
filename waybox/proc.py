"""The OS side of process tracking: the only module that starts, signals or reaps processes.

Everything waybox runs gets a `Process` row (waybox.models.process); the row's methods call
the functions here. Three guards keep us from acting on the wrong process:

* Machine identity covers host, boot and PID namespace, so a PID from another container or
  an earlier boot never matches a live process here.
* A PID matches a row only if the OS start time agrees within `START_TIME_TOLERANCE_S` and the
  executable is the same (or the process carries the row's marker, below). A child we hold a
  Popen handle for is ours without checks: its PID cannot be reused before we reap it.
* Every launched process carries `WAYBOX_PROCESS_ID=<row id>` in its environment, inherited by
  its descendants, so daemons that double-fork away from their parent are still found.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import math
import os
import platform
import re
import select
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

PROCESS_ID_ENV = "WAYBOX_PROCESS_ID"
START_TIME_TOLERANCE_S = 2.0
TAIL_CHARS = 4000
REDACTED = "********"
KILL_WAIT_S = 10.0  # how long SIGKILL may take to land

# Popen handles of children this process launched, by Process row id: `wait` uses them
# so exit codes are real and children are reaped.
_children: dict[str, subprocess.Popen] = {}
# Secret values each launched (or about-to-be-killed) process was given, by row id, so the
# log tails stored in its row can be scrubbed. A row id absent here: values unknown.
_secrets: dict[str, list[str]] = {}


# -- machine identity ----------------------------------------------------------------------


def _read_first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


@dataclass(frozen=True)
class MachineIdentity:
    guid: str
    hostname: str
    host_id: str
    boot_id: str
    pid_namespace: str


def machine_guid(host_id: str, hostname: str, boot_id: str, pid_namespace: str) -> str:
    """One PID space's name: equal only when host, boot and PID namespace are all equal.

    Kept free of I/O so the identity rules can be tested without a second machine.
    Fields are length-prefixed so that moving characters between them changes the result.
    """
    fields = (host_id, hostname, boot_id, pid_namespace)
    return hashlib.sha256("".join(f"{len(f)}:{f}|" for f in fields).encode()).hexdigest()


def machine_identity() -> MachineIdentity:
    hostname = socket.gethostname()
    host_id = _read_first_line("/etc/machine-id") or _read_first_line("/var/lib/dbus/machine-id") or hostname
    boot_id = _read_first_line("/proc/sys/kernel/random/boot_id")
    if not boot_id:
        boot_id = str(int(psutil.boot_time()))
    pidns = pid_namespace()
    return MachineIdentity(machine_guid(host_id, hostname, boot_id, pidns), hostname, host_id, boot_id, pidns)


def machine_facts() -> dict:
    return {
        "os_platform": platform.platform(),
        "cpu_count": os.cpu_count() or 0,
        "memory_total": psutil.virtual_memory().total,
    }


# -- looking at live processes --------------------------------------------------------------


def os_start_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


COMM_LEN = 15  # the kernel truncates process names (comm) to this many characters


def same_executable(proc: psutil.Process, cmd: list[str]) -> bool:
    """Whether the live process runs the program recorded in `cmd` (by path or by name).

    A script started directly (`./hook.sh`) shows up as its interpreter (`bash ./hook.sh`),
    so the recorded path may also be the interpreter's first arguments. A name that merely
    starts with the live one matches only when the kernel truncated the live name.
    """
    if not cmd:
        return True
    try:
        cmdline = proc.cmdline()
        names = {proc.name()}
        with contextlib.suppress(psutil.AccessDenied, psutil.ZombieProcess, OSError):
            names.add(os.path.basename(proc.exe()))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False
    if cmd[0] in cmdline[:3]:
        return True
    recorded = os.path.basename(cmd[0])
    names.update(os.path.basename(arg) for arg in cmdline[:1])
    if recorded in names:
        return True
    return any(len(n) == COMM_LEN and recorded.startswith(n) for n in names)


def read_environ(pid: int) -> dict[str, str] | None:
    """The environment a process was exec'd with; None when unreadable or empty (zombies)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for entry in raw.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env or None


def carries_marker(pid: int, marker: str | None) -> bool:
    env = read_environ(pid) if marker else None
    return bool(env) and env.get(PROCESS_ID_ENV) == marker


def find_live(
    pid: int | None, started_at: float | None, cmd: list[str], marker: str | None = None
) -> psutil.Process | None:
    """The live process with this pid if it is the one recorded.

    The start time must agree, and the program must be the recorded one or the process must
    carry the row's WAYBOX_PROCESS_ID (a wrapper that exec'd another program keeps it).
    """
    if not pid or started_at is None:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if abs(proc.create_time() - started_at) > START_TIME_TOLERANCE_S:
            return None
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    return proc if same_executable(proc, cmd) or carries_marker(pid, marker) else None


def descendants_of(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def processes_with_marker(markers: set[str]) -> list[psutil.Process]:
    """Live processes whose environment carries one of these WAYBOX_PROCESS_ID values."""
    found = []
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        env = read_environ(proc.pid)
        if env and env.get(PROCESS_ID_ENV) in markers:
            found.append(proc)
    return found


def pid_files(folder: Path) -> list[tuple[int, float]]:
    """(pid, file mtime) from `*.pid` files below a folder: how daemons declare themselves."""
    found: list[tuple[int, float]] = []
    if not folder.is_dir():
        return found
    for path in folder.rglob("*.pid"):
        with contextlib.suppress(OSError):
            text = path.read_text(errors="replace").strip() if path.is_file() else ""
            if text.isdigit():
                found.append((int(text), path.stat().st_mtime))
    return found


def pids_from_files(folder: Path) -> list[int]:
    """PIDs in `*.pid` files below a folder: how double-forked daemons declare themselves."""
    return [pid for pid, _mtime in pid_files(folder)]


def declared_process(pid: int, written_at: float, not_before: float) -> psutil.Process | None:
    """The process a pid file names, if it is plausibly the one that wrote it.

    It must have started after `not_before` (the owner's start) and before the file was
    written: a PID recycled after the daemon died started later than its pid file.
    """
    if pid == os.getpid():
        return None
    try:
        proc = psutil.Process(pid)
        started = proc.create_time()
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.Error:
        return None
    tolerance = START_TIME_TOLERANCE_S
    return proc if not_before - tolerance <= started <= written_at + tolerance else None


# -- launching ---------------------------------------------------------------------------


SECRET_ASSIGNMENT = re.compile(r"\b([A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|COOKIE|AUTH)[A-Z0-9_]*)=(\S+)")
URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^/\s@]+@")


def redact_env(env: dict[str, str], secrets: Iterable[str] = ()) -> dict[str, str]:
    from waybox.config import is_secret_key

    secrets = list(secrets)
    return {k: (REDACTED if is_secret_key(k) and v else redact_text(v, secrets)) for k, v in env.items()}


def secret_values_of(env: dict[str, str]) -> list[str]:
    from waybox.config import is_secret_key

    return [v for k, v in env.items() if is_secret_key(k) and v and len(v) >= 4]


def secret_values(row_id: str) -> list[str]:
    """Values to scrub from a process's log tails: its launch secrets and our own."""
    return [*_secrets.get(row_id, ()), *secret_values_of(dict(os.environ))]


def knows_secrets(row_id: str) -> bool:
    """Whether this OS process knows the secret values a launched process was given."""
    return row_id in _secrets


def learn_secrets(row_id: str, pid: int, keys: Iterable[str]) -> bool:
    """Read the secret values of `keys` from a live process's environment (before killing it).

    A process that did not launch the row (`waybox process kill`) needs them to scrub the
    log tails it stores.
    """
    if knows_secrets(row_id):
        return True
    env = read_environ(pid)
    if env is None:
        return False
    _secrets[row_id] = [env[k] for k in keys if len(env.get(k, "")) >= 4]
    return True


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Remove secret values, `SOME_TOKEN=...` assignments and URL passwords from text."""
    for value in sorted(set(secrets), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = SECRET_ASSIGNMENT.sub(rf"\1={REDACTED}", text)
    return URL_PASSWORD.sub(rf"\1{REDACTED}@", text)


def redact_cmd(cmd: list[str], secrets: Iterable[str]) -> list[str]:
    """A command line fit for the database and cmd.sh: secret values and `--token=...` hidden."""
    from waybox.config import is_secret_key

    secrets = list(secrets)
    out: list[str] = []
    hide_next = False
    for arg in cmd:
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
            hide_next = False
            continue
        name, eq, value = arg.partition("=")
        is_flag = name.startswith("-") and " " not in name
        secret_name = is_flag and is_secret_key(name.lstrip("-").replace("-", "_"))
        hide_next = secret_name and not eq
        if secret_name and value:
            arg = f"{name}={REDACTED}"
        out.append(redact_text(arg, secrets))
    return out


def write_cmd_sh(path: Path, cmd: list[str], cwd: str, env_keys: Iterable[str]) -> None:
    """A script a person can run to repeat the command (secret values are not written)."""
    lines = ["#!/usr/bin/env bash", f"# env keys set by waybox: {' '.join(sorted(env_keys))}",
             f"cd {shlex.quote(cwd)}", shlex.join(cmd)]
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o700)


def spawn(
    row_id: str,
    cmd: list[str],
    cwd: str,
    env: dict[str, str],
    stdout_path: Path,
    stderr_path: Path,
    *,
    pipe_stdout: bool,
) -> subprocess.Popen:
    """Start `cmd` in its own session and process group, stderr (and stdout) to files."""
    full_env = {**os.environ, **env, PROCESS_ID_ENV: row_id}
    stderr_file = open(stderr_path, "ab")  # noqa: SIM115 - handed to the child
    stdout_file = None if pipe_stdout else open(stdout_path, "ab")  # noqa: SIM115
    try:
        popen = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if pipe_stdout else stdout_file,
            stderr=stderr_file,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        stderr_file.close()
        if stdout_file:
            stdout_file.close()
    _children[row_id] = popen
    _secrets[row_id] = [*secret_values_of(env), *secret_values_of(dict(os.environ))]
    return popen


def child_handle(row_id: str) -> subprocess.Popen | None:
    return _children.get(row_id)


def forget_child(row_id: str) -> None:
    _children.pop(row_id, None)
    _secrets.pop(row_id, None)


# -- waiting and signalling ----------------------------------------------------------------


def _pidfd(proc: psutil.Process | int) -> int | None:
    """A pidfd for the process, None if it is gone (or its PID already belongs to another)."""
    pid = proc if isinstance(proc, int) else proc.pid
    try:
        fd = os.pidfd_open(pid)
    except OSError as err:
        if err.errno == errno.ESRCH:
            return None
        raise
    if not isinstance(proc, int) and not proc.is_running():  # pidfd opened on a recycled PID
        os.close(fd)
        return None
    return fd


def wait_exit(procs: Iterable[psutil.Process | int], timeout: float | None) -> list[psutil.Process | int]:
    """Wait until these processes have exited, at most `timeout` seconds; returns those still alive.

    Uses pidfds, which turn readable on exit without reaping, so our own children keep their
    exit status for their Popen handle (psutil's wait would reap them and lose it).
    """
    fds: dict[int, psutil.Process | int] = {}
    for proc in procs:
        fd = _pidfd(proc)
        if fd is not None:
            fds[fd] = proc
    deadline = None if timeout is None else time.monotonic() + timeout
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    try:
        while fds:
            left = None if deadline is None else max(0, math.ceil((deadline - time.monotonic()) * 1000))
            ready = poller.poll(left)
            if not ready:
                break
            for fd, _event in ready:
                poller.unregister(fd)
                os.close(fd)
                fds.pop(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return list(fds.values())


def wait_pid(pid: int, timeout: float | None) -> bool:
    """Wait for a process that is not our child to exit, without a sleep loop (pidfd)."""
    return not wait_exit([pid], timeout)


def wait_child(popen: subprocess.Popen, timeout: float | None) -> int | None:
    """Our child's exit code once it exits (reaping it), or None if still running after `timeout`."""
    if popen.poll() is not None:
        return popen.returncode
    if wait_exit([popen.pid], timeout):
        return None
    return popen.wait()


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid and pid != os.getpgid(0)
    except ProcessLookupError:
        return False


def signal_group(pid: int, sig: int) -> bool:
    """Send `sig` to the process group `pid` leads, or to `pid` alone if it leads none.

    Only a leader's group is signalled: a process that merely sits in some group (a shell
    pipeline, our own) must not take its neighbours down with it.
    """
    if not _leads_group(pid):
        return signal_pid(pid, sig)
    try:
        os.killpg(pid, sig)
        return True
    except ProcessLookupError:
        return False


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _signal(proc: psutil.Process, sig: int) -> None:
    """Signal a validated process (psutil refuses a recycled PID) and the group it leads."""
    try:
        if not proc.is_running():
            return
        if _leads_group(proc.pid):
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    except (psutil.Error, ProcessLookupError):
        pass


def group_of(proc: psutil.Process) -> list[psutil.Process]:
    """The process and, if it leads a process group, every other member of that group."""
    members = [proc]
    if not _leads_group(proc.pid):
        return members
    for other in psutil.process_iter():
        with contextlib.suppress(OSError):
            if other.pid != proc.pid and os.getpgid(other.pid) == proc.pid:
                members.append(other)
    return members


def terminate_procs(procs: list[psutil.Process], grace: float) -> list[psutil.Process]:
    """SIGTERM every process and its group, wait up to `grace`, then SIGKILL what is left.

    Nothing is reaped here: the owner of a Popen handle collects the real exit status.
    Returns the processes that survived even SIGKILL (uninterruptible sleep, say).
    """
    me = os.getpid()
    procs = list({p.pid: p for p in procs if p.pid != me}.values())
    for p in procs:
        _signal(p, signal.SIGTERM)
    alive = wait_exit(procs, grace) if procs else []
    for p in alive:
        _signal(p, signal.SIGKILL)
    return wait_exit(alive, KILL_WAIT_S) if alive else []


def reap_zombie_children() -> dict[str, int]:
    """Collect the exit status of every child we launched that has ended: {row id: code}.

    Only our own Popen handles are polled; `waitpid(-1)` would steal the status of children
    other code in this process is waiting for.
    """
    return {row_id: popen.returncode for row_id, popen in list(_children.items()) if popen.poll() is not None}


def read_tail(path: str, limit: int = TAIL_CHARS) -> str:
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit * 4))
            data = f.read()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def run_quick(cmd: list[str], timeout: float = 10) -> tuple[int | None, str]:
    """Run a short probe (e.g. `wget --version`) in its own group; kill the group on timeout.

    Probes are not recorded as Process rows: they run before a collection may exist and
    last milliseconds. Returns (exit code, stdout+stderr).
    """
    try:
        popen = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        return None, str(err)
    try:
        out, _ = popen.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        signal_group(popen.pid, signal.SIGKILL)
        out, _ = popen.communicate()
    return popen.returncode, out.decode("utf-8", errors="replace")
